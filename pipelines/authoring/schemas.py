"""Table schemas inferred from what each function returns, planned by Spark on empty inputs (no query runs).

A file source's function receives the landed rows (the declared landing schema plus the platform's lineage
columns); a table function receives empty streams of its upstream tables (watermarked as declared) and the
reference tables read whole. The kind then shapes the result into the table's schema, and a declared schema
is checked against it as a contract.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import inspect
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyspark
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from infra.errors import ConfigError, first_line
from infra.files import write_atomically
from infra.object_store import refuse_object_url
from pipelines.authoring.declarations import Declaration, DeclarationError
from pipelines.sources.kinds import lineage_of

if TYPE_CHECKING:
    from infra.settings import Settings
    from pipelines.spec.tables import TableSpec

_EMPTY: list[str] = []
_UNCACHED: list[bool] = []


def session() -> SparkSession:
    """The active SparkSession, or the process's session for the environment's settings, on a local master."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    from infra.settings import Settings
    from infra.spark import get_spark

    settings = Settings.from_env()
    # Planning runs no task: a cluster session here (loading definitions in Dagster's code server) would hold
    # executors for the life of that process, and the runs it launches would wait for them forever.
    return get_spark(settings if settings.local_master else planning_settings(settings))


def planning_settings(settings: Settings, home: Path | None = None) -> Settings:
    """`settings` for a session that only plans: one local core; with `home`, a throw-away home (embedded catalog,
    local warehouse) so that nothing of the real home, catalog or warehouse is touched."""
    conf = tuple((key, value) for key, value in settings.spark_conf if key != "spark.master")
    planning = dataclasses.replace(settings, spark_master="local[1]", spark_conf=conf)
    if home is None:
        return planning
    return dataclasses.replace(planning.with_home(home), catalog_uri=None)


@contextlib.contextmanager
def uncached() -> Iterator[None]:
    """Infer every schema inside the block, neither reading nor writing the home's schema cache (a dry run)."""
    _UNCACHED.append(True)
    try:
        yield
    finally:
        _UNCACHED.pop()


def _empty_folder(spark: SparkSession) -> str:
    if not _EMPTY:
        # In the JVM's scratch folder (infra.scratch), which is swept if this process is killed.
        scratch = spark.sparkContext._jvm.System.getProperty("java.io.tmpdir")
        _EMPTY.append(tempfile.mkdtemp(prefix="tributary-infer-", dir=scratch))
        atexit.register(shutil.rmtree, _EMPTY[0], True)
    return _EMPTY[0]


def empty_stream(spark: SparkSession, schema: StructType) -> DataFrame:
    """A streaming DataFrame of `schema` that is never started: enough for Spark to plan what reads it."""
    return spark.readStream.schema(schema).format("parquet").load(_empty_folder(spark))


def landed_schema(d: Declaration) -> StructType:
    """What a file source's function receives: the declared landing fields, then the lineage columns (of every
    flow into the table)."""
    assert d.source is not None
    return StructType([*d.source.schema.fields, *lineage_of([d.source, *(f.source for f in d.flows)])])


def input_frames(d: Declaration, specs: Mapping[str, TableSpec], streaming: bool = True) -> list[DataFrame]:
    """Empty inputs of `d`'s function in parameter order (streams as streams unless `streaming` is False)."""
    if d.source is not None:
        try:
            landed = landed_schema(d)
        except DeclarationError:
            raise
        except ConfigError as exc:  # the source cannot say its columns (an external table that is missing)
            raise DeclarationError(f"{d.where}: {exc}") from None
        return [session().createDataFrame([], landed)]
    spark = session()
    frames = []
    for param in d.params:
        schema = specs[param.table].output.schema
        if param.static or not streaming:
            frames.append(spark.createDataFrame([], schema))
            continue
        df = empty_stream(spark, schema)
        wm = d.watermark_for(param)
        if wm is not None:
            if wm.column not in schema.names:
                raise d.error(
                    f"the watermark column {wm.column!r} is not a column of {param.table}",
                    f"watermark on one of {', '.join(schema.names)}",
                )
            df = df.withWatermark(wm.column, wm.delay)
        frames.append(df)
    return frames


