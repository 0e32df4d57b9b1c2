"""Per-tenant limits on scheduling: a cap on pending timers and a write rate (timers-contract §8).

Each broker holds, for every tenant with a limit that calls it, a `_Tenant`:
- a token bucket (rate, burst): one token per schedule call; an empty bucket answers
  429 `rate_limited` with Retry-After = the time to the next token, at least 1 s;
- the tenant's pending count as last MEASURED (a bounded count on the primary key's prefix,
  migrations/027) and the schedules this broker admitted since: its local delta. A call with n
  schedule ops is admitted while measured + delta + n <= cap; past it, 403
  `timers_quota_exceeded`, and the refusal is sticky until a measurement is under 90 % of the
  cap (a tenant hovering at its cap would otherwise flap between admitted and refused).

Measurement instead of a counter every schedule updates: a counter row would serialise a
tenant's schedules on one row lock for the length of each transaction (timers-contract §10:
about 80-100 such transactions a second). The measurement runs every
QUEEN_TIMERS_TENANT_QUOTA_REFRESH_MS for the capped tenants this broker serves, and at once at a
tenant's first call; its cost is bounded by the tenant's cap, never by the table.

The delta is exact: a charge is dropped only by a measurement that started after the charge's
commit was acknowledged (that commit is in the measurement's snapshot); a charge still in
flight, or acknowledged after the measurement started, stays counted (it may be counted twice,
which refuses early, never late). So one broker never lets a tenant past its cap. Several
brokers each see only their own delta: between two measurements each may admit the headroom
(cap - measured) on its own, so the overshoot is at most (brokers - 1) x headroom, the
reference's bound; a measurement after the other brokers' commits closes it
(tests/timers/test_quota_brokers.py measures it with 3 brokers).

A refused call changes nothing (a token taken by a call the cap then refuses is given back, and
a call refused for its own size, the tenant still under its cap, leaves no sticky refusal).
"Fire now" (a reschedule of one pending timer to now) adds no timer: it takes a token of the
write rate (admit_rate) and is never refused by the cap.
A charge is given back when its call did not commit, except when the commit is unknown (a
statement timeout): then it stays until a measurement replaces it. Cancels and reads never
reach this module. Each broker's bucket is its own: behind N brokers a tenant's rate is up to
N x its setting (docs/guides/tenants.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import math
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import asyncpg

from . import brokersecret
from .background import cancel_and_wait
from .db.outage import absorbed
from .db.queries import Q
from .errors import QueenError
from .metrics import Metrics
from .settings import Settings

__all__ = [
    "UNLIMITED",
    "Charge",
    "Limits",
    "Override",
    "TenantLabels",
    "TenantQuotas",
    "parse_changes",
]

log = logging.getLogger("queen_timers.quotas")

UNLIMITED = -1  # stored in queen.tenant_quotas: "no limit for this tenant", whatever the default
# A measurement releases a sticky refusal under this share of the cap (the reference's 90 %).
RELEASE_SHARE = 0.9
# A tenant idle this many refresh periods (and at least IDLE_MIN_S) is forgotten; its next
# call measures it again. Bounds the map by the tenants active lately, not all ever seen.
IDLE_PERIODS = 12
IDLE_MIN_S = 60.0
# Tenants measured per statement, and per page of the census: one statement stays short.
MEASURE_BATCH = 1000


@dataclasses.dataclass(frozen=True)
class Limits:
    """A tenant's effective limits: None means no limit."""

    max_pending: int | None
    writes_per_sec: float | None
    burst: int

    @property
    def limited(self) -> bool:
        return self.max_pending is not None or self.writes_per_sec is not None


@dataclasses.dataclass
class Override:
    """A row of queen.tenant_quotas: None = the setting applies, UNLIMITED = no limit."""

    max_pending: int | None = None
    writes_per_sec: float | None = None
    burst: int | None = None

    def as_wire(self) -> dict[str, Any]:
        def one(v: Any) -> Any:
            return "unlimited" if v == UNLIMITED else v

        return {
            "maxPending": one(self.max_pending),
            "writesPerSec": one(self.writes_per_sec),
            "burst": self.burst,
        }


def _burst(rate: float | None, burst: int | None) -> int:
    if burst is not None:
        return burst
    return max(1, math.ceil(rate)) if rate is not None else 1


