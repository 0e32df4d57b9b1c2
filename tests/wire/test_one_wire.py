"""The wire is defined once (issue 23): the service's signatures, the operations TCP and the
line-JSON example dispatch, and the HTTP routes with their /openapi.json schemas all come from
the same queen_timers.wire types. No database: this reads types and documents."""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any, get_args, get_origin

import msgspec
import pytest

from queen_http import ROUTES, openapi
from queen_http.app import _REF, _wire_types
from queen_http.not_here import NOT_HERE
from queen_timers.errors import QueenError
from queen_timers.service import Queen
from queen_timers.transport import arguments, operation
from queen_timers.wire import OPERATIONS, decoded_shape
from queen_timers.wire.timers import TimerOpsBody

# Names the reference client gives a body's fields where the method's argument is named
# otherwise (client-wire §6).
_CLIENT_NAMES = {"acknowledgments": "acks", "consumerGroup": "group"}
# The service's clock override: for tests, never an argument on the wire.
_NOT_ON_THE_WIRE = {"ident", "now", "return"}


def _hints(obj: Any) -> dict[str, Any]:
    return typing.get_type_hints(obj, include_extras=True)


def _without_none(t: Any) -> Any:
    args = get_args(t)
    if get_origin(t) in (typing.Union, types.UnionType) and type(None) in args:
        rest = tuple(a for a in args if a is not type(None))
        return rest[0] if len(rest) == 1 else typing.Union[rest]  # noqa: UP007
    return t


def _base(t: Any) -> Any:
    """A type as the service receives it: constraints (Annotated), absence (None, UNSET) and
    the enumerations a body spells out (a Literal of strings is a str) set aside."""
    origin = get_origin(t)
    if origin is typing.Annotated:
        return _base(get_args(t)[0])
    if origin is typing.Literal:
        kinds = {type(v) for v in get_args(t)}
        return kinds.pop() if len(kinds) == 1 else t
    if origin in (typing.Union, types.UnionType):
        rest = [_base(a) for a in get_args(t) if a not in (type(None), msgspec.UnsetType)]
        return rest[0] if len(rest) == 1 else frozenset(rest)
    return t


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_each_operation_is_a_method_whose_signature_is_its_struct(name):
    op = OPERATIONS[name]
    method = getattr(Queen, name)
    hints = _hints(method)
    params = {k: v for k, v in hints.items() if k not in _NOT_ON_THE_WIRE}
    assert params == _hints(op.arguments), f"Queen.{name} and {op.arguments.__name__} differ"
    assert hints["return"] == op.answer
    # the same defaults, so a transport's call means what a direct call means
    sig = inspect.signature(method)
    optional = op.fields()[len(op.required()) :]
    defaults = dict(zip(optional, op.arguments.__struct_defaults__, strict=True))
    for field in op.fields():
        param = sig.parameters[field]
        assert (param.default is inspect.Parameter.empty) == (field not in defaults), field
        if field in defaults:
            assert param.default == defaults[field], field
    assert list(sig.parameters)[1] == "ident"  # the caller's identity first, never a field


def test_every_public_coroutine_of_queen_that_takes_an_identity_is_an_operation():
    served = {
        name
        for name, fn in inspect.getmembers(Queen, inspect.iscoroutinefunction)
        if not name.startswith("_") and "ident" in inspect.signature(fn).parameters
    }
    assert served == set(OPERATIONS)


def _body_fits(body: Any, args: dict[str, Any]) -> bool:
    """The route's body is an argument's shape, or a struct of the operation's arguments (by
    name, or by the reference client's name) each with the argument's type or shape, or one
    item of a list argument with named arguments beside it."""
    shapes = {n: decoded_shape(h) for n, h in args.items()}
    if body in shapes.values():
        return True
    if not (isinstance(body, type) and issubclass(body, msgspec.Struct)):
        return False
    item_of = [get_args(s)[0] for s in shapes.values() if get_origin(s) is list and get_args(s)]
    extra = set(body.__struct_fields__)
    for item in item_of:
        if isinstance(item, type) and issubclass(item, msgspec.Struct) and issubclass(body, item):
            extra -= set(item.__struct_fields__)
    body_hints = _hints(body)
    for field in extra:
        name = _CLIENT_NAMES.get(field, _snake(field))
        if name not in args:
            return False
        if _base(body_hints[field]) not in (_base(args[name]), _base(shapes[name])):
            return False
    return True


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


@pytest.mark.parametrize("route", [r for r in ROUTES if r.operation], ids=lambda r: r.path)
def test_each_route_names_an_operation_and_its_types(route):
    op = OPERATIONS[route.operation]
    args = _hints(op.arguments)
    if route.body_type is not None:
        assert _body_fits(route.body_type, args), (route.path, route.body_type)
    for answer in route.responses:
        if len(answer) == 3 and answer[0] < 300:
            got = answer[2]
            # the HTTP wraps a batch's results under one key, and a pop's None is its 204
            wrapped = _hints(got).get("results") if isinstance(got, type) else None
            assert got in (op.answer, _without_none(op.answer)) or wrapped == op.answer, (
                route.path,
                got,
            )


def test_every_route_that_calls_the_service_names_its_operation():
    # the system's own, the reference's statistics refresh (nothing to refresh here) and the
    # refusals of what has no meaning here (queen_http.not_here) call no service method
    system = {"/health", "/ready", "/metrics", "/metrics/prometheus", "/openapi.json"}
    system.add("/api/v1/stats/refresh")
    refused = {(e.method, e.path) for e in NOT_HERE}
    for r in ROUTES:
        assert r.operation is not None or r.path in system or (r.method, r.path) in refused, r.path


def test_the_openapi_components_are_generated_from_the_wire_types():
    doc = openapi()
    types = _wire_types()
    _, components = msgspec.json.schema_components(types, ref_template=_REF)
    assert doc["components"]["schemas"] == components
    for t in types:  # every type is the wire's (a mapping's str keys are just str)
        named = get_args(t) or (t,)
        for n in named:
            if isinstance(n, type) and n is not str:
                assert n.__module__.startswith("queen_timers.wire"), n
    # a body's schema is the generated schema of its type
    timers = doc["paths"]["/api/v1/timers"]["post"]["requestBody"]["content"]
    shape = decoded_shape(_hints(OPERATIONS["timers_apply"].arguments)["body"])
    assert shape is TimerOpsBody
    generated = msgspec.json.schema_components([shape], ref_template=_REF)[0][0]
    assert timers["application/json"]["schema"] == generated


def test_the_dispatch_table_checks_names_against_the_struct():
    op = operation("timer_peek")
    args = arguments(op, {"queue": "q", "timer_key": "k"})
    assert msgspec.structs.asdict(args) == {"queue": "q", "timer_key": "k"}
    for bad in ({"queue": "q"}, {"queue": "q", "timer_key": "k", "now": 1}, {1: "q"}):
        with pytest.raises(QueenError) as ei:
            arguments(op, bad)
        assert (ei.value.reason, ei.value.status) == ("bad_arguments", 400)
    with pytest.raises(QueenError) as ei:
        arguments(op, ["q", "k"])
    assert ei.value.reason == "bad_body"
    with pytest.raises(QueenError) as ei:
        operation("drop_database")
    assert (ei.value.reason, ei.value.status) == ("unknown_operation", 404)
