"""The `sdp_peer` section's own parts: the peer's project is a spec `spark-pipelines` accepts, and its run's
seconds come from the event log it prints (the whole section runs in `make bench`, in a venv of its own)."""

from __future__ import annotations

import pytest
import yaml

from bench.sdp_peer import sdp_run_seconds, write_sdp_project
from bench.wide_data import WIDE_SCHEMA


def test_the_peer_project_is_a_pipeline_spec(tmp_path) -> None:
    spec = yaml.safe_load(write_sdp_project(tmp_path / "sdp", tmp_path / "landing", 4).read_text())
    # The fields `spark-pipelines` requires or reads (pyspark.pipelines.cli.unpack_pipeline_spec), and no other.
    assert set(spec) == {"name", "storage", "libraries", "configuration"}
    assert spec["storage"] == (tmp_path / "sdp" / "storage").as_uri()
    assert spec["libraries"] == [{"glob": {"include": "transformations/**"}}]
    conf = spec["configuration"]
    assert conf["wide.landing"] == str(tmp_path / "landing")
    assert conf["spark.sql.shuffle.partitions"] == "4"
    # The CSV schema handed to the peer names every column of the generated data, typed as ours.
    assert [c.split(" ")[0] for c in conf["wide.schema"].split(", ")] == WIDE_SCHEMA.names
    assert "amount decimal(12,2)" in conf["wide.schema"]
    assert (tmp_path / "sdp" / "transformations" / "wide_chain.py").is_file()


def test_the_peer_run_seconds_span_its_event_log() -> None:
    log = (
        "WARNING: Using incubator modules\n"
        "2026-12-07 01:56:31: Loading pipeline spec from /x/spark-pipeline.yml...\n"
        "2026-12-07 01:56:33: Flow spark_catalog.default.gold_wide_daily has COMPLETED.\n"
        "2026-12-07 01:57:12: Run is COMPLETED.\n"
    )
    assert sdp_run_seconds(log) == 41.0
    with pytest.raises(RuntimeError, match="did not complete"):
        sdp_run_seconds("2026-12-07 01:56:31: Loading pipeline spec...\n2026-12-07 01:56:40: Run is FAILED.\n")
