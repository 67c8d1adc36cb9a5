"""The declarative table registry: an ordered, validated set of `TableSpec`s; runs, assets and checks follow."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import replace

from infra.errors import ConfigError
from infra.identifiers import validate_table_name
from pipelines.spec.delivery import SinkSpec
from pipelines.spec.modes import check_spec_modes
from pipelines.spec.strategy import Sink
from pipelines.spec.tables import LAYERS, TableSpec


def _check_landing_spec(spec: TableSpec) -> None:
    """A landing source's transform runs per batch, after each landed file is checked (pipelines.sources.file_health) or
    each Kafka message is parsed (pipelines.sources.kafka)."""
    spec.source.validate(spec.name)
    streaming = {
        "a watermark": spec.watermark is not None,
        "secondary sources": bool(spec.secondary_sources),
        "a late table": spec.late_table is not None,
        f"output_mode {spec.output_mode!r}": spec.output_mode != "append",
    }
    for what, declared in streaming.items():
        if declared:
            raise ConfigError(
                f"table {spec.name!r} reads {spec.source.label}"
                f" and declares {what}; a landing table is written per batch: land rows in bronze and declare "
                "windows, joins and watermarks on a table that reads it"
            )
    if getattr(spec.source, "schema_evolution", None) == "add_new_columns" and spec.layer != "bronze":
        raise ConfigError(
            f"table {spec.name!r}: schema_evolution='add_new_columns' adds columns to a bronze table; a "
            f"{spec.layer} table's columns come from its transform (use 'rescue' or 'fail')"
        )


def _archives(spec: TableSpec, folder: str) -> bool:
    """Whether a flow of `spec` that reads landing folder `folder` archives it."""
    return any(f.source.archives() for f in spec.all_flows() if f.source.landing_folder_name() == folder)


def _check_archived_folder(spec: TableSpec, first: TableSpec, folder: str) -> None:
    """An archived landing folder is read by one table: archiving takes the files away from any other reader."""
    if first is not spec and (_archives(spec, folder) or _archives(first, folder)):
        archiving = spec if _archives(spec, folder) else first
        raise ConfigError(
            f"table {archiving.name!r} archives landing folder {folder!r}, which {first.name!r} and "
            f"{spec.name!r} both read; archived files would never reach the other table: read the folder once "
            "(into bronze) and let the other table read that table, or set archive=False"
        )


_SINK_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class Registry:
    """An ordered, validated set of table specs."""

    def __init__(self, specs: Iterable[TableSpec] = ()):
        self._specs: dict[str, TableSpec] = {}
        self._written: set[str] = set()
        self._folders: dict[str, TableSpec] = {}
        self._sinks: dict[str, SinkSpec] = {}
        for spec in specs:
            self.add(spec)

    def add_sink(self, sink: SinkSpec) -> SinkSpec:
        """Check `sink` against the tables (a ConfigError names it), keep it and return it as kept: a destination
        declared without keys takes those of the table it follows."""
        if not _SINK_NAME.match(sink.name):
            raise ConfigError(
                f"sink name {sink.name!r} must be lower-case letters, digits and _, starting with a letter"
            )
        if sink.name in self._sinks:
            raise ConfigError(f"sink {sink.name!r} is declared twice")
        if sink.table not in self._specs:
            raise ConfigError(f"sink {sink.name!r} follows {sink.table!r}, which no dataset declares")
        table = self._specs[sink.table]
        sink = replace(sink, destination=sink.destination.with_keys(table.keys))
        keys = sink.destination.keys
        columns = set(table.output.schema.fieldNames())
        missing = [k for k in keys if k not in columns]
        if missing:
            raise ConfigError(
                f"sink {sink.name!r}: key {missing[0]!r} is not a column of {sink.table} (its columns: "
                f"{', '.join(sorted(columns))})"
            )
        self._sinks[sink.name] = sink
        return sink

    @property
    def sinks(self) -> list[SinkSpec]:
        """The declared sinks, in declaration order (`pipelines.deliver`)."""
        return list(self._sinks.values())

    def add(self, spec: TableSpec) -> None:
        """Check `spec` against itself and the tables before it, then keep it (a ConfigError names the table)."""
        outputs = [out.name for out in spec.outputs()]
        for name in outputs:
            validate_table_name(name)
            if name in self._written or outputs.count(name) > 1:
                raise ConfigError(f"table {name!r} is declared twice in the registry")
        if spec.layer not in LAYERS:
            raise ConfigError(f"table {spec.name!r}: layer {spec.layer!r} is not one of {LAYERS}")
        if not isinstance(spec.sink, Sink):
            raise ConfigError(
                f"table {spec.name!r}: sink {type(spec.sink).__name__} is not a write strategy; subclass "
                "pipelines.spec.strategy.Sink (or use one of pipelines.write)"
            )
        spec.maintenance.validate(spec.name)
        if spec.source.ingests:
            _check_landing_spec(spec)
        folders = [f for flow in spec.all_flows() if (f := flow.source.landing_folder_name()) is not None]
        for flow in spec.flows:
            flow.source.validate(spec.name)
        repeated = sorted({f for f in folders if folders.count(f) > 1})
        if repeated:
            raise ConfigError(
                f"table {spec.name!r} reads landing folder {repeated[0]!r} in two flows, which would land each file "
                "twice; read each folder in one flow"
            )
        for folder in folders:
            _check_archived_folder(spec, self._folders.get(folder, spec), folder)
        if spec.output.name.split(".")[0] != spec.layer:
            raise ConfigError(f"table {spec.name!r} must live in the {spec.layer!r} namespace")
        for upstream in spec.upstreams:
            if upstream not in self._specs:
                raise ConfigError(
                    f"table {spec.name!r} reads {upstream!r}, which is not declared before it in the registry"
                )
        check_spec_modes(spec)
        self._written.update(outputs)
        for folder in folders:
            self._folders.setdefault(folder, spec)
        self._specs[spec.name] = spec

    def __iter__(self) -> Iterator[TableSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def get(self, name: str) -> TableSpec:
        """The spec for `name`, or a ConfigError listing the tables that exist."""
        validate_table_name(name)
        try:
            return self._specs[name]
        except KeyError:
            raise ConfigError(f"no table {name!r} in the registry; known tables: {', '.join(self._specs)}") from None

    def downstream_of(self, name: str) -> list[TableSpec]:
        """Specs that stream from `name` (as main or secondary stream; static reads are not streams)."""
        return [
            s
            for s in self._specs.values()
            if s.upstream == name or any(x.streamed_table() == name for x in s.secondary_sources)
        ]

    def downstream_closure(self, tables: Iterable[str]) -> list[TableSpec]:
        """The specs of `tables` and every spec that reads them directly or indirectly, in registry order."""
        names = {self.get(table).name for table in tables}
        chain = []
        for spec in self._specs.values():
            if spec.name in names or names.intersection(spec.upstreams):
                names.add(spec.name)
                chain.append(spec)
        return chain