def effective(settings: Settings, o: Override | None) -> Limits:
    o = o or Override()
    cap = settings.timers_tenant_max_pending if o.max_pending is None else o.max_pending
    rate = settings.timers_tenant_writes_per_sec if o.writes_per_sec is None else o.writes_per_sec
    cap = None if cap is None or cap == UNLIMITED else int(cap)
    rate = None if rate is None or rate == UNLIMITED else float(rate)
    burst = o.burst if o.burst is not None else settings.timers_tenant_write_burst
    return Limits(cap, rate, _burst(rate, burst))


_FIELDS = {"maxPending": "max_pending", "writesPerSec": "writes_per_sec", "burst": "burst"}


def _bad(reason: str, detail: str) -> QueenError:
    return QueenError("bad_request", reason, detail, 400)


def parse_changes(current: Override | None, changes: Any) -> Override:
    """The overrides after `changes` ({maxPending?, writesPerSec?, burst?}): a key left out
    keeps its value, null returns it to the setting, "unlimited" lifts the limit (maxPending,
    writesPerSec). Anything else is refused, with nothing written."""
    if not isinstance(changes, dict):
        raise _bad("quota_bad_body", "the body is an object {maxPending?, writesPerSec?, burst?}")
    unknown = sorted(str(k) for k in changes if k not in _FIELDS)
    if unknown:
        raise _bad(
            "quota_unknown_key",
            f"unknown key {', '.join(unknown)}; the keys are {', '.join(_FIELDS)}",
        )
    if not changes:
        raise _bad("quota_nothing_to_set", "at least one of maxPending, writesPerSec, burst")
    out = dataclasses.replace(current or Override())
    for key, value in changes.items():
        if value is None:
            parsed: Any = None
        elif value == "unlimited" and key != "burst":
            parsed = UNLIMITED
        elif key == "writesPerSec":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _bad("quota_bad_value", 'writesPerSec is a number > 0, "unlimited" or null')
            if not (math.isfinite(value) and value > 0):
                raise _bad("quota_bad_value", 'writesPerSec is a number > 0, "unlimited" or null')
            parsed = float(value)
        else:
            low = 0 if key == "maxPending" else 1
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value < 2**31:
                more = ', "unlimited"' if key == "maxPending" else ""
                raise _bad(
                    "quota_bad_value",
                    f"{key} is an integer from {low} to {2**31 - 1}{more} or null",
                )
            parsed = value
        setattr(out, _FIELDS[key], parsed)
    return out


class TenantLabels:
    """The `tenant` label of per-tenant metrics: the first `limit` distinct tenants a broker
    names keep their own label for the broker's life, every later one is "other". First come
    rather than top-N: a counter's series never changes its label, and the series are bounded
    by limit + 1 per reason."""

    def __init__(self, limit: int):
        self.limit = max(0, limit)
        self._named: set[uuid.UUID] = set()
        # The brokers' secret (TenantQuotas.start reads it): a label is the tenant's keyed
        # digest (brokersecret.tenant_label), never its id, which /metrics would show to
        # whoever scrapes or graphs it.
        self.secret: bytes | None = None

    def __call__(self, tenant: uuid.UUID) -> str:
        if self.secret is None:
            return "other"
        if tenant in self._named:
            return brokersecret.tenant_label(self.secret, tenant)
        if len(self._named) < self.limit:
            self._named.add(tenant)
            return brokersecret.tenant_label(self.secret, tenant)
        return "other"


@dataclasses.dataclass
class Charge:
    """The schedules of one admitted call, until a measurement includes them."""

    tenant: uuid.UUID
    n: int
    id: int
    done: int | None = None  # the broker's event sequence when its commit was acknowledged


class _Tenant:
    __slots__ = (
        "at",
        "charged",
        "charges",
        "limits",
        "measured",
        "measured_from",
        "measuring",
        "over",
        "tokens",
        "used",
    )

    def __init__(self, limits: Limits, now: float):
        self.limits = limits
        self.tokens = float(limits.burst)
        self.at = now  # when `tokens` was last brought up to date
        self.measured: int | None = None
        self.measured_from = -1  # event sequence at the start of the measurement applied
        self.measuring: asyncio.Future[None] | None = None
        self.over = False
        self.charges: dict[int, Charge] = {}
        self.charged = 0  # the sum of the charges' n, kept with them (a call reads it)
        self.used = now

    def delta(self) -> int:
        return self.charged

    def add(self, c: Charge) -> None:
        self.charges[c.id] = c
        self.charged += c.n

    def drop(self, cid: int) -> None:
        c = self.charges.pop(cid, None)
        if c is not None:
            self.charged -= c.n

    def refill(self, now: float) -> None:
        rate = self.limits.writes_per_sec
        if rate is not None and now > self.at:
            self.tokens = min(float(self.limits.burst), self.tokens + (now - self.at) * rate)
        self.at = now


