"""Declarations → `TableSpec`s: upstreams ordered first, every name checked, each kind built, checks defaulted."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pyspark.sql import DataFrame

from pipelines.authoring import schemas
from pipelines.authoring.declarations import Declaration, DeclarationError, FlowDeclaration, Param
from pipelines.sources.kinds import kind_of
from pipelines.sources.streams import late_output
from pipelines.spec.expectations import Expectation, schema_matches
from pipelines.spec.modes import check_query_mode
from pipelines.spec.rules import Rule, key_rules, landed_rules
from pipelines.spec.sources import Source, StaticSource, TableChangesSource, TableSource
from pipelines.spec.tables import MAIN_FLOW, Flow, OutputTable, TableSpec


def ordered(declarations: Iterable[Declaration], problems: list[str] | None = None) -> list[Declaration]:
    """Declarations with every upstream before its readers (declaration order otherwise).

    A table declared twice, an input no dataset declares, and a cycle raise a DeclarationError; with `problems`,
    their lines are added there instead and the tables at fault (and their readers) are left out.
    """

    def report(error: DeclarationError) -> None:
        if problems is None:
            raise error
        problems.append(str(error))

    by_name: dict[str, Declaration] = {}
    for d in declarations:
        if d.name in by_name:
            report(d.error(f"is also declared at {by_name[d.name].where}", "declare each table once (or pass name=)"))
            continue
        by_name[d.name] = d
    done: dict[str, bool] = {}
    failed: set[str] = set()
    out: list[Declaration] = []

    def visit(d: Declaration, path: list[Declaration]) -> bool:
        if done.get(d.name):
            return d.name not in failed
        if d.name in done:
            cycle = path[path.index(d) :]
            places = " → ".join(f"{x.name} ({x.where})" for x in [*cycle, d])
            raise d.error(f"its inputs form a cycle: {places}", "a table cannot read itself; break the cycle")
        done[d.name] = False
        for param in d.params:
            upstream = by_name.get(param.table)
            if upstream is None:
                raise d.error(
                    f"parameter {param.name!r} reads {param.table!r}, which no dataset declares",
                    f"declare it or rename the parameter (known tables: {', '.join(sorted(by_name)) or 'none'})",
                )
            if not visit(upstream, [*path, d]):
                failed.add(d.name)
                done[d.name] = True
                return False
        done[d.name] = True
        out.append(d)
        return True

    for d in by_name.values():
        try:
            visit(d, [])
        except DeclarationError as exc:
            report(exc)
            stuck = [name for name, finished in done.items() if not finished]
            failed.update(stuck)
            done.update(dict.fromkeys(stuck, True))
    return out


def runner_params(d: Declaration) -> tuple[Param, ...]:
    """Parameters in the order the runner passes inputs: the first stream, then the others as declared."""
    main = next(p for p in d.params if not p.static)
    return (main, *(p for p in d.params if p is not main))


def _caller(d: Declaration) -> Callable[..., DataFrame]:
    """The author's function over inputs in runner order (identity for a table without a function)."""
    fn = d.fn
    if fn is None:
        return lambda df: df
    if d.source is not None:
        return fn
    names = [p.name for p in runner_params(d)]
    return lambda *frames: fn(**dict(zip(names, frames, strict=True)))


def _checks(d: Declaration, kind_checks: tuple[Expectation, ...]) -> tuple[Expectation, ...]:
    landing: tuple[Expectation, ...] = ()
    if d.source is not None:
        for source in (d.source, *(f.source for f in d.flows)):
            kind = kind_of(source)
            landing = (*landing, *(kind.landing_checks() if d.layer == "bronze" else ()), *kind.row_checks())
    out: list[Expectation] = []
    for check in (schema_matches(), *landing, *kind_checks, *d.checks):
        if check not in out:
            out.append(check)
    return tuple(out)


def _partition_by(d: Declaration) -> tuple[str, ...]:
    if d.partition_by:
        return d.partition_by
    by: tuple[str, ...] = getattr(d.write, "by", ())
    time: str = getattr(d.write, "time", "")
    if d.source is not None and d.layer == "bronze":
        return ("days(_ingested_at)",)
    if time and d.write.validates:
        return (f"days({time})",)
    return by if len(by) == 1 else ()


