"""Fast tests (no Spark) for the demo event generator and the plain-Python reference."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from pipelines.datasets.ecommerce import sample_data as generator
from pipelines.datasets.ecommerce.sample_data import GenerateReport, generate
from tests.support.reference import ReferenceResult, classify, load_landing

ROWS = 20_000
FILES = 10
START = datetime(2026, 11, 1, tzinfo=UTC)
DAYS = 3

_AMOUNT_TOKEN = re.compile(r'"amount":(null|"n/a"|-?\d+(?:\.\d+)?)[,}]')
_TWO_DECIMALS = re.compile(r"-?\d+\.\d{2}")


@pytest.fixture(scope="module")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, GenerateReport, ReferenceResult]:
    """One 20k-row run shared by the (read-only) rate and consistency tests."""
    landing = tmp_path_factory.mktemp("landing")
    report = generate(landing, rows=ROWS, files=FILES, seed=7)
    reference = classify(load_landing(landing))
    return landing, report, reference


def _file_bytes(landing: Path) -> dict[str, bytes]:
    """Every file in the events folder (hidden ones included), name -> content."""
    return {p.name: p.read_bytes() for p in sorted((landing / "events").iterdir())}


def _parsed_lines(landing: Path) -> list[tuple[str, str, object]]:
    """(file, line, parsed JSON or None) for every landed line."""
    out: list[tuple[str, str, object]] = []
    for name, line in load_landing(landing):
        try:
            parsed: object = json.loads(line)
        except ValueError:
            parsed = None
        out.append((name, line, parsed))
    return out


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


# --------------------------------------------------------------------------- generator: files


def test_deterministic_across_directories(tmp_path: Path) -> None:
    first = generate(tmp_path / "a", rows=3_000, files=4, seed=11)
    second = generate(tmp_path / "b", rows=3_000, files=4, seed=11)
    assert _file_bytes(tmp_path / "a") == _file_bytes(tmp_path / "b")
    assert [p.name for p in first.files] == [p.name for p in second.files]
    assert {k: v for k, v in vars(first).items() if k != "files"} == {
        k: v for k, v in vars(second).items() if k != "files"
    }


def test_different_seed_gives_different_data(tmp_path: Path) -> None:
    generate(tmp_path / "a", rows=500, files=2, seed=1)
    generate(tmp_path / "b", rows=500, files=2, seed=2)
    a = b"".join(_file_bytes(tmp_path / "a").values())
    b = b"".join(_file_bytes(tmp_path / "b").values())
    assert a != b
    assert b'"ev-s1-' in a
    assert b'"ev-s2-' in b


def test_file_names_and_even_split(tmp_path: Path) -> None:
    report = generate(tmp_path, rows=1_003, files=4, seed=5)
    names = [f"events-s5-{i:05d}.json" for i in range(4)]
    assert [p.name for p in report.files] == names
    assert all(p.parent == tmp_path / "events" for p in report.files)
    counts = [len(p.read_text(encoding="utf-8").splitlines()) for p in report.files]
    assert sum(counts) == 1_003 == report.lines
    assert max(counts) - min(counts) <= 1
    assert all(p.read_bytes().endswith(b"\n") for p in report.files)


def test_no_temp_files_left_and_files_renamed_from_hidden_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    renames: list[tuple[Path, Path]] = []
    real_replace = os.replace

    def spy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        src_path, dst_path = Path(src), Path(dst)
        # The final name must not exist yet and the temp file must be complete when renamed.
        assert not dst_path.exists()
        assert src_path.stat().st_size > 0
        renames.append((src_path, dst_path))
        real_replace(src, dst)

    monkeypatch.setattr(generator.os, "replace", spy)
    report = generate(tmp_path, rows=400, files=3, seed=3)
    assert [dst for _, dst in renames] == report.files
    for src, dst in renames:
        assert src.parent == dst.parent
        assert src.name.startswith(".")
        assert src.name.endswith(".tmp")
    assert sorted(p.name for p in (tmp_path / "events").iterdir()) == [p.name for p in report.files]


def test_temp_file_removed_when_write_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(generator.os, "replace", boom)
    with pytest.raises(OSError, match="disk on fire"):
        generate(tmp_path, rows=100, files=2, seed=3)
    assert list((tmp_path / "events").iterdir()) == []


def test_refuses_to_overwrite_existing_run(tmp_path: Path) -> None:
    generate(tmp_path, rows=200, files=2, seed=9)
    before = _file_bytes(tmp_path)
    with pytest.raises(FileExistsError, match=r"events-s9-00000\.json.*--seed"):
        generate(tmp_path, rows=200, files=2, seed=9)
    assert _file_bytes(tmp_path) == before
    # another seed lands next to the first batch
    generate(tmp_path, rows=200, files=2, seed=10)
    assert len(_file_bytes(tmp_path)) == 4


def test_checks_all_names_before_writing_anything(tmp_path: Path) -> None:
    events = tmp_path / "events"
    events.mkdir()
    (events / "events-s4-00002.json").write_text("keep me\n", encoding="utf-8")
    with pytest.raises(FileExistsError, match=r"events-s4-00002\.json"):
        generate(tmp_path, rows=300, files=3, seed=4)
    assert [p.name for p in events.iterdir()] == ["events-s4-00002.json"]
    assert (events / "events-s4-00002.json").read_text(encoding="utf-8") == "keep me\n"


@pytest.mark.parametrize(("rows", "files", "days"), [(-1, 1, 1), (10, 0, 1), (10, 1, 0)])
def test_rejects_bad_arguments(tmp_path: Path, rows: int, files: int, days: int) -> None:
    with pytest.raises(ValueError):
        generate(tmp_path, rows=rows, files=files, days=days)


def test_progress_bar_goes_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    generate(tmp_path / "quiet", rows=50, files=2, seed=1)
    quiet = capsys.readouterr()
    assert quiet.out == "" and quiet.err == ""
    generate(tmp_path / "loud", rows=50, files=2, seed=1, progress=True)
    loud = capsys.readouterr()
    assert loud.out == ""
    assert "2/2" in loud.err


def test_small_run_without_noise_is_still_consistent(tmp_path: Path) -> None:
    report = generate(tmp_path, rows=5, files=10, seed=1)
    assert len(report.files) == 10
    assert report.lines == 5
    reference = classify(load_landing(tmp_path))
    assert reference.landed == 5


# --------------------------------------------------------------------------- generator: content


def test_report_matches_reference(big_run: tuple[Path, GenerateReport, ReferenceResult]) -> None:
    _, report, reference = big_run
    assert report.lines == reference.landed == ROWS
    assert report.events == len(reference.valid_events)
    assert report.duplicates == reference.duplicates
    assert report.malformed == reference.corrupt
    assert report.missing_ids == reference.invalid
    assert report.lines == report.events + report.duplicates + report.malformed + report.missing_ids


def test_noise_rates_are_sensible(big_run: tuple[Path, GenerateReport, ReferenceResult]) -> None:
    _, report, _ = big_run
    assert 0.02 <= report.late / report.events <= 0.04
    assert 0.006 <= report.duplicates / report.lines <= 0.014
    bad = report.malformed + report.missing_ids
    assert 0.0025 <= bad / report.lines <= 0.0075
    assert report.malformed > 0
    assert report.missing_ids > 0


def test_late_events_are_out_of_order(big_run: tuple[Path, GenerateReport, ReferenceResult]) -> None:
    """Count valid, first-seen events written after a later timestamp; that is exactly the late count."""
    landing, report, reference = big_run
    seen: set[str] = set()
    running_max: datetime | None = None
    out_of_order = 0
    for _name, _line, parsed in _parsed_lines(landing):
        if not isinstance(parsed, dict) or parsed.get("event_id") not in reference.valid_events:
            continue
        if parsed["event_id"] in seen:  # a duplicate line, not a new event
            continue
        seen.add(parsed["event_id"])
        moment = _parse_time(parsed["event_time"])
        if running_max is not None and moment < running_max:
            out_of_order += 1
            assert running_max - moment <= timedelta(hours=3)
        else:
            running_max = moment
    assert out_of_order == report.late


def test_in_order_events_fall_in_their_file_slice(
    big_run: tuple[Path, GenerateReport, ReferenceResult],
) -> None:
    landing, report, reference = big_run
    slice_len = timedelta(days=DAYS) / FILES
    index = {path.name: i for i, path in enumerate(report.files)}
    before_slice = 0
    seen: set[str] = set()
    for name, _line, parsed in _parsed_lines(landing):
        if not isinstance(parsed, dict) or parsed.get("event_id") not in reference.valid_events:
            continue
        if parsed["event_id"] in seen:  # cross-file duplicates carry an earlier file's time
            continue
        seen.add(parsed["event_id"])
        moment = _parse_time(parsed["event_time"])
        lo = START + slice_len * index[name]
        hi = lo + slice_len
        if moment >= hi:
            pytest.fail(f"{name}: {moment} is after its slice [{lo}, {hi})")
        if moment < lo:  # only late events may reach back into an earlier file's range
            before_slice += 1
            assert moment >= lo - timedelta(hours=3)
    assert 0 < before_slice <= report.late


def test_duplicates_are_exact_copies_within_and_across_files(
    big_run: tuple[Path, GenerateReport, ReferenceResult],
) -> None:
    landing, report, _ = big_run
    first_file: dict[str, str] = {}
    same_file = cross_file = 0
    for name, line, parsed in _parsed_lines(landing):
        if not isinstance(parsed, dict) or not parsed.get("event_id"):
            continue
        if line in first_file:
            if first_file[line] == name:
                same_file += 1
            else:
                assert first_file[line] < name
                cross_file += 1
        else:
            first_file[line] = name
    assert same_file + cross_file == report.duplicates
    assert same_file > 0
    assert cross_file > 0
    # duplicates are byte-identical copies: no two different lines share an event id
    lines_per_id: dict[str, set[str]] = {}
    for line in first_file:
        lines_per_id.setdefault(json.loads(line)["event_id"], set()).add(line)
    assert all(len(lines) == 1 for lines in lines_per_id.values())


def test_all_kinds_of_mess_are_present(big_run: tuple[Path, GenerateReport, ReferenceResult]) -> None:
    landing, _, _ = big_run
    kinds: Counter[str] = Counter()
    for _name, _line, parsed in _parsed_lines(landing):
        if parsed is None:
            kinds["truncated"] += 1
            continue
        assert isinstance(parsed, dict)
        if parsed.get("quantity") == "three":
            kinds["quantity"] += 1
        if parsed.get("amount") == "n/a":
            kinds["amount"] += 1
        if parsed.get("event_time") == "yesterday":
            kinds["event_time"] += 1
        if "event_id" not in parsed:
            kinds["id_absent"] += 1
        elif parsed["event_id"] is None:
            kinds["id_null"] += 1
    for kind in ("truncated", "quantity", "amount", "event_time", "id_absent", "id_null"):
        assert kinds[kind] > 0, f"no {kind} lines in {dict(kinds)}"


def test_amounts_have_two_decimals_in_file_text(
    big_run: tuple[Path, GenerateReport, ReferenceResult],
) -> None:
    landing, _, _ = big_run
    orders = 0
    for _name, line, parsed in _parsed_lines(landing):
        if not isinstance(parsed, dict):
            continue
        match = _AMOUNT_TOKEN.search(line)
        assert match is not None, line
        token = match.group(1)
        if parsed.get("event_type") == "order" and token != '"n/a"':
            orders += 1
            assert _TWO_DECIMALS.fullmatch(token), line
            assert Decimal(token) > 0
        elif token != '"n/a"':
            assert token == "null", line
    assert orders > 0


def test_event_shape_and_distributions(big_run: tuple[Path, GenerateReport, ReferenceResult]) -> None:
    _, report, reference = big_run
    events = list(reference.valid_events.values())
    keys = {"event_id", "event_type", "event_time", "user_id", "product_id", "category"}
    keys |= {"quantity", "amount", "currency"}
    types = Counter(e["event_type"] for e in events)
    currencies = Counter(e["currency"] for e in events if e["event_type"] == "order")
    category_of: dict[str, set[str]] = {}
    for event in events:
        assert set(event) == keys
        assert re.fullmatch(r"ev-s7-\d{9}", event["event_id"])
        category_of.setdefault(event["product_id"], set()).add(event["category"])
        if event["event_type"] == "page_view":
            assert event["quantity"] is None
        else:
            assert isinstance(event["quantity"], int) and 1 <= event["quantity"] <= 5
        if event["event_type"] != "order":
            assert event["amount"] is None and event["currency"] is None
    n = len(events)
    type_shares = {"page_view": 0.55, "cart_add": 0.20, "cart_remove": 0.05, "order": 0.20}
    for event_type, share in type_shares.items():
        assert abs(types[event_type] / n - share) < 0.02, types
    orders = types["order"]
    for currency, share in {"USD": 0.70, "EUR": 0.20, "GBP": 0.10}.items():
        assert abs(currencies[currency] / orders - share) < 0.03, currencies
    assert all(len(cats) == 1 for cats in category_of.values())
    assert 300 < len(category_of) <= 500
    assert 6 <= len({c for cats in category_of.values() for c in cats}) <= 10
    assert 1_500 < len({e["user_id"] for e in events}) <= 2_000
    assert report.events == n


def test_event_time_text_format(big_run: tuple[Path, GenerateReport, ReferenceResult]) -> None:
    landing, _, _ = big_run
    fmt = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
    checked = 0
    for _name, _line, parsed in _parsed_lines(landing):
        if isinstance(parsed, dict) and parsed.get("event_time") not in (None, "yesterday"):
            assert fmt.fullmatch(parsed["event_time"]), parsed
            checked += 1
    assert checked > ROWS * 0.9


def test_start_and_days_are_respected(tmp_path: Path) -> None:
    start = datetime(2030, 1, 15, 12, 0)  # naive: taken as UTC
    generate(tmp_path, rows=2_000, files=2, seed=8, start=start, days=1)
    reference = classify(load_landing(tmp_path))
    times = [e["event_time"] for e in reference.valid_events.values()]
    lo = start.replace(tzinfo=UTC)
    assert min(times) >= lo - timedelta(hours=3)
    assert max(times) < lo + timedelta(days=1)
    assert max(times) > lo + timedelta(hours=23)


# --------------------------------------------------------------------------- reference


def _event(event_id: str | None = "e1", **overrides: object) -> str:
    base: dict[str, object] = {
        "event_id": event_id,
        "event_type": "order",
        "event_time": "2026-11-01T23:58:01.500Z",
        "user_id": "u1",
        "product_id": "p1",
        "category": "books",
        "quantity": 2,
        "amount": 10.10,
        "currency": "EUR",
    }
    base.update(overrides)
    return json.dumps(base)


def test_reference_classification_rules() -> None:
    corrupt = [
        '{"event_id": "c1", "event_type": "ord',
        "[1, 2]",
        "42",
        _event("c2", quantity="three"),
        _event("c3", amount="n/a"),
        _event("c4", event_time="yesterday"),
        _event("c5", quantity=1.5),
        _event("c6", quantity=True),
        _event("c7", event_time=12345),
        '{"event_id": "c8", "amount": NaN}',
    ]
    invalid = [
        _event(None),
        _event(""),
        json.dumps({k: v for k, v in json.loads(_event("x")).items() if k != "event_id"}),
        _event("i1", user_id=None),
        _event("i2", event_type="refund"),
        _event("i3", event_time=None),
        _event("i4", quantity=None),
        _event("i5", quantity=0),
        _event("i6", amount=None),
        _event("i7", amount=-1),
        _event("i8", currency="JPY"),
        _event("i9", currency=None),
    ]
    valid = [
        _event("v1"),
        _event("v2", event_type="page_view", quantity=None, amount=None, currency=None),
        _event("v3", event_type="cart_add", amount=None, currency=None),
    ]
    duplicates = [_event("v1"), _event("v1", amount=99.99)]
    lines = [("f.json", line) for line in valid + corrupt + invalid + duplicates]
    result = classify(lines)
    assert result.landed == len(lines)
    assert result.corrupt == len(corrupt)
    assert result.invalid == len(invalid)
    assert sorted(result.valid_events) == ["v1", "v2", "v3"]
    assert result.duplicates == 2
    assert result.valid_events["v1"]["amount"] == Decimal("10.1")  # first occurrence wins
    assert result.landed == result.corrupt + result.invalid + len(result.valid_events) + result.duplicates


def test_reference_aggregates() -> None:
    lines = [
        _event("o1", amount=10.10, quantity=1, event_time="2026-11-01T23:58:01.500Z"),
        _event("o2", amount=0.20, quantity=3, event_time="2026-11-01T23:59:59.999Z"),
        _event("o2", amount=0.20, quantity=3, event_time="2026-11-01T23:59:59.999Z"),
        _event("o3", amount=5, quantity=2, event_time="2026-11-02T00:00:00.000Z", currency="USD"),
        _event("o4", amount=1.05, quantity=1, event_time="2026-11-02T01:00:00+01:00", category="toys"),
        _event("p1", event_type="page_view", quantity=None, amount=None, currency=None),
    ]
    result = classify(lines)
    assert result.daily_revenue() == {
        (date(2026, 11, 1), "books", "EUR"): (2, 4, Decimal("10.30")),
        (date(2026, 11, 2), "books", "USD"): (1, 2, Decimal("5")),
        (date(2026, 11, 2), "toys", "EUR"): (1, 1, Decimal("1.05")),
    }
    assert result.event_counts_5m() == {
        (datetime(2026, 11, 1, 23, 55, tzinfo=UTC), "order"): 2,
        (datetime(2026, 11, 1, 23, 55, tzinfo=UTC), "page_view"): 1,
        (datetime(2026, 11, 2, 0, 0, tzinfo=UTC), "order"): 2,
    }


def test_load_landing_skips_hidden_and_other_files(tmp_path: Path) -> None:
    events = tmp_path / "events"
    events.mkdir()
    (events / "b.json").write_text("b1\nb2\n", encoding="utf-8")
    (events / "a.json").write_text("a1\r\n\na2", encoding="utf-8")
    (events / ".c.json").write_text("hidden\n", encoding="utf-8")
    (events / ".a.json.tmp").write_text("temp\n", encoding="utf-8")
    (events / "notes.txt").write_text("txt\n", encoding="utf-8")
    assert load_landing(tmp_path) == [("a.json", "a1"), ("a.json", "a2"), ("b.json", "b1"), ("b.json", "b2")]
