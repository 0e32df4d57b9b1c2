"""schemathesis against the live broker's /openapi.json: every route, a bounded number of
generated requests each (valid and invalid), checked for no 500, answers that match the
document (status, content type, headers, body schema), 405s that name their methods, and every
refusal being the flat envelope.

Deterministic: Hypothesis is derandomized (the same requests every run, from a fixed seed
derived from each test) with no example database, there is no time limit on an example, and
nothing waits on a clock: pops are sent with wait=false, so a long-poll never parks.

The broker runs in a thread with its own event loop, because schemathesis calls it through a
blocking HTTP client from the test's thread; it is served on the test database like every other
HTTP test, and the run covers the document that the route table builds (the same one
/openapi.json serves, which test_http checks).
"""

from __future__ import annotations

import asyncio
import threading

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks as st_checks
from schemathesis.specs.openapi import checks as oa_checks

from queen_http import HttpTransport, openapi
from queen_http.testing import http_settings
from queen_timers.service import Queen

# Per operation, in each of the valid and invalid modes: 20 routes stay well under 2 minutes
# here (measured: see the commit that sets it).
MAX_EXAMPLES = 30

schema = schemathesis.openapi.from_dict(openapi())


def _never_park(case) -> None:
    """A long-poll waits for real time (30 s by default): the run must never depend on a clock,
    so a pop that the route would read as wait=true is sent with wait=false."""
    if case.query and str(case.query.get("wait")).lower() in ("true", "1"):
        case.query["wait"] = "false"


@schemathesis.check
def refusals_are_the_envelope(ctx, response, case):
    if response.status_code < 400:
        return None
    doc = response.json()
    fields = ("error", "reason", "detail")
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), str) for k in fields):
        raise AssertionError(f"a {response.status_code} that is not the envelope: {doc!r}")
    if doc["error"] == "internal_error":
        raise AssertionError(f"an internal error: {doc!r}")
    return None


CHECKS = [
    st_checks.not_a_server_error,
    oa_checks.status_code_conformance,
    oa_checks.content_type_conformance,
    oa_checks.response_headers_conformance,
    oa_checks.response_schema_conformance,
    oa_checks.unsupported_method,
    oa_checks.allow_header_conformance,
    refusals_are_the_envelope,
]


class _Broker(threading.Thread):
    """A Queen and its HTTP transport on the test database, on an event loop of their own."""

    def __init__(self, db_url: str):
        super().__init__(name="schemathesis-broker", daemon=True)
        self.db_url = db_url
        self.ready = threading.Event()
        self.url = ""
        self.failure: BaseException | None = None
        self.loop = asyncio.new_event_loop()
        self._done = asyncio.Event()

    def run(self) -> None:
        try:
            self.loop.run_until_complete(self._serve())
        except BaseException as exc:  # noqa: BLE001 - reported to the test by `failure`
            self.failure = exc
            self.ready.set()
        finally:
            self.loop.close()

    async def _serve(self) -> None:
        queen = Queen(
            database_url=self.db_url,
            sweeper=False,
            retention_interval_ms=0,
            encryption_key="11" * 32,
        )
        await queen.start()
        transport = HttpTransport(http_settings())
        try:
            await transport.start(queen)
            self.url = transport.url
            self.ready.set()
            await self._done.wait()
        finally:
            await transport.stop()
            await queen.stop()

    def shut(self) -> None:
        self.loop.call_soon_threadsafe(self._done.set)
        self.join(60)


@pytest.fixture
def broker_url(db_url):
    broker = _Broker(db_url)
    broker.start()
    assert broker.ready.wait(60), "the broker did not start"
    if broker.failure is not None:
        raise broker.failure
    try:
        yield broker.url
    finally:
        broker.shut()


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    # The broker fixture is shared by an operation's examples on purpose, and too_slow is a
    # clock: no health check may fail this run by the machine's load.
    suppress_health_check=list(HealthCheck),
)
def test_every_route_answers_as_documented(case, broker_url):
    _never_park(case)
    # A generous read timeout: a loaded machine makes a request slow, never a failure.
    case.call_and_validate(base_url=broker_url, checks=CHECKS, timeout=120)