def check_contract(d: Declaration, inferred: StructType) -> StructType:
    """`inferred`, when it equals the declared schema (names, order and types); else an error naming both."""
    if d.schema is None:
        return inferred
    want = [(f.name, f.dataType.simpleString()) for f in d.schema.fields]
    have = [(f.name, f.dataType.simpleString()) for f in inferred.fields]
    if want != have:
        extra = [f"{n} {t}" for n, t in have if (n, t) not in want]
        missing = [f"{n} {t}" for n, t in want if (n, t) not in have]
        raise d.error(
            f"the declared schema does not match what the function returns (missing: {', '.join(missing) or '-'}; "
            f"not declared: {', '.join(extra) or '-'})",
            "change the function or the declared schema, or leave schema= out to infer it",
        )
    return d.schema


def inferrer(
    d: Declaration,
    specs: Mapping[str, TableSpec],
    plan: Callable[[list[DataFrame]], DataFrame],
    shape: Callable,
    check_stream: Callable[[DataFrame], None],
    streaming: bool = True,
) -> Callable[[], StructType]:
    """The zero-argument schema function of `d`'s table: plan on empty inputs (batch ones unless `streaming`: a
    table that recomputes or follows changes runs its function on its inputs read whole), check a streaming plan against
    the table's output mode (`check_stream`, Spark's own checker), shape, check the contract.

    The schema is cached with what it depends on, so the checks run again only when one of those changes.
    """

    def infer() -> StructType:
        key = cache_key(d, specs)
        cached = _cached(key)
        if cached is not None:
            return cached
        frames = input_frames(d, specs, streaming=streaming)
        try:
            planned = plan(frames)
        except DeclarationError:
            raise
        except ConfigError as exc:
            raise DeclarationError(f"{d.where}: {exc}") from None
        except Exception as exc:  # the function or Spark's analysis failed: one line naming the declaration
            raise d.error(f"the function cannot be planned: {first_line(exc)}", "fix the function") from None
        if planned.isStreaming:
            try:
                check_stream(planned)
            except DeclarationError:
                raise
            except ConfigError as exc:
                raise DeclarationError(f"{d.where}: {exc}") from None
        schema = check_contract(d, shape(d, planned.schema))
        _store(key, schema)
        return schema

    return infer


def cache_key(d: Declaration, specs: Mapping[str, TableSpec]) -> str | None:
    """A digest of everything an inferred schema depends on, or None when the function's source is unknown.

    Inferring plans the function with Spark, so loading the Dagster definitions would start a JVM in every
    process that loads them (each run, the daemon, the webserver). The key covers the Python files of the
    function's folder (its dataset) and of this package (how kinds shape schemas), the declaration, the input
    schemas and the Spark version: a change to any of them infers again.
    """
    source = inspect.getsourcefile(d.fn) if d.fn is not None else None
    if source is None and d.source is None:
        return None
    folders = [Path(__file__).parent, *([Path(source).parent] if source else [])]
    # The function's code is covered by its file, what it captured by its closure and defaults; a repr with a
    # memory address would differ in every process.
    captured = [c.cell_contents for c in getattr(d.fn, "__closure__", None) or () if _has_contents(c)]
    described = repr((dataclasses.replace(d, fn=None), captured, getattr(d.fn, "__defaults__", None)))
    parts = [pyspark.__version__, re.sub(r" at 0x[0-9a-f]+", "", described)]
    parts += [_files_digest(folder) for folder in folders]
    parts += [specs[param.table].output.schema.json() for param in d.params]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _has_contents(cell: Any) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:  # a variable the function will bind later
        return False
    return True


def _files_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def schema_cache_folder() -> Path:
    """The folder of the inferred-schema cache: `TRIBUTARY_SCHEMA_CACHE`, or `<home>/cache/schemas`. Its entries
    are keyed by everything a schema depends on (`cache_key`), so homes can share one."""
    given = os.environ.get("TRIBUTARY_SCHEMA_CACHE") or None
    refuse_object_url("TRIBUTARY_SCHEMA_CACHE", given)
    if given:
        return Path(given).expanduser().resolve()
    from infra.settings import Settings

    return Settings.from_env().home / "cache" / "schemas"


def _cache_file(key: str) -> Path:
    return schema_cache_folder() / f"{key}.json"


def _cached(key: str | None) -> StructType | None:
    if key is None or _UNCACHED:
        return None
    try:
        return StructType.fromJson(json.loads(_cache_file(key).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not cached yet, or unreadable: infer again


def _store(key: str | None, schema: StructType) -> None:
    if key is None or _UNCACHED:
        return
    path = _cache_file(key)
    with contextlib.suppress(OSError):  # a read-only home: the next load infers again
        write_atomically(path, schema.json())
