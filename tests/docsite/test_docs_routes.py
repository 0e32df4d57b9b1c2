"""The HTTP and TCP reference pages name every route and operation the transports serve, and
nothing they do not: the HTTP page against the app's route table and /openapi.json, the TCP page
against the protocol's operation set."""

from __future__ import annotations

import inspect
import re

from aiohttp import web

from queen_http import build_app, openapi
from queen_http.console import CONSOLE_PATH
from queen_tcp.protocol import OPERATIONS
from queen_timers.identity import Authenticator
from queen_timers.service import Queen
from queen_timers.settings import Settings

from .scan import DOCS

_ROUTE_HEADING = re.compile(r"^#{2,4} `(GET|POST|PUT|PATCH|DELETE) (/[^`\s]*)`", re.MULTILINE)
_OP_HEADING = re.compile(r"^#{2,4} `(\w+)`", re.MULTILINE)


def _page_routes() -> list[tuple[str, str]]:
    return _ROUTE_HEADING.findall((DOCS / "reference" / "http.md").read_text())


def _is_console(resource: web.AbstractResource) -> bool:
    # The console's files are served by handlers (to set their security headers), not by a
    # StaticResource: /console and /console/{path}.
    return resource.canonical.rstrip("/") == CONSOLE_PATH.rstrip("/") or (
        resource.canonical.startswith(CONSOLE_PATH)
    )


def _app() -> web.Application:
    # The route table reads nothing of the broker: a Queen never started (no database) will do.
    return build_app(Queen(Settings()), Authenticator(Settings()))


def _router_routes() -> set[tuple[str, str]]:
    app = _app()
    return {
        (r.method, r.resource.canonical)
        for r in app.router.routes()
        # Static files (the console's pages) are not API routes; their own page covers them.
        if r.resource is not None
        and not isinstance(r.resource, web.StaticResource)
        and not _is_console(r.resource)
    }


def test_the_console_guide_covers_the_console_routes():
    app = _app()
    console = [r for r in app.router.routes() if r.resource is not None and _is_console(r.resource)]
    assert console, "the console's routes moved: update _is_console"
    assert f"`{CONSOLE_PATH}`" in (DOCS / "guides" / "console.md").read_text()


def test_http_page_documents_every_route_once():
    routes = _page_routes()
    assert len(routes) == len(set(routes)), "a route has two sections on the page"
    assert set(routes) == _router_routes()


def test_openapi_describes_the_routes_the_page_documents():
    described = {(m.upper(), p) for p, ops in openapi()["paths"].items() for m in ops}
    assert described == set(_page_routes())


def test_tcp_page_documents_every_operation_once():
    text = (DOCS / "reference" / "tcp.md").read_text()
    ops = _OP_HEADING.findall(text.split("## Operations", 1)[1])
    assert len(ops) == len(set(ops)), "an operation has two sections on the page"
    assert set(ops) == {"hello", *OPERATIONS}


def test_tcp_page_names_every_argument_of_each_operation():
    text = (DOCS / "reference" / "tcp.md").read_text().split("## Operations", 1)[1]
    sections = dict(zip(_OP_HEADING.findall(text), re.split(_OP_HEADING, text)[2::2]))
    for op in OPERATIONS:
        params = inspect.signature(getattr(Queen, op)).parameters
        for name in params:
            if name not in ("self", "ident", "now"):
                assert f'"{name}"' in sections[op], f"tcp.md, {op}: argument {name} missing"
