"""bench/webhooks.py: the arithmetic of its figures, its command line, and a tiny run end to
end (a real receiver process, a real broker with the webhook delivery, real PostgreSQL)."""

from __future__ import annotations

import argparse
import json

import pytest

from bench import harness, webhooks
from bench.webhooks import abba, delivery_rate, due_grid, lateness_ms, ratio


def test_the_runs_alternate_abba():
    assert abba([1, 16], 2) == [1, 16, 16, 1]
    assert abba([1, 16], 3) == [1, 16, 16, 1, 1, 16]
    assert abba([4], 2) == [4, 4]


def test_the_due_grid_is_rate_per_second():
    grid = due_grid(100.0, 500.0, 2.0)
    assert len(grid) == 1000
    assert grid[0] == 100.0 and grid[1] == pytest.approx(100.002)
    assert grid[-1] == pytest.approx(100.0 + 999 / 500)


def test_deliveries_per_second_count_intervals_first_to_last():
    assert delivery_rate([10.0, 10.5, 11.0]) == pytest.approx(2.0)  # 2 intervals in 1 s
    assert delivery_rate([11.0, 10.0]) == pytest.approx(1.0)  # order does not matter
    assert delivery_rate([10.0]) is None
    assert delivery_rate([10.0, 10.0]) is None


def test_lateness_takes_each_first_arrival_and_counts_the_rest():
    due = {"a": 100.0, "b": 100.5, "c": 101.0}
    seen = [("b", 100.52), ("a", 100.01), ("b", 100.51), ("x", 99.0)]
    late, missing, dups = lateness_ms(due, seen)
    assert sorted(late) == pytest.approx([10.0, 10.0])
    assert (missing, dups) == (1, 1)  # c never came, b twice; x is not ours


def test_the_ratio_is_none_without_both_figures():
    assert ratio(30.0, 20.0) == pytest.approx(1.5)
    assert ratio(None, 20.0) is None and ratio(30.0, None) is None and ratio(30.0, 0.0) is None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    webhooks.add_arguments(p)
    harness.add_common(p)
    return p


def test_the_command_line_defaults_and_choices():
    ns = _parser().parse_args([])
    assert ns.targets == [1, 16] and ns.repeats == 2 and ns.backlog == 4000
    assert ns.rate == 500.0 and ns.batch == 64 and ns.concurrency == 8 and ns.only is None
    ns = _parser().parse_args(["--targets", "2,4", "--only", "lateness"])
    assert ns.targets == [2, 4] and ns.only == "lateness"
    with pytest.raises(SystemExit):
        _parser().parse_args(["--targets", "0"])
    with pytest.raises(SystemExit):
        _parser().parse_args(["--only", "everything"])


async def test_a_tiny_run_delivers_every_timer_of_both_parts(pg_server_url, tmp_path):
    ns = _parser().parse_args(
        ["--backlog", "40", "--targets", "1,4", "--repeats", "1"]
        + ["--rate", "20", "--seconds", "1", "--no-progress"]
        + ["--database-url", pg_server_url, "--out", str(tmp_path)]
    )
    assert await webhooks.main(ns) == 0
    [result] = tmp_path.glob("*-webhooks/result.json")
    doc = json.loads(result.read_text())
    assert [r["targets"] for r in doc["throughput"]] == [1, 4]
    for r in doc["throughput"]:
        assert r["receipts"] == 40 and r["missing"] == 0 and r["settled_delivered"] == 40, r
        assert r["pending_after_fire"] == 0 and r["deliveries_per_s"] > 0
    assert r["per_target_min"] == r["per_target_max"] == 10
    for p in doc["lateness"]["paths"].values():
        assert p["arrived"] == 20 and p["missing"] == 0 and p["early"] == 0, p
    assert doc["lateness"]["p99_ratio"] is not None


async def test_the_clock_counts_the_record_and_puts_the_broker_back(pg_server_url):
    from queen_timers.testing.inprocess import serving

    async with serving(
        database_url=pg_server_url,
        transports=(),
        deliveries=("webhooks",),
        encryption_key=webhooks.KEY,
    ) as broker:
        method = broker.queen.webhook_attempts_record
        clock = webhooks.StageClock()
        clock.install(broker)
        await broker.queen.webhook_attempts_record([], 1)  # nothing to write: a no-op
        assert clock.counts["record"] == 1
        clock.remove()
        assert broker.queen.webhook_attempts_record == method
        assert "pop" not in vars(broker.queen) and "transaction" not in vars(broker.queen)
