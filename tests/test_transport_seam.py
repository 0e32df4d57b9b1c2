"""The transport seam: discovery through entry points, settings in --help, the start/stop
contract of every installed transport, and the core's independence from any transport."""

from __future__ import annotations

import ast
import inspect
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from queen_timers.settings import Settings, declared
from queen_timers.transport import Transport, discover, is_loopback, settings_classes

CORE = Path(__file__).resolve().parents[1] / "queen_timers"


def test_core_never_imports_a_transport_library_or_bench():
    banned = {"aiohttp", "bench", "queen_http", "queen_tcp", "queen_linejson"}
    offenders = []
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [
                f"{path.relative_to(CORE)}: {n}" for n in names if n.split(".")[0] in banned
            ]
    assert offenders == []


def test_builtin_transports_are_discovered_like_plugins():
    found = discover()
    assert {"http", "tcp"} <= set(found)
    names = {s.env for cls in settings_classes(found.values()) for s in declared(cls)}
    assert {
        "QUEEN_HTTP_HOST",
        "QUEEN_HTTP_PORT",
        "QUEEN_HTTP_MAX_BODY_BYTES",
        "QUEEN_TCP_HOST",
        "QUEEN_TCP_PORT",
    } <= names


def test_cli_lists_transports_and_their_settings():
    out = subprocess.run(
        [sys.executable, "-m", "queen_timers", "transports"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "http\tqueen_http" in out and "tcp\tqueen_tcp" in out
    help_text = subprocess.run(
        [sys.executable, "-m", "queen_timers", "serve", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "QUEEN_HTTP_PORT" in help_text and "QUEEN_TCP_PORT" in help_text


def test_unknown_transport_is_refused_by_name():
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "queen_timers",
            "serve",
            "--transport",
            "carrier-pigeon",
            "--database-url",
            "postgresql://127.0.0.1:1/none",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "carrier-pigeon" in run.stderr


@pytest.mark.parametrize("name", ["http", "tcp"])
async def test_start_stop_contract(name, queen):
    factory = discover()[name]
    port_setting = f"{name}_port"
    settings = Settings({port_setting: 0}, environ={}, extra=settings_classes([factory]))
    t = factory(settings)
    assert isinstance(t, Transport) and t.name == name
    await t.stop()  # before start: a no-op
    await t.start(queen)
    assert t.port != 0  # type: ignore[attr-defined]  # both transports bind a port
    await t.stop()
    await t.stop()  # twice


@pytest.mark.parametrize("name", ["http", "tcp", "linejson"])
async def test_every_transport_warns_when_open_beyond_loopback(name, queen, caplog):
    found = discover()
    if name not in found:
        pytest.skip(f"{name} is not installed (CI installs it)")
    factory = found[name]
    for host, warned in (("0.0.0.0", True), ("127.0.0.1", False)):
        caplog.clear()
        settings = Settings(
            {f"{name}_host": host, f"{name}_port": 0},
            environ={},
            extra=settings_classes([factory]),
        )
        t = factory(settings)
        with caplog.at_level(logging.WARNING):
            await t.start(queen)
            await t.stop()
        said = [
            r.getMessage() for r in caplog.records if "without authentication" in r.getMessage()
        ]
        assert bool(said) is warned, (host, said)
        assert all(host in m for m in said)


def test_is_loopback():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert is_loopback("127.8.9.10")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("10.0.0.1")
    assert not is_loopback("example.org")


def test_every_operation_is_a_service_method_taking_the_identity_first():
    """The name-dispatching transports serve queen_timers.service.OPERATIONS as they are."""
    import queen_linejson
    from queen_tcp import protocol
    from queen_timers.service import OPERATIONS, Queen

    for op in OPERATIONS:
        fn = getattr(Queen, op)
        assert inspect.iscoroutinefunction(fn), op
        assert list(inspect.signature(fn).parameters)[1] == "ident", op
    assert protocol.OPERATIONS is OPERATIONS
    assert queen_linejson.OPERATIONS is OPERATIONS
