"""The proxy benchmark's pure parts, and one tiny run end to end."""

from __future__ import annotations

import pytest

from claudetrace.bench.proxy import build_input, percentile, run_proxy_bench, sample_lines


def test_percentile_nearest_rank() -> None:
    values = list(range(1, 101))
    assert percentile(values, 0.5) == 50
    assert percentile(values, 0.99) == 99
    assert percentile(values, 1.0) == 100
    assert percentile([7], 0.5) == 7
    with pytest.raises(ValueError):
        percentile([], 0.5)


def test_input_cycles_the_recorded_lines() -> None:
    lines = sample_lines()
    data = build_input(lines, len(lines) + 2)
    assert data.split(b"\n")[:-1] == [*lines, lines[0], lines[1]]
    assert all(b"\n" not in line for line in lines)


@pytest.mark.usefixtures("ct_env")
def test_a_tiny_run_measures_all_four_and_checks_storage() -> None:
    report = run_proxy_bench(lines=300, round_trips=50)
    assert [t.name for t in report.throughput] == ["cat", "tee FILE", "proxy", "proxy+otel"]
    assert all(t.seconds > 0 and t.bytes == report.input_bytes for t in report.throughput)
    assert all(t.cpu_seconds is not None for t in report.throughput)
    assert report.proxied_otel is not None
    assert (
        len(report.direct.round_trips_ns)
        == len(report.proxied.round_trips_ns)
        == len(report.proxied_otel.round_trips_ns)
        == 50
    )
    assert report.otel_cpu_overhead is not None
    assert report.otel_total_cpu_overhead is not None
    for name in ("proxy", "proxy+otel"):
        run = report.by_name(name)
        # The indexer is a process of its own (it imports SQLAlchemy): its
        # start-up alone is measurable CPU, reported through the stats file.
        assert run.indexer_cpu_seconds is not None and run.indexer_cpu_seconds > 0.05
        assert run.stored_after_seconds is not None and run.stored_after_seconds >= 0
        assert run.total_cpu_seconds is not None
        assert run.total_cpu_seconds > run.cpu_seconds + run.indexer_cpu_seconds - 1e-9
    text = "\n".join(report.lines())
    assert "of tee" in text and "p99" in text and "live telemetry:" in text
    assert "proxy + child + indexer" in text and "stored +s" in text
