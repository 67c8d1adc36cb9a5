"""Declaring sinks: `tb.sink(name, table, to=...)` beside the tables, with one function per destination kind.

tb.sink("orders_to_kafka", "silver.orders", to=tb.kafka_topic("orders"))
tb.sink("revenue_to_app", "gold.daily_revenue", to=tb.jdbc_table(tb.setting("APP_DB_URL", ""), "public.revenue"))
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.errors import ConfigError
from pipelines.authoring.declarations import DeclarationError, caller_module, place
from pipelines.authoring.decorators import setting as setting_value
from pipelines.deliver.jdbc_table import JdbcTable
from pipelines.deliver.kafka_topic import KafkaTopic
from pipelines.deliver.table_path import TablePath
from pipelines.spec.delivery import Destination, SinkSpec


@dataclass(frozen=True)
class SinkDeclaration:
    """One `tb.sink(...)`: the sink and the module that declared it."""

    sink: SinkSpec
    module: str


# Every sink declared in this process, in order; `pipelines.authoring.load` takes those of the datasets it loads.
SINKS: list[SinkDeclaration] = []


def _keys(keys: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return (keys,) if isinstance(keys, str) else tuple(keys)


def kafka_topic(topic: str, keys: str | tuple[str, ...] = (), partitions: int = 3) -> KafkaTopic:
    """Deliver to Kafka `topic` (on `TRIBUTARY_KAFKA_BOOTSTRAP`): one JSON message per row, keyed by `keys`
    (default: the table's keys), tombstones for deleted keys; `partitions` when the sink creates the topic."""
    try:
        return KafkaTopic(topic, _keys(keys), partitions)
    except ConfigError as exc:
        raise DeclarationError(f"{place()}: {exc}") from None


def jdbc_table(url: str, table: str, keys: str | tuple[str, ...] = ()) -> JdbcTable:
    """Deliver to PostgreSQL table `table` (`schema.table`) of the database at `url`
    (`postgresql://user:password@host:port/db`; pass it with `tb.setting(...)` to keep the password out of the
    code): with `keys` (default: the table's keys) rows are inserted or updated by key and deleted keys deleted."""
    if not url:
        raise DeclarationError(f"{place()}: the sink's database URL is empty; set it (e.g. with tb.setting(...))")
    try:
        return JdbcTable(url, table, _keys(keys))
    except ConfigError as exc:
        raise DeclarationError(f"{place()}: {exc}") from None


def table_path(format: str, path: str, keys: str | tuple[str, ...] = ()) -> TablePath:
    """Deliver to the Delta table at `path` (a local folder, e.g. another team's lakehouse table; created on the
    first delivery): with `keys` (default: the table's keys) one MERGE per delivery, else appends."""
    try:
        return TablePath(format, path, _keys(keys))
    except ConfigError as exc:
        raise DeclarationError(f"{place()}: {exc}") from None


def sink(name: str, table: str, *, to: Destination) -> SinkSpec:
    """Declare sink `name`: every change of registry table `table` delivered exactly once to `to`."""
    where = place()
    if not isinstance(to, Destination):
        raise DeclarationError(
            f"{where}: sink {name!r}: to= must be tb.kafka_topic(...), tb.jdbc_table(...) or tb.table_path(...)"
        )
    return record_sink(SinkSpec(name, table, to, where), caller_module())


def record_sink(spec: SinkSpec, module: str) -> SinkSpec:
    """Keep `spec`, declared by `module`; a module imported again replaces its own earlier declaration."""
    declared = SinkDeclaration(spec, module)
    for i, old in enumerate(SINKS):
        if old.module == module and old.sink.where == spec.where:
            SINKS[i] = declared
            return spec
    SINKS.append(declared)
    return spec


_SQL_KINDS = {
    "kafka": ("<topic>", 1, lambda args: KafkaTopic(args[0])),
    "postgres": ("$<URL_SETTING> <schema.table>", 2, lambda args: JdbcTable(args[0], args[1])),
    "delta": ("<absolute_path>", 1, lambda args: TablePath("delta", args[0])),
}


def sql_sink(text: str, table: str, where: str) -> SinkSpec:
    """The sink of a `.sql` table's header line `-- sink: <name> <kind> <arguments>`: `kafka <topic>`,
    `postgres $<SETTING> <schema.table>` (the URL from the `TRIBUTARY_<SETTING>` variable, never written in the
    file) or `delta <path>`; keys are the table's. The caller records it (`record_sink`) once its table is declared."""
    words = text.split()
    usage = "; ".join(f"{kind} {args}" for kind, (args, _, _) in _SQL_KINDS.items())
    if len(words) < 2 or words[1] not in _SQL_KINDS:
        raise DeclarationError(f"{where}: sink header {text!r} is not '<name> <kind> <arguments>' with kind {usage}")
    name, kind, args = words[0], words[1], words[2:]
    expected, count, make = _SQL_KINDS[kind]
    if len(args) != count:
        raise DeclarationError(f"{where}: sink {name!r}: '{kind}' takes {expected}, got {' '.join(args) or 'nothing'}")
    if kind == "postgres":
        if not args[0].startswith("$"):
            raise DeclarationError(
                f"{where}: sink {name!r}: give the database URL as $<SETTING> (read from TRIBUTARY_<SETTING>), "
                "never in the file"
            )
        setting = args[0][1:]
        args = [setting_value(setting, ""), args[1]]
        if not args[0]:
            raise DeclarationError(f"{where}: sink {name!r}: TRIBUTARY_{setting.upper()} is not set; set it to the URL")
    try:
        destination = make(args)
    except ConfigError as exc:
        raise DeclarationError(f"{where}: sink {name!r}: {exc}") from None
    return SinkSpec(name, table, destination, where)


def sinks_of(modules: list[str]) -> list[SinkSpec]:
    """The sinks declared by `modules` (and their submodules)."""
    return [d.sink for d in SINKS if any(d.module == name or d.module.startswith(f"{name}.") for name in modules)]