def _quota_error(tenant_over: _Tenant) -> QueenError:
    cap = tenant_over.limits.max_pending
    return QueenError(
        "timers_quota_exceeded",
        "timers_quota_exceeded",
        f"the tenant's cap of {cap} pending timers is reached (measured "
        f"{tenant_over.measured}, admitted since {tenant_over.delta()}); scheduling resumes "
        f"when fewer than {math.ceil(RELEASE_SHARE * (cap or 0))} are pending. Cancels and "
        "reads still work",
        403,
    )


def _rate_error(wait_s: float, rate: float) -> QueenError:
    return QueenError(
        "rate_limited",
        "rate_limited",
        f"the tenant's schedule calls are limited to {rate:g} a second; retry after the "
        "Retry-After seconds",
        429,
        retry_after=max(1, math.ceil(wait_s)),
    )


class TenantQuotas:
    """One broker's gate for every tenant's schedules, and the loop that measures them."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: Settings,
        metrics: Metrics,
        *,
        database_url: str = "",
        clock: Callable[[], float] = time.monotonic,
    ):
        for name in ("timers_tenant_max_pending", "timers_tenant_write_burst"):
            v = getattr(settings, name)
            if v is not None and v < 0:
                raise ValueError(f"setting {name} must be >= 0 (got {v})")
        rate = settings.timers_tenant_writes_per_sec
        if rate is not None and not rate > 0:
            raise ValueError(f"setting timers_tenant_writes_per_sec must be > 0 (got {rate})")
        self.pool = pool
        self.settings = settings
        self.metrics = metrics
        self.database_url = database_url
        self.clock = clock
        self.labels = TenantLabels(settings.metrics_tenant_labels)
        self.overrides: dict[uuid.UUID, Override] = {}
        self._tenants: dict[uuid.UUID, _Tenant] = {}
        self._ids = itertools.count()
        # Orders acknowledged commits against measurement starts without a clock: a charge
        # whose `done` is below a measurement's start committed before that snapshot.
        self._seq = itertools.count()
        self._task: asyncio.Task[None] | None = None
        self._census_at = -math.inf
        # Set after every refresh() that completed: tests wait on it instead of sleeping.
        self.refreshed = asyncio.Event()

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        self.labels.secret = await brokersecret.load(self.pool)
        await self.load_overrides()
        period = self.settings.timers_tenant_quota_refresh_ms
        if period > 0 and self._task is None:
            self._task = asyncio.create_task(self._loop(period / 1000.0), name="queen-quotas")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def _loop(self, period: float) -> None:
        while True:
            await asyncio.sleep(period)
            try:
                await self.refresh()
            except Exception as exc:  # noqa: BLE001 - keep the last measurement
                if not absorbed(self.database_url, exc):
                    log.warning("could not measure the tenants' pending timers: %s", exc)

    # -- limits ----------------------------------------------------------------------------
    def limits(self, tenant: uuid.UUID) -> Limits:
        return effective(self.settings, self.overrides.get(tenant))

    @property
    def any_cap(self) -> bool:
        """Whether some tenant may have a cap (the default, or an override)."""
        return self.settings.timers_tenant_max_pending is not None or any(
            o.max_pending is not None and o.max_pending != UNLIMITED
            for o in self.overrides.values()
        )

    async def load_overrides(self) -> None:
        rows = await self.pool.fetch(Q.quota_overrides)
        self.overrides = {
            r["tenant_id"]: Override(r["max_pending"], r["writes_per_sec"], r["write_burst"])
            for r in rows
        }
        for tenant, st in self._tenants.items():
            self._adopt(st, self.limits(tenant))

    def _adopt(self, st: _Tenant, limits: Limits) -> None:
        if limits != st.limits:
            st.tokens = min(st.tokens, float(limits.burst))
            if limits.max_pending != st.limits.max_pending:
                st.measured_from = -1  # a new cap: the next measurement decides
                st.over = False if limits.max_pending is None else st.over
            st.limits = limits

    # -- the gate --------------------------------------------------------------------------
    async def admit(self, tenant: uuid.UUID, n: int) -> Charge | None:
        """Admit one call scheduling `n` timers, or raise its refusal. Answers the charge to
        settle or refund (None: no cap, nothing to account)."""
        limits = self.limits(tenant)
        if not limits.limited:
            return None
        now = self.clock()
        st = self._tenants.get(tenant)
        if st is None:
            st = self._tenants[tenant] = _Tenant(limits, now)
        st.used = now
        took = False
        rate = limits.writes_per_sec
        if rate is not None:
            st.refill(now)
            if st.tokens < 1.0:
                self._rejected("rate_limited", tenant)
                raise _rate_error((1.0 - st.tokens) / rate, rate)
            st.tokens -= 1.0
            took = True
        cap = limits.max_pending
        if cap is None:
            return None
        try:
            if st.measured is None:
                await self._measure_first(tenant, st)
        except BaseException:
            if took:
                st.tokens = min(float(st.limits.burst), st.tokens + 1.0)
            raise
        assert st.measured is not None
        if st.over or st.measured + st.delta() + n > cap:
            # Sticky only when the tenant itself is at its cap: a call refused for its own
            # size (a batch bigger than the headroom) leaves the next, smaller one admissible.
            if not st.over and st.measured + st.delta() >= cap:
                st.over = True
                self._gauge()
            if took:
                st.tokens = min(float(st.limits.burst), st.tokens + 1.0)
            self._rejected("quota", tenant)
            raise _quota_error(st)
        c = Charge(tenant, n, next(self._ids))
        st.add(c)
        return c

    def admit_rate(self, tenant: uuid.UUID) -> bool:
        """Take one token of the tenant's write rate for a call that writes no new timer (fire
        now), or raise 429 rate_limited. Answers whether a token was taken (give_back() returns
        it when the call then fails)."""
        limits = self.limits(tenant)
        rate = limits.writes_per_sec
        if rate is None:
            return False
        now = self.clock()
        st = self._tenants.get(tenant)
        if st is None:
            st = self._tenants[tenant] = _Tenant(limits, now)
        st.used = now
        st.refill(now)
        if st.tokens < 1.0:
            self._rejected("rate_limited", tenant)
            raise _rate_error((1.0 - st.tokens) / rate, rate)
        st.tokens -= 1.0
        return True

    def give_back(self, tenant: uuid.UUID) -> None:
        """Return the token admit_rate() took for a call that then failed."""
        st = self._tenants.get(tenant)
        if st is not None:
            st.tokens = min(float(st.limits.burst), st.tokens + 1.0)

    def settle(self, charge: Charge | None, added: int | None = None) -> None:
        """The call committed: `added` of its schedules made new rows (None: all of them; a
        reschedule of a pending key adds none)."""
        if charge is None:
            return
        if added is not None:
            st = self._tenants.get(charge.tenant)
            n = min(charge.n, max(0, added))
            if st is not None and charge.id in st.charges:
                st.charged -= charge.n - n
            charge.n = n
        charge.done = next(self._seq)

    def refund(self, charge: Charge | None) -> None:
        """The call did not commit: its charge is given back."""
        if charge is None:
            return
        st = self._tenants.get(charge.tenant)
        if st is not None:
            st.drop(charge.id)

    def _rejected(self, reason: str, tenant: uuid.UUID) -> None:
        self.metrics.tenant_rejected.labels(reason, self.labels(tenant)).inc()

    def _gauge(self) -> None:
        self.metrics.tenants_over_quota.set(sum(1 for t in self._tenants.values() if t.over))

    # -- measurement -----------------------------------------------------------------------
    async def _measure_first(self, tenant: uuid.UUID, st: _Tenant) -> None:
        """The first call of a tenant waits for one measurement; concurrent first calls share
        it."""
        if st.measuring is None:
            st.measuring = asyncio.ensure_future(self.measure([tenant]))
        fut = st.measuring
        try:
            await asyncio.shield(fut)
        finally:
            if st.measuring is fut and fut.done():
                st.measuring = None

    async def measure(self, tenants: Iterable[uuid.UUID]) -> None:
        """Measure `tenants` now (one statement per MEASURE_BATCH), publish the counts in
        queen.tenant_quota_usage and apply them to this broker's view."""
        todo = sorted(set(tenants))
        for i in range(0, len(todo), MEASURE_BATCH):
            batch = todo[i : i + MEASURE_BATCH]
            caps = [self.limits(t).max_pending for t in batch]
            started = next(self._seq)
            t0 = time.perf_counter()
            rows = await self.pool.fetch(Q.quota_measure, batch, caps)
            self.metrics.quota_measure.observe(time.perf_counter() - t0)
            for r in rows:
                st = self._tenants.get(r["tenant_id"])
                if st is not None:
                    self._apply(st, int(r["pending"]), bool(r["over"]), started)
        self._gauge()

    def _apply(self, st: _Tenant, pending: int, over: bool, started: int) -> None:
        if started <= st.measured_from:
            return  # an older measurement answering late: the newer one stands
        st.measured_from = started
        st.measured = pending
        for cid in [c.id for c in st.charges.values() if c.done is not None and c.done < started]:
            st.drop(cid)
        cap = st.limits.max_pending
        if cap is None:
            st.over = False
        else:
            st.over = over or pending >= cap or (st.over and pending >= RELEASE_SHARE * cap)

    async def refresh(self) -> None:
        """One period's work: re-read the overrides, forget idle tenants, measure the capped
        tenants this broker serves and every tenant flagged over (whoever flagged it), and,
        every QUEEN_TIMERS_TENANT_QUOTA_CENSUS_MS, every capped tenant with pending timers."""
        try:
            await self.load_overrides()
            now = self.clock()
            period_s = self.settings.timers_tenant_quota_refresh_ms / 1000.0
            idle = max(IDLE_MIN_S, IDLE_PERIODS * period_s)
            for tenant, st in list(self._tenants.items()):
                if not st.over and not st.charges and now - st.used > idle:
                    del self._tenants[tenant]
            todo = {t for t, st in self._tenants.items() if st.limits.max_pending is not None}
            todo.update(r["tenant_id"] for r in await self.pool.fetch(Q.quota_over_tenants))
            await self.measure(todo)
            census = self.settings.timers_tenant_quota_census_ms
            if census > 0 and now - self._census_at >= census / 1000.0:
                self._census_at = now
                await self.census()
        finally:
            self.refreshed.set()

    async def census(self) -> None:
        """Measure every capped tenant that has pending timers (a skip scan of the primary
        key), and every tenant with a usage row (whose cap may be gone): the tenants that
        schedule only through the SQL API are measured here."""
        todo = {r["tenant_id"] for r in await self.pool.fetch(Q.quota_usage_tenants)}
        todo.update(t for t, o in self.overrides.items() if o.max_pending is not None)
        if self.settings.timers_tenant_max_pending is not None:
            after = None
            while True:
                page = [r["t"] for r in await self.pool.fetch(Q.quota_census, after, MEASURE_BATCH)]
                todo.update(page)
                if len(page) < MEASURE_BATCH:
                    break
                after = page[-1]
        await self.measure(todo)

    # -- what operators set and read ----------------------------------------------------------
    async def set_override(self, tenant: uuid.UUID, changes: Any) -> dict[str, Any]:
        """Change a tenant's overrides (the keys given; null: back to the setting) and apply
        them on this broker at once; the others adopt them at their next refresh."""
        await self.load_overrides()
        new = parse_changes(self.overrides.get(tenant), changes)
        if new == Override():
            await self.pool.execute(Q.quota_override_delete, tenant)
        else:
            await self.pool.execute(
                Q.quota_override_write, tenant, new.max_pending, new.writes_per_sec, new.burst
            )
        await self.load_overrides()
        await self.measure([tenant])  # publishes the flag under the new cap (or drops it)
        return self.view(tenant)

    async def read(self, tenant: uuid.UUID) -> dict[str, Any]:
        """One tenant's limits and pending count, measured now when it has a cap."""
        await self.load_overrides()
        if self.limits(tenant).max_pending is not None:
            st = self._tenants.get(tenant)
            if st is None:
                st = self._tenants[tenant] = _Tenant(self.limits(tenant), self.clock())
            await self.measure([tenant])
        return self.view(tenant)

    def defaults(self) -> dict[str, Any]:
        s = self.settings
        rate = s.timers_tenant_writes_per_sec
        return {
            "maxPending": s.timers_tenant_max_pending,
            "writesPerSec": rate,
            "burst": _burst(rate, s.timers_tenant_write_burst),
        }

    def view(self, tenant: uuid.UUID) -> dict[str, Any]:
        """This broker's view of one tenant."""
        lim = self.limits(tenant)
        st = self._tenants.get(tenant)
        return {
            "tenant": str(tenant),
            "maxPending": lim.max_pending,
            "writesPerSec": lim.writes_per_sec,
            "burst": lim.burst,
            "overrides": (self.overrides.get(tenant) or Override()).as_wire(),
            "pending": st.measured if st is not None else None,
            "admittedSinceMeasured": st.delta() if st is not None else 0,
            "overQuota": bool(st is not None and st.over),
        }