def build_spec(d: Declaration, specs: dict[str, TableSpec]) -> TableSpec:
    """The `TableSpec` of one declaration whose upstreams are already in `specs`."""
    kind = d.write
    if d.rules and not kind.validates:
        raise d.error("declares row expectations but its write kind keeps no quarantine", "use write=dedupe(...)")
    if d.late and not d.watermarked:
        raise d.error("declares late=True without a watermark", "add watermark=('event_time', '10 minutes')")
    if d.late:
        unwatermarked = [p.name for p in d.params if not p.static and d.watermark_for(p) is None]
        if unwatermarked:
            raise d.error(
                f"declares late=True but stream {unwatermarked[0]!r} has no watermark (lateness is judged on "
                "every stream)",
                f"add {unwatermarked[0]!r} to watermark={{...}}",
            )
    if kind.recomputes and (d.source is not None or len(d.streams) != 1):
        raise d.error("recompute(...) reads one upstream table", "read other tables whole (parameter = static)")
    follows = _follows_changes(d, specs)
    main = d.params and runner_params(d)[0]
    upstream = specs.get(main.table) if main else None
    landed = upstream is not None and upstream.source.lands
    rules: tuple[Rule, ...] = d.rules
    if kind.validates:
        rules = (*(landed_rules(upstream.name) if landed else ()), *key_rules(kind.keys, d.rules), *d.rules)
    own = [r.name for r in d.rules]
    platform = {r.name for r in rules[: len(rules) - len(own)]}
    clash = next((n for n in own if own.count(n) > 1 or n in platform), None)
    if clash:
        # A name is a rejected row's reason and a run's failure count: two rules under one would be counted as one.
        what = (
            f"names a row expectation {clash!r}, the name of the platform's own rule on landed rows"
            if clash in platform
            else f"declares two row expectations named {clash!r}"
        )
        raise d.error(
            f"{what} (a name is the reason a row is quarantined)",
            "give each expectation its own name",
        )
    call = _caller(d)
    transform = kind.transform(d, rules, call)
    params = runner_params(d) if d.params else ()

    def plan(frames: list[DataFrame]) -> DataFrame:
        ordered_frames = [frames[d.params.index(p)] for p in params] if params else frames
        return (call if kind.recomputes else transform)(*ordered_frames)

    partition_by = _partition_by(d)
    # A default days(<time>) partitioning may become coarser from the upstream's days when the table is created.
    grain_from = main.table if main and not d.partition_by else None

    def check_stream(df: DataFrame) -> None:
        check_query_mode(spec, df)  # `spec` is bound below, before any schema is inferred

    infer = schemas.inferrer(d, specs, plan, kind.finish, check_stream, streaming=not (kind.recomputes or follows))
    output = OutputTable(d.name, d.schema, partition_by, grain_from, infer=infer)
    built = kind.build(d, output, rules, call)
    late = (late_output(f"{d.name}_late"),) if d.late else ()
    secondary: list[TableSource | StaticSource] = [
        StaticSource(p.table) if p.static else TableSource(p.table, watermark=d.watermark_for(p)) for p in params[1:]
    ]
    keys = d.keys or kind.keys
    for key in keys:
        if not key.isidentifier():
            raise d.error(f"key {key!r} is not a column name", "name columns of the table")
    spec = TableSpec(
        output=output,
        layer=d.layer,
        description=d.description,
        source=_source(d, specs, main, follows),
        transform=transform,
        sink=built.sink,
        keys=keys,
        watermark=d.watermark_for(main) if main else None,
        output_mode=built.output_mode,  # type: ignore[arg-type]
        extra_outputs=(*built.extra_outputs, *late),
        maintenance=d.maintenance,
        secondary_sources=tuple(secondary),
        late_table=late[0].name if late else None,
        expectations=_checks(d, built.checks),
        table_format=d.format,
        serve=d.layer == "gold" if d.serve is None else d.serve,
        flows=tuple(_flow(d, f) for f in d.flows),
    )
    return spec


def _follows_changes(d: Declaration, specs: dict[str, TableSpec]) -> bool:
    """Whether `d` streams a table that updates or deletes rows, and so follows its changes; a kind that cannot
    take a row back, or a watermark (a window Spark emitted is final), is refused naming both tables."""
    changing = [t for t in d.streams if t in specs and not specs[t].sink.appends_only]
    if not changing:
        return False
    table = changing[0]
    writes = f"{table} (written by {specs[table].sink.label}, which updates and deletes rows)"
    whole = f"read {table} whole (parameter = tb.static)"
    if d.watermarked:
        raise d.error(
            f"streams {writes} through a watermark: a window or join row Spark has emitted is final and cannot "
            "take a changed row back",
            f"{whole}, or drop the watermark and declare write=tb.recompute(by=...) or tb.replace()",
        )
    if not d.write.follows_changes:
        kind = type(d.write).__name__.lower()
        article = "an" if kind[0] in "aeiou" else "a"
        raise d.error(
            f"streams {writes}, but {article} {kind} table only adds rows: it would keep every row {table} has "
            "since changed or deleted",
            f"{whole}, or declare write=tb.recompute(by=..., keys=...), tb.replace() or tb.upsert(...)",
        )
    if d.write.keys and not d.write.recomputes and len(d.streams) > 1:  # an upsert joining two streams
        raise d.error(
            f"upserts from two streams, and {table} updates and deletes rows",
            f"{whole}, or declare write=tb.replace()",
        )
    return True


def _source(d: Declaration, specs: dict[str, TableSpec], main: Param | None, follows: bool) -> Source:
    """What the table reads: its declared source, its main upstream's changes, or its main upstream's appends."""
    if d.source is not None:
        return d.source
    assert main
    if follows:
        return TableChangesSource(main.table, keys=specs[main.table].keys)
    return TableSource(main.table)


def _flow(d: Declaration, flow: FlowDeclaration) -> Flow:
    """A further flow into `d`'s table, checked against the table's own source."""
    if d.source is None:
        raise d.error(
            f"flow {flow.name!r} ({flow.where}) feeds it, but it reads other tables",
            "feed flows into a table declared with tb.landing(...) or source=",
        )
    if flow.name == MAIN_FLOW or any(f.name == flow.name for f in d.flows[: d.flows.index(flow)]):
        raise d.error(f"two flows are named {flow.name!r} ({flow.where})", "give each flow its own name=")
    same_kind = kind_of(flow.source).lineage() == kind_of(d.source).lineage()
    if not (same_kind or (flow.source.lands and d.source.lands)):
        raise d.error(
            f"flow {flow.name!r} ({flow.where}) reads {flow.source.label}, the table {d.source.label}",
            "mix only landed files and Kafka topics in one table; other kinds feed a table of their own",
        )
    if getattr(flow.source, "schema", None) != getattr(d.source, "schema", None):
        raise d.error(
            f"flow {flow.name!r} ({flow.where}) declares other columns than the table's source",
            "declare the same schema for every flow into the table",
        )
    return Flow(flow.name, flow.source, flow.once)
