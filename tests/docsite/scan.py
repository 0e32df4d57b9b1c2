"""What the docs tests compare the pages with, read from the code itself.

Nothing here is imported from the pages: each function reads the source tree (or the objects the
code declares), so a page that drifts from the code fails a test instead of agreeing with it.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
DESIGN = DOCS / "design"

# The packages a user installs: every refusal they can answer lives in one of these.
SHIPPED = (
    ROOT / "queen_timers",
    ROOT / "plugins" / "http" / "queen_http",
    ROOT / "plugins" / "tcp" / "queen_tcp",
    ROOT / "examples" / "custom_transport" / "queen_linejson",
)


# Not ours, though inside the tree: virtual environments, the peers the bench installs (their
# packages' own pages and sources, in venvs and node_modules) and the bench's results
# (git-ignored, written by runs). The scans never descend into them.
NOT_OURS = (ROOT / "bench" / ".peers", ROOT / "bench" / "results")


def ours(path: Path) -> bool:
    """False for a path under a directory the repository holds but did not write."""
    return ".venv" not in path.parts and not any(d == path or d in path.parents for d in NOT_OURS)


def files_under(root: Path) -> list[Path]:
    """Every file under `root` that is ours, sorted, never walking into what is not."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if ours(here / d)]
        out.extend(here / f for f in filenames if ours(here / f))
    return sorted(out)


def docgen() -> ModuleType:
    """tools/docgen.py, the generator of the pages' generated blocks (not a package)."""
    spec = importlib.util.spec_from_file_location("docgen", ROOT / "tools" / "docgen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def python_files(*roots: Path) -> Iterator[Path]:
    for root in roots:
        for path in files_under(root):
            if path.suffix == ".py" and "tests" not in path.relative_to(root).parts:
                yield path


# -- error codes and reasons -------------------------------------------------------------------
_ROLES = ("code", "reason")


class _Function:
    def __init__(self, module: str, node: ast.FunctionDef | ast.AsyncFunctionDef):
        self.module = module
        self.node = node
        args = node.args
        self.positional = [a.arg for a in (*args.posonlyargs, *args.args)]
        if self.positional[:1] in (["self"], ["cls"]):
            self.positional = self.positional[1:]
        self.params = {*self.positional, *(a.arg for a in args.kwonlyargs)}
        # A literal default of a parameter is a value the function may raise with.
        self.defaults: dict[str, ast.expr] = {}
        pos_args = [*args.posonlyargs, *args.args]
        for a, d in zip(pos_args[len(pos_args) - len(args.defaults) :], args.defaults):
            self.defaults[a.arg] = d
        for a, kd in zip(args.kwonlyargs, args.kw_defaults):
            if kd is not None:
                self.defaults[a.arg] = kd


def _callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _argument(call: ast.Call, carrier: list[str], param: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == param:
            return kw.value
    i = carrier.index(param) if param in carrier else -1
    if 0 <= i < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: i + 1]):
        return call.args[i]
    return None


def raised_codes() -> tuple[set[str], set[str]]:
    """(error codes, reasons) that the shipped code can put in a refusal's envelope.

    Every `QueenError(code, reason, ...)` call with literal arguments counts, and so does every
    call of a helper that passes one of its parameters on as a code or a reason (`_bad(reason,
    detail)`, `check_name(value, what, reason)`, through any depth of such helpers), with the
    literals its callers pass and its parameters' literal defaults. An envelope written as a
    dict literal ({"error", "reason", "detail"}) counts too. A value computed at run time (a
    SQLSTATE, a message from the database) is no literal and is documented by hand."""
    functions: list[_Function] = []
    calls: list[tuple[_Function | None, str, ast.Call]] = []
    found: dict[str, set[str]] = {role: set() for role in _ROLES}
    for path in python_files(*SHIPPED):
        module = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(), str(path))
        owners: dict[ast.AST, _Function] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                fn = _Function(module, node)
                functions.append(fn)
                for inner in ast.walk(node):
                    owners[inner] = fn  # the innermost definition wins: walked outside-in
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                calls.append((owners.get(node), module, node))
            elif isinstance(node, ast.Dict):
                entries = {
                    k.value: v
                    for k, v in zip(node.keys, node.values)
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)
                }
                if {"error", "reason", "detail"} <= entries.keys():  # the envelope, not a verdict
                    for key, role in (("error", "code"), ("reason", "reason")):
                        v = entries[key]
                        if isinstance(v, ast.Constant) and isinstance(v.value, str):
                            found[role].add(v.value)

    by_name: dict[str, list[_Function]] = {}
    for fn in functions:
        by_name.setdefault(fn.node.name, []).append(fn)
    # carrier -> (its positional parameters, {(parameter, role)}); a local definition of a
    # name is preferred to one of another module (helpers of the same name differ by module).
    carriers: dict[tuple[str, str], tuple[list[str], set[tuple[str, str]]]] = {
        ("", "QueenError"): (["code", "reason", "detail", "status"], {(r, r) for r in _ROLES})
    }

    def resolve(module: str, name: str) -> tuple[list[str], set[tuple[str, str]]] | None:
        if name == "QueenError":
            return carriers[("", "QueenError")]
        if (module, name) in carriers:
            return carriers[(module, name)]
        if any(fn.module == module for fn in by_name.get(name, ())):
            return None  # defined here, and it carries nothing
        for (mod, other), carrier in carriers.items():
            if other == name and mod:
                return carrier
        return None

    changed = True
    while changed:
        changed = False
        for owner, module, call in calls:
            name = _callee(call)
            carrier = resolve(module, name) if name else None
            if carrier is None:
                continue
            positional, roles = carrier
            for param, role in sorted(roles):
                arg = _argument(call, positional, param)
                if name == "QueenError" and param == "reason" and arg is None:
                    arg = _argument(call, positional, "code")  # reason defaults to the code
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found[role].add(arg.value)
                elif isinstance(arg, ast.Name) and owner is not None and arg.id in owner.params:
                    owner_key = (owner.module, owner.node.name)
                    _, owner_roles = carriers.setdefault(owner_key, (owner.positional, set()))
                    if (arg.id, role) not in owner_roles:
                        owner_roles.add((arg.id, role))
                        changed = True
                        default = owner.defaults.get(arg.id)
                        if isinstance(default, ast.Constant) and isinstance(default.value, str):
                            found[role].add(default.value)
    return found["code"], found["reason"]


