"""Webhook delivery: deliveries/s to a local receiver, and due-to-receipt lateness beside pop.

    queen bench webhooks [--backlog 4000] [--targets 1,16] [--repeats 2]
                         [--rate 500] [--seconds 20] [--batch 64] [--concurrency 8]
                         [--only throughput|lateness] [--database-url URL] [--out DIR]

A broker runs in this process (`queen_timers.testing.inprocess.serving`: the service, its
sweeper and the `webhooks` delivery plugin, no transport); the receiver is an aiohttp server
in a process of its own (so it never shares the broker's event loop) that answers 200 at once
and records, per request, the target's name from the path, the `webhook-id` and time.time()
at arrival.

throughput  For each target count of `--targets` (alternated: 1 16 16 1 for two repeats),
            targets are created paused on fresh queues, `--backlog` timers due at once are
            scheduled round-robin into their queues and fired (none pending), then every
            target is resumed. deliveries/s = (receipts - 1) / (last receipt - first
            receipt), on the receiver's clock. Each run's targets are deleted before the next.
lateness    `--rate` timers/s for `--seconds` into TWO queues with the same due instants,
            interleaved in the same schedule calls: one is a webhook target's, the other is
            popped by a consumer in this process (pop with wait=True, batch `--batch`, ack,
            pop again: the loop the target's worker runs, minus the HTTP). Every timer is
            scheduled before the first is due, so no schedule call runs in the window. The due
            instant is the deliverAt the schedule answered (PostgreSQL's clock, this machine);
            receipt and pop are time.time() on this machine. Both paths run at the same time
            rather than A B B A because the machine is shared: load from elsewhere moves
            within seconds, and at the same time both paths see it alike and are fired by the
            same sweeper passes, so the difference is the delivery path alone.

The goal (issue 26): due-to-receipt p99 within 2x of due-to-pop p99 in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import multiprocessing
import os
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from bench import harness
from bench.env import Target
from bench.harness import HostCpu, Results
from bench.load import deliver_of, schedule, wait_drained

__all__ = [
    "abba",
    "add_arguments",
    "delivery_rate",
    "due_grid",
    "lateness_ms",
    "main",
    "ratio",
]

KEY = "5a" * 32  # the broker's encryption key for the targets' secrets: a throw-away database
WAIT_S = 300.0  # generous: the machine is shared; a healthy run finishes far sooner


# -- arithmetic (bench/tests/test_bench_webhooks.py) -----------------------------------------


def abba(items: Sequence[int], repeats: int) -> list[int]:
    """The run order: `items`, then reversed, alternately, `repeats` passes (1 16 16 1)."""
    out: list[int] = []
    for r in range(repeats):
        out.extend(items if r % 2 == 0 else list(reversed(items)))
    return out


def due_grid(start: float, rate: float, seconds: float) -> list[float]:
    """The due instants of `rate` timers/s for `seconds` from `start` (epoch s)."""
    return [start + i / rate for i in range(int(rate * seconds))]


def delivery_rate(instants: Iterable[float]) -> float | None:
    """Deliveries/s between the first and the last receipt: n receipts make n - 1 intervals.
    None with fewer than two receipts or none apart."""
    xs = list(instants)
    if len(xs) < 2:
        return None
    span = max(xs) - min(xs)
    return (len(xs) - 1) / span if span > 0 else None


def lateness_ms(
    due: dict[str, float], seen: Iterable[tuple[str, float]]
) -> tuple[list[float], int, int]:
    """(lateness ms of each message's FIRST arrival, missing, duplicates): `due` is id -> due
    epoch s, `seen` (id, arrival epoch s) in any order; ids not in `due` are ignored."""
    first: dict[str, float] = {}
    dups = 0
    for mid, at in seen:
        if mid not in due:
            continue
        if mid in first:
            dups += 1
            first[mid] = min(first[mid], at)
        else:
            first[mid] = at
    late = [(at - due[mid]) * 1000.0 for mid, at in first.items()]
    return late, len(due) - len(first), dups


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, None when either is missing or b is not positive."""
    if a is None or b is None or b <= 0:
        return None
    return a / b


def _mid(text: str) -> str:
    """A message id in one spelling: the webhook-id's tail, a pop's id, a schedule's answer."""
    return str(uuid.UUID(text.removeprefix("msg_")))


# -- the receiver, in a process of its own -----------------------------------------------------


def _receiver_main(conn: Any) -> None:
    asyncio.run(_receive(conn))


async def _receive(conn: Any) -> None:
    from aiohttp import web

    got: list[tuple[str, str, float]] = []

    async def hook(request: web.Request) -> web.Response:
        at = time.time()
        await request.read()
        got.append((request.match_info["name"], request.headers.get("webhook-id", ""), at))
        return web.Response(status=200)

    async def count(request: web.Request) -> web.Response:
        return web.json_response(len(got))

    async def take(request: web.Request) -> web.Response:
        out = list(got)
        got.clear()
        return web.json_response(out)

    app = web.Application()
    app.router.add_post("/hook/{name}", hook)
    app.router.add_get("/_count", count)
    app.router.add_post("/_take", take)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    conn.send(runner.addresses[0][1])
    await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # until told to stop
    await runner.cleanup()


class ReceiverProcess:
    """The receiver's process: `base` is its URL; count() and take() read what it got."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_receiver_main, args=(child,), daemon=True)
        self.base = ""
        self._http: Any = None

    async def __aenter__(self) -> ReceiverProcess:
        import aiohttp

        self._proc.start()
        port = await asyncio.get_running_loop().run_in_executor(None, self._conn.recv)
        self.base = f"http://127.0.0.1:{port}"
        self._http = aiohttp.ClientSession(self.base)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.close()
        self._conn.send("stop")
        await asyncio.get_running_loop().run_in_executor(None, self._proc.join, 10)
        if self._proc.is_alive():
            self._proc.kill()

    def url(self, name: str) -> str:
        return f"{self.base}/hook/{name}"

    async def count(self) -> int:
        async with self._http.get("/_count") as r:
            return int(await r.json())

    async def take(self) -> list[tuple[str, str, float]]:
        async with self._http.post("/_take") as r:
            return [tuple(x) for x in await r.json()]

    async def until(self, n: int, timeout: float) -> int:
        """Poll until `n` requests arrived (the instants are the receiver's own, so the poll's
        period does not count); the count at the timeout otherwise."""
        end = time.monotonic() + timeout
        got = await self.count()
        while got < n and time.monotonic() < end:
            await asyncio.sleep(0.05)
            got = await self.count()
        return got


# -- where a worker's time goes ---------------------------------------------------------------


class StageClock:
    """Per settled batch, the time of each step of the plugin's TargetWorker: its pop (only
    pops that brought messages), the attempts (the rest of `_settle`) and the settling
    transaction; and per write, the attempts record, which runs off the delivery's path
    (queen_webhooks/recorder.py). The bench wraps these calls on its own broker for the
    run (instance attributes and one class attribute, put back by `remove`); the plugin's code
    is unchanged. With several targets the steps overlap, so the figures are per batch, not
    shares of the wall time."""

    STEPS = ("pop", "settle", "transaction", "record")

    def __init__(self) -> None:
        self.sums: defaultdict[str, float] = defaultdict(float)
        self.counts: Counter[str] = Counter()
        self.messages = 0
        self.settling: Counter[int] = Counter()  # id(worker) -> batches being settled
        self._undo: list[Any] = []

    def _timed(self, step: str, call: Any, keep: Any = None) -> Any:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            if step == "settle":
                self.settling[id(args[0])] += 1
                try:
                    out = await call(*args, **kwargs)
                finally:
                    self.settling[id(args[0])] -= 1
            else:
                out = await call(*args, **kwargs)
            if keep is None or keep(args, out):
                self.sums[step] += time.perf_counter() - t0
                self.counts[step] += 1
            return out

        return timed

    def install(self, broker: Any) -> None:
        from queen_webhooks.worker import TargetWorker

        q = broker.queen

        def worker_pop(args: tuple[Any, ...], out: Any) -> bool:
            subject = str(getattr(args[0], "subject", "") or "")
            if not subject.startswith("webhooks:") or not out or not out.get("messages"):
                return False
            self.messages += len(out["messages"])
            return True

        for name, step, keep in (
            ("pop", "pop", worker_pop),
            ("transaction", "transaction", None),
            ("webhook_attempts_record", "record", None),
        ):
            setattr(q, name, self._timed(step, getattr(q, name), keep))
            self._undo.append(lambda q=q, name=name: q.__dict__.pop(name, None))
        settle = TargetWorker._settle
        TargetWorker._settle = self._timed("settle", settle)  # type: ignore[method-assign]
        self._undo.append(lambda: setattr(TargetWorker, "_settle", settle))

    def remove(self) -> None:
        while self._undo:
            self._undo.pop()()

    def take(self) -> dict[str, Any]:
        """Mean ms per batch of each step since the last take (the record: per write, off the
        path), and the batches and their mean size; the attempts are the settle minus its
        transaction."""
        batches = self.counts["settle"]

        def mean(step: str) -> float | None:
            n = self.counts[step]
            return self.sums[step] / n * 1000.0 if n else None

        out: dict[str, Any] = {
            "batches": batches,
            "messages_per_batch": self.messages / self.counts["pop"]
            if self.counts["pop"]
            else None,
            "pop_ms": mean("pop"),
            "transaction_ms": mean("transaction"),
            "record_ms": mean("record"),
            "settle_ms": mean("settle"),
        }
        parts = [out["settle_ms"], out["transaction_ms"]]
        out["attempts_ms"] = parts[0] - parts[1] if all(x is not None for x in parts) else None
        self.sums.clear()
        self.counts.clear()
        self.messages = 0
        return out


# -- the runs --------------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backlog", type=int, default=4000, help="timers per throughput run (4000)")
    p.add_argument(
        "--targets",
        type=harness.positive_ints,
        default=[1, 16],
        help="target counts of the throughput runs, comma-separated (1,16)",
    )
    p.add_argument("--repeats", type=int, default=2, help="passes over --targets, ABBA (2)")
    p.add_argument("--rate", type=float, default=500.0, help="lateness: timers/s per path (500)")
    p.add_argument("--seconds", type=float, default=20.0, help="lateness: seconds of dues (20)")
    p.add_argument(
        "--batch", type=int, default=64, help="QUEEN_WEBHOOKS_BATCH and the consumer's pop (64)"
    )
    p.add_argument("--concurrency", type=int, default=8, help="each target's concurrency (8)")
    p.add_argument("--only", choices=("throughput", "lateness"), default=None, help="one part only")


async def _schedule_all(
    queen: Any, ident: Any, items: list[tuple[str, str, float]], per_call: int = 256
) -> dict[str, tuple[str, float]]:
    """Schedule (queue, key, due epoch s) items, 4 calls in flight: message id -> (queue,
    deliverAt answered, epoch s)."""
    deliver: dict[str, tuple[str, float]] = {}
    sem = asyncio.Semaphore(4)

    async def one(chunk: list[tuple[str, str, float]]) -> None:
        async with sem:
            now = time.time()
            ops = [
                {
                    "op": "schedule",
                    "queue": q,
                    "timerKey": k,
                    "delayMs": max(0.0, (due - now) * 1000.0),
                    "txn": k,
                    "payload": base64.b64encode(json.dumps({"due": due}).encode()).decode(),
                }
                for q, k, due in chunk
            ]
            answers = await schedule(queen, ident, ops)
            for (q, _, _), answer in zip(chunk, answers, strict=True):
                if answer.get("status") not in ("scheduled", "rescheduled"):
                    raise RuntimeError(f"schedule refused: {answer}")
                mid, at = deliver_of(answer)
                deliver[str(uuid.UUID(bytes=mid))] = (q, at)

    await asyncio.gather(*(one(items[i : i + per_call]) for i in range(0, len(items), per_call)))
    return deliver


async def _fired(conn: Any, queues: Iterable[str], timeout: float) -> int:
    """Wait until no timer of `queues` is pending; the number left at the timeout."""
    return sum([await wait_drained(conn, q, timeout) for q in queues])


async def _set_targets(
    broker: Any,
    ident: Any,
    rcv: ReceiverProcess,
    names: Sequence[str],
    queues: Sequence[str],
    ns: argparse.Namespace,
    paused: bool,
) -> None:
    for name, queue in zip(names, queues, strict=True):
        await broker.queen.webhook_target_set(
            ident,
            {
                "name": name,
                "queue": queue,
                "url": rcv.url(name),
                "concurrency": ns.concurrency,
                "paused": paused,
            },
        )
    await broker.deliveries["webhooks"].refresh()


async def _delete_targets(broker: Any, ident: Any, names: Iterable[str]) -> None:
    for name in names:
        await broker.queen.webhook_target_delete(ident, name)
    await broker.deliveries["webhooks"].refresh()


def _delivered(broker: Any, worker: Any) -> int:
    """Messages a target's worker settled as delivered (the plugin's metric)."""
    v = broker.queen.metrics_registry.get_sample_value(
        "queen_webhook_deliveries_total", {"target": worker.label, "outcome": "delivered"}
    )
    return int(v or 0)


async def _settled(broker: Any, clock: StageClock, expected: dict[str, int], timeout: float) -> int:
    """Wait until each named target's worker has settled `expected[name]` deliveries and has
    no batch in hand (re-checked at the end of each batch it settles); the total settled."""
    workers = {n: w for (_, n), w in broker.deliveries["webhooks"].workers.items()}
    total = 0
    for name, n in expected.items():
        w = workers[name]
        async with w.progress:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    w.progress.wait_for(
                        lambda w=w, n=n: _delivered(broker, w) >= n and not clock.settling[id(w)]
                    ),
                    timeout,
                )
        total += _delivered(broker, w)
    return total


async def _throughput_run(
    broker: Any,
    ident: Any,
    conn: Any,
    rcv: ReceiverProcess,
    clock: StageClock,
    ns: argparse.Namespace,
    run: int,
    k: int,
    res: Results,
) -> dict[str, Any]:
    names = [f"tp{run}-t{j}" for j in range(k)]
    queues = [f"tp{run}-q{j}" for j in range(k)]
    await _set_targets(broker, ident, rcv, names, queues, ns, paused=True)
    items = [(queues[i % k], f"tp{run}-{i}", 0.0) for i in range(ns.backlog)]
    deliver = await _schedule_all(broker.queen, ident, items)
    left = await _fired(conn, queues, WAIT_S)
    await rcv.take()  # nothing of this run has arrived: the targets are paused
    clock.take()
    res.say(f"run {run}: {k} target(s), {ns.backlog} fired, resuming")
    with HostCpu() as cpu:
        t_resume = time.time()
        for name in names:
            await broker.queen.webhook_target_resume(ident, name)
        await broker.deliveries["webhooks"].refresh()
        await rcv.until(ns.backlog, WAIT_S)
    got = await rcv.take()
    # every batch settled before the targets go: the next run starts from a quiet broker
    settled = await _settled(
        broker, clock, Counter(names[i % k] for i in range(ns.backlog)), WAIT_S
    )
    steps = clock.take()
    await _delete_targets(broker, ident, names)
    instants = [at for _, _, at in got]
    ids = Counter(_mid(w) for _, w, _ in got)
    per_target = Counter(n for n, _, _ in got)
    return {
        "run": run,
        "targets": k,
        "backlog": ns.backlog,
        "scheduled": len(deliver),
        "pending_after_fire": left,
        "receipts": len(got),
        "distinct": len(ids),
        "duplicates": sum(n - 1 for n in ids.values()),
        "missing": len(set(deliver) - set(ids)),
        "settled_delivered": settled,
        "first_to_last_s": (max(instants) - min(instants)) if instants else None,
        "resume_to_first_ms": (min(instants) - t_resume) * 1000 if instants else None,
        "deliveries_per_s": delivery_rate(instants),
        "per_target_min": min(per_target.values()) if per_target else 0,
        "per_target_max": max(per_target.values()) if per_target else 0,
        "host_cpu": cpu.shares,
        "worker_steps": steps,
    }


async def _consume(
    queen: Any, ident: Any, queue: str, batch: int, seen: list[tuple[str, float]], n: int, done
) -> None:
    """A consumer's loop: pop (wait=True), note the instant of each message, ack, pop again;
    `done` is set once `n` messages arrived, and ends the loop."""
    while not done.is_set():
        popped = await queen.pop(ident, queue, batch=batch, wait=True, timeout_ms=1000)
        at = time.time()
        if not popped or not popped.get("messages"):
            continue
        acks = []
        for m in popped["messages"]:
            seen.append((_mid(m["id"]), at))
            acks.append(
                {
                    "transactionId": m["transactionId"],
                    "partitionId": m["partitionId"],
                    "leaseId": popped.get("leaseId"),
                    "status": "completed",
                }
            )
        await queen.ack(ident, acks)
        if len(seen) >= n:
            done.set()


async def _lateness_run(
    broker: Any,
    ident: Any,
    rcv: ReceiverProcess,
    clock: StageClock,
    ns: argparse.Namespace,
    res: Results,
) -> dict[str, Any]:
    wh_queue, pop_queue, name = "lat-webhook", "lat-pop", "lat"
    await _set_targets(broker, ident, rcv, [name], [wh_queue], ns, paused=False)
    n = int(ns.rate * ns.seconds)
    # every schedule call before the first due instant (a few thousand timers/s in process)
    lead = 3.0 + 2 * n / 2000.0
    grid = due_grid(time.time() + lead, ns.rate, ns.seconds)
    items: list[tuple[str, str, float]] = []
    for i, due in enumerate(grid):
        items.append((wh_queue, f"w{i}", due))
        items.append((pop_queue, f"p{i}", due))
    seen: list[tuple[str, float]] = []
    done = asyncio.Event()
    consumer = asyncio.create_task(
        _consume(broker.queen, ident, pop_queue, ns.batch, seen, n, done)
    )
    try:
        t_sched = time.time()
        deliver = await _schedule_all(broker.queen, ident, items)
        sched_s = time.time() - t_sched
        first_due = min(at for _, at in deliver.values())
        res.say(
            f"lateness: {len(deliver)} timers scheduled in {sched_s:.1f} s, "
            f"first due in {first_due - time.time():.1f} s"
        )
        with HostCpu() as cpu:
            await rcv.until(n, ns.seconds + lead + WAIT_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), WAIT_S)
    finally:
        done.set()
        await consumer
    got = await rcv.take()
    steps = clock.take()
    await _delete_targets(broker, ident, [name])
    paths: dict[str, Any] = {}
    wh_due = {m: d for m, (q, d) in deliver.items() if q == wh_queue}
    pop_due = {m: d for m, (q, d) in deliver.items() if q == pop_queue}
    for path, dues, arrivals in (
        ("webhook", wh_due, [(_mid(w), t) for _, w, t in got]),
        ("pop", pop_due, seen),
    ):
        late, _, dups = lateness_ms(dues, arrivals)
        paths[path] = {
            "expected": n,
            "arrived": len(late),
            "missing": n - len(late),
            "duplicates": dups,
            "early": sum(1 for x in late if x < 0),
            "lateness_ms": harness.summarize(late),
        }
    return {
        "rate_per_path": ns.rate,
        "seconds": ns.seconds,
        "scheduled": len(deliver),
        "schedule_s": sched_s,
        "paths": paths,
        "p99_ratio": ratio(
            paths["webhook"]["lateness_ms"]["p99"], paths["pop"]["lateness_ms"]["p99"]
        ),
        "p50_ratio": ratio(
            paths["webhook"]["lateness_ms"]["p50"], paths["pop"]["lateness_ms"]["p50"]
        ),
        "host_cpu": cpu.shares,
        "worker_steps": steps,
    }


async def main(ns: argparse.Namespace) -> int:
    from queen_timers.db.pool import connect_one
    from queen_timers.identity import Identity
    from queen_timers.testing.inprocess import serving

    ident = Identity(subject="bench")
    res = Results("webhooks", ns)
    res.meta["load_avg_at_start"] = os.getloadavg()
    runs: list[dict[str, Any]] = []
    lat: dict[str, Any] | None = None
    async with Target("webhooks", ns.database_url, ns.keep_db) as tgt:
        await res.record_server(tgt.url, tgt.embedded)
        async with (
            ReceiverProcess() as rcv,
            serving(
                database_url=tgt.url,
                transports=(),
                deliveries=("webhooks",),
                sweeper=True,
                encryption_key=KEY,
                webhook_allow_networks="127.0.0.1/32",
                webhooks_batch=ns.batch,
            ) as broker,
        ):
            conn = await connect_one(tgt.url)
            clock = StageClock()
            clock.install(broker)
            try:
                if ns.only in (None, "throughput"):
                    for run, k in enumerate(abba(ns.targets, ns.repeats)):
                        r = await _throughput_run(broker, ident, conn, rcv, clock, ns, run, k, res)
                        res.say(
                            f"run {run}: {k} target(s): "
                            f"{harness.fmt(r['deliveries_per_s'])} deliveries/s"
                        )
                        runs.append(r)
                if ns.only in (None, "lateness"):
                    lat = await _lateness_run(broker, ident, rcv, clock, ns, res)
            finally:
                clock.remove()
                await conn.close()
    res.data["config"] = {
        k: getattr(ns, k)
        for k in (
            "backlog",
            "targets",
            "repeats",
            "rate",
            "seconds",
            "batch",
            "concurrency",
        )
    }
    res.data["throughput"] = runs
    res.data["lateness"] = lat
    medians: dict[int, float | None] = {}
    for k in ns.targets:
        rates = [r["deliveries_per_s"] for r in runs if r["targets"] == k]
        medians[k] = harness.median([x for x in rates if x is not None])
    res.data["deliveries_per_s_median"] = medians
    for r in runs:
        res.row(
            f"throughput run {r['run']}",
            targets=r["targets"],
            timers=r["backlog"],
            receipts=r["receipts"],
            missing=r["missing"],
            duplicates=r["duplicates"],
            **{
                "first→last s": r["first_to_last_s"],
                "deliveries/s": r["deliveries_per_s"],
                "resume→first ms": r["resume_to_first_ms"],
            },
        )
    if lat is not None:
        for path, e in lat["paths"].items():
            lt = e["lateness_ms"]
            res.row(
                f"lateness {path}",
                timers=e["expected"],
                receipts=e["arrived"],
                missing=e["missing"],
                duplicates=e["duplicates"],
                **{
                    "late p50 ms": lt["p50"],
                    "late p99 ms": lt["p99"],
                    "late max ms": lt["max"],
                },
            )
    text = []
    if runs:
        text.append(
            "Deliveries/s (median of the alternated runs): "
            + ", ".join(f"{k} target(s) {harness.fmt(v)}" for k, v in medians.items())
            + f"; batch {ns.batch}, concurrency {ns.concurrency} per target."
        )
    if lat is not None:
        text.append(
            f"Lateness at {harness.fmt(ns.rate)} timers/s per path for {ns.seconds:g} s, both "
            f"paths at once: receipt p99 / pop p99 = {harness.fmt(lat['p99_ratio'], 2)} "
            f"(goal: at most 2), p50s {harness.fmt(lat['paths']['webhook']['lateness_ms']['p50'])}"
            f" / {harness.fmt(lat['paths']['pop']['lateness_ms']['p50'])} ms."
        )
    steps = [
        {"run": f"throughput {r['run']} ({r['targets']} targets)", **r["worker_steps"]}
        for r in runs
    ]
    if lat is not None:
        steps.append({"run": "lateness (webhook path)", **lat["worker_steps"]})
    if steps:
        text.append(
            "Where a target worker's time goes, mean ms per settled batch (bench/webhooks."
            "StageClock; attempts = settle - transaction; record: per write, off the path):\n\n"
            + harness.md_records(steps)
        )
    res.section("\n\n".join(text))
    res.finish()
    return 0
