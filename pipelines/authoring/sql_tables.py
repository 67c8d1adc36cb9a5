"""Tables written as one `SELECT` in a `.sql` file, the way analysts and dbt users write models.

The header comment says what the file alone cannot (the name defaults to `gold.<file name>`):

    -- keys: event_date, category, currency
    -- refresh: recompute by event_date          (or: replace)
    -- description: Orders and revenue per day.
    -- sink: revenue_to_app postgres $APP_DB_URL app.revenue   (kafka <topic>, delta <path>; may repeat)
    SELECT ... FROM silver.events WHERE ... GROUP BY ...

Tables are named `<layer>.<table>`. The first one read is the stream the table follows; any other is a
reference table read whole. `recompute by` keeps the table exact per touched value (the SELECT runs on the
upstream rows of those values); `replace` re-runs the whole SELECT on every run (complete mode).
"""

from __future__ import annotations

import re
from pathlib import Path

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame

from infra.errors import first_line
from pipelines.authoring.declarations import Declaration, DeclarationError, Param, short_path
from pipelines.authoring.kinds import Kind, recompute, replace
from pipelines.authoring.sinks import record_sink, sql_sink
from pipelines.spec.tables import LAYERS

_HEADER = re.compile(r"^--\s*([a-z_]+)\s*:\s*(.*?)\s*$")
_TABLE = re.compile(r"\b(bronze|silver|gold)\.([A-Za-z_][A-Za-z0-9_]*)\b")
_QUOTED = re.compile(r"'(?:[^']|'')*'")
_POSITION = re.compile(r"[(;]?\s*line (\d+),? pos \d+\)?")
_NEAR = re.compile(r"at or near '([^']*)'")
_KEYS = ("table", "keys", "refresh", "description", "partition_by", "sink")


def _sql_error(exc: Exception, path: Path, name: str, views: dict[str, str]) -> DeclarationError:
    """One line naming the file and the line of the SELECT that Spark could not parse or analyse."""
    text = str(exc)
    for table, view in views.items():
        text = text.replace(view, table)
    position = _POSITION.search(text)
    message = _POSITION.sub("", first_line(Exception(text))).strip().rstrip(".;")
    what = "SQL syntax error" if isinstance(exc, ParseException) else "the SELECT cannot be analysed"
    # "end of input" is reported on the line after the last one.
    lines = path.read_text(encoding="utf-8").rstrip().splitlines()
    line = min(int(position.group(1)), len(lines)) if position else _line_of_token(text, lines)
    return DeclarationError(f"{short_path(str(path))}:{line}: table {name!r}: {what}: {message}; fix the SELECT")


def _line_of_token(text: str, lines: list[str]) -> int:
    """Where Spark gave no position (Spark 4.1 gives none for an error at the end of the text): the last line that
    holds the token it names, else the first."""
    token = _NEAR.search(text)
    if token is None or not token.group(1).strip():
        return 1
    found = [i for i, line in enumerate(lines, 1) if token.group(1).lower() in line.lower()]
    return found[-1] if found else 1


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _kind(refresh: str, keys: tuple[str, ...], where: str) -> Kind:
    words = refresh.split(None, 2)
    if words[:2] == ["recompute", "by"] and len(words) == 3 and keys:
        return recompute(by=_names(words[2]), keys=keys)
    if refresh == "replace":
        return replace()
    raise DeclarationError(
        f"{where}: refresh {refresh!r} is not 'recompute by <columns>' (with '-- keys: ...') or 'replace'"
    )


def sql_declaration(path: Path, module: str) -> Declaration:
    """The declaration of the table in `path`; errors name the file and line."""
    text = path.read_text(encoding="utf-8")
    header: dict[str, str] = {}
    sinks: list[tuple[int, str]] = []  # `-- sink:` may repeat
    for number, line in enumerate(text.splitlines(), 1):
        match = _HEADER.match(line.strip())
        if not match:
            break
        if match.group(1) not in _KEYS:
            raise DeclarationError(
                f"{short_path(str(path))}:{number}: unknown header {match.group(1)!r}; use {', '.join(_KEYS)}"
            )
        if match.group(1) == "sink":
            sinks.append((number, match.group(2)))
        else:
            header[match.group(1)] = match.group(2)
    where = f"{short_path(str(path))}:1"
    name = header.get("table") or f"gold.{path.stem}"
    layer = name.partition(".")[0]
    if layer not in LAYERS:
        raise DeclarationError(f"{where}: table {name!r} must be named <layer>.<table>")
    searched = _QUOTED.sub("''", re.sub(r"--[^\n]*", "", text))
    read = list(dict.fromkeys(f"{a}.{b}" for a, b in _TABLE.findall(searched)))
    if not read:
        raise DeclarationError(f"{where}: the SELECT reads no table; name tables <layer>.<table>, e.g. silver.events")
    keys = _names(header.get("keys", ""))
    declared_sinks = [sql_sink(sink, name, f"{short_path(str(path))}:{number}") for number, sink in sinks]
    params = tuple(Param(t.replace(".", "_"), t, i > 0) for i, t in enumerate(read))

    def run(**frames: DataFrame) -> DataFrame:
        spark = next(iter(frames.values())).sparkSession
        views = {}
        for param, frame in frames.items():
            views[param.replace("_", ".", 1)] = view = f"_tributary_sql_{name.replace('.', '_')}_{param}"
            frame.createOrReplaceTempView(view)
        try:
            return spark.sql(_TABLE.sub(lambda m: views.get(m.group(0), m.group(0)), text))
        except (ParseException, AnalysisException) as exc:
            raise _sql_error(exc, path, name, views) from None

    run.__name__ = path.stem
    for sink in declared_sinks:
        record_sink(sink, module)
    return Declaration(
        name=name,
        layer=layer,  # type: ignore[arg-type]
        fn=run,
        where=where,
        module=module,
        write=_kind(header.get("refresh", "replace"), keys, where),
        params=params,
        keys=keys,
        partition_by=_names(header.get("partition_by", "")),
        description=header.get("description", ""),
    )