_SQL_REFUSE = re.compile(r"_timer_sql_refuse_v1\(\s*'\w+',\s*'(\w+)'")
_SQL_NAME = re.compile(r"_timer_sql_name_v1\([^;]*?'(\w+)',\s*'(\w+)'\s*\)", re.DOTALL)


def sql_reasons() -> set[str]:
    """Reasons the SQL API's procedures refuse with (migrations/*.sql)."""
    out: set[str] = set()
    for path in sorted((ROOT / "migrations").glob("*.sql")):
        text = path.read_text()
        out.update(_SQL_REFUSE.findall(text))
        for pair in _SQL_NAME.findall(text):
            out.update(pair)
    return out


# -- section citations -------------------------------------------------------------------------
_SECTION = r"\d+(?:\.\d+)*[a-z]?"
_CITE = re.compile(rf"(?:(?P<doc>[\w./-]+)\s+)?§(?P<sec>{_SECTION})")
_HEADING = re.compile(rf"^#+\s+(?P<sec>{_SECTION})[.\s]", re.MULTILINE)

# Where the code and our own pages cite the design documents. The design documents themselves
# are copies of sources that cite their own sources (the reference broker's PLAN, ...), so only
# their citations of each other are checked, through the pages that quote them.
CITING = (
    *SHIPPED,
    ROOT / "migrations",
    ROOT / "tests",
    ROOT / "bench",
    ROOT / "examples",
    ROOT / "tools",
)
CITING_SUFFIXES = (".py", ".sql", ".md")


def design_sections() -> dict[str, set[str]]:
    """docs/design/<name>.md -> the numbers of its sections (from its numbered headings)."""
    return {
        path.stem: set(_HEADING.findall(path.read_text())) for path in sorted(DESIGN.glob("*.md"))
    }


def citing_files() -> Iterator[Path]:
    seen: set[Path] = set()
    here = Path(__file__).parent  # these tests quote citations as examples
    for root in CITING:
        for path in files_under(root):
            if path.suffix in CITING_SUFFIXES and here not in path.parents and path not in seen:
                seen.add(path)
                yield path
    for path in sorted(DOCS.rglob("*.md")):
        if DESIGN not in path.parents:
            yield path
    readme = ROOT / "README.md"
    if readme.exists():
        yield readme


def citations(text: str) -> Iterator[tuple[int, str | None, str]]:
    """(line, document named or None, section) of every § in a text, in order. A § with no
    document before it continues the previous citation ("client-wire §6, §7", "§2.3-§2.6")."""
    for lineno, line in enumerate(text.splitlines(), 1):
        for m in _CITE.finditer(line):
            doc = m.group("doc")
            if doc is not None:
                doc = doc.rstrip(".,;:")
                if doc.endswith(".md"):
                    doc = Path(doc).stem
                if not re.fullmatch(r"[A-Za-z][\w-]*", doc):
                    doc = None  # "(§12", "-- §12", "§2.3-§2.6": no document named here
            yield lineno, doc, m.group("sec")
