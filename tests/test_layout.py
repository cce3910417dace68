"""The layout shows the data flow: layers import downwards only, privately within a package.

log -> cache, request -> llm -> checker -> agent / audit / emulator -> cli
(docs/architecture.md). An import that points up a layer (at module level or
lazily inside a function), into the root package ``tapelog`` (the top layer),
or into another package's private module, fails here; so does importing the
agent or the wires pulling in the emulator's web stack, and so does an error
class defined outside ``tapelog._errors``.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "tapelog"

# What each package may import, anywhere in its code (besides itself and the CORE modules).
ALLOWED: dict[str, set[str]] = {
    "log": set(),
    "cache": {"log"},
    "request": {"log"},
    "store": {"log", "request"},
    "llm": {"log", "cache", "request"},
    "checker": {"log", "cache", "request", "llm"},
    "emulator": {"log", "cache"},
    "agent": {"log", "cache", "request", "llm", "checker"},
    "audit": {"log", "cache", "request", "llm", "checker"},
    "mcp": {"log", "agent"},
    # The proxy's live cache-break line is the cache audit's own row (no second audit).
    "proxy": {"log", "cache", "request", "llm", "checker", "store", "audit"},
    # The OpenTelemetry export reads the cache audit's rows, so it sits above the audit.
    "export": {"log", "cache", "request", "llm", "checker", "audit"},
    # The live view reads stores and renders the report's views.
    "serve": {"log", "cache", "request", "llm", "checker", "store", "audit"},
    # Durable turns run the agent on a store's session, on DBOS's queue.
    "dbos": {"log", "cache", "request", "llm", "checker", "agent", "store"},
}


CORE = {"_errors", "_loopback", "_version"}
"""The root package's private core modules, which every layer may import."""


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The absolute ``tapelog`` modules one import statement loads (``from
    tapelog import agent`` loads ``tapelog.agent``; ``from tapelog import
    __version__`` the root package)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif node.module is None or node.level != 0:
        names = []
    elif node.module == "tapelog":
        names = [
            f"tapelog.{alias.name}"
            if (SRC / alias.name).is_dir() or (SRC / f"{alias.name}.py").is_file()
            else "tapelog"
            for alias in node.names
        ]
    else:
        names = [node.module]
    return [name for name in names if name.split(".")[0] == "tapelog"]


def _all_imports(path: Path) -> list[tuple[int, str]]:
    """Every ``tapelog`` module a file imports, at module level or lazily
    inside a function: a lazy import is a dependency all the same."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.lineno, name)
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in _imported(node)
    ]


def _package_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_layer_imports_only_the_layers_below_it(package: str) -> None:
    wrong: list[str] = []
    for path in sorted((SRC / package).rglob("*.py")):
        for line, module in _all_imports(path):
            target = module.split(".")[1] if "." in module else ""
            if target in ("", package) or target in CORE:
                continue  # the root package: the next test
            if target not in ALLOWED[package]:
                wrong.append(f"{path.relative_to(SRC)}:{line} imports {module}")
    assert wrong == []


SUBPACKAGES = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").is_file())


def test_every_subpackage_has_a_layer() -> None:
    """A new package gets a row in ALLOWED (the CLI is the top and may import any)."""
    assert set(SUBPACKAGES) == set(ALLOWED) | {"cli"}


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_no_subpackage_imports_the_root_package(package: str) -> None:
    """``tapelog`` itself is the top layer: it imports the agent, the audit, the
    store and the llm, so a subpackage taking a name from it closes an import
    cycle (the name exists only once the root's imports have finished)."""
    wrong = [
        f"{path.relative_to(SRC)}:{line} imports {module}"
        for path in sorted((SRC / package).rglob("*.py"))
        for line, module in _all_imports(path)
        if module == "tapelog"
    ]
    assert wrong == []


def test_the_core_modules_import_nothing_of_tapelog() -> None:
    """Every layer may import the CORE modules, so they stand below all of them."""
    wrong = [
        f"_{name}.py:{line} imports {module}"
        for name in sorted(n.lstrip("_") for n in CORE)
        for line, module in _all_imports(SRC / f"_{name}.py")
    ]
    assert wrong == []


def test_the_version_is_kept_in_one_place() -> None:
    """``tapelog._version`` holds it; the build reads it from there (no second copy)."""
    import tapelog
    from tapelog import _version

    project = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["hatch"]["version"]["path"] == "src/tapelog/_version.py"
    assert tapelog.__version__ is _version.__version__


INTERNAL_API = "_api"
"""The one private module of a package that the other packages may import:
what crosses package boundaries but is not for users (docs/architecture.md)."""


def test_no_module_imports_another_packages_private_modules() -> None:
    """Across packages only the public ``__init__`` and the designated
    ``_api`` module are open; every other ``_name`` module stays the package's own."""
    wrong: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        own = _package_of(path)
        for line, module in _all_imports(path):
            parts = module.split(".")
            private = len(parts) >= 3 and parts[2].startswith("_") and parts[1] != own
            if private and parts[2:] != [INTERNAL_API]:
                wrong.append(f"{path.relative_to(SRC)}:{line} imports {module}")
    assert wrong == []


def _api_modules() -> list[Path]:
    return sorted(SRC.glob(f"*/{INTERNAL_API}.py"))


def test_an_internal_api_only_reexports_its_own_package() -> None:
    """``tapelog.X._api`` imports only X's private modules: it is X's door for
    the layers above, not a second way to reach a third package."""
    wrong = [
        f"{path.relative_to(SRC)}:{line} imports {module}"
        for path in _api_modules()
        for line, module in _all_imports(path)
        if not module.startswith(f"tapelog.{path.parent.name}._")
    ]
    assert _api_modules()  # the walk finds what it checks
    assert wrong == []


def test_every_internal_name_is_used_by_another_package() -> None:
    """An ``_api`` name nobody outside its package imports is dead surface:
    it goes (tests reach internals through the module that defines them)."""
    imported: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.endswith(f".{INTERNAL_API}")
                and _package_of(path) != node.module.split(".")[1]
            ):
                imported.setdefault(node.module, set()).update(a.name for a in node.names)
    unused: list[str] = []
    for path in _api_modules():
        module = f"tapelog.{path.parent.name}.{INTERNAL_API}"
        exported = set(importlib.import_module(module).__all__)
        unused += [f"{module}.{name}" for name in sorted(exported - imported.get(module, set()))]
    assert unused == []


@pytest.mark.parametrize("module", ["tapelog", "tapelog.agent", "tapelog.llm", "tapelog.audit"])
def test_importing_the_library_starts_no_web_framework(module: str) -> None:
    code = (
        f"import sys, {module}; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn')); "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_comments_and_docs_cite_the_projects_own_pages() -> None:
    """The code stands on its own: it cites docs/..., not design pages outside the repo."""
    wrong: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "PROVIDERS.md" in line or "DESIGN" in line or "RFC" in line:
                wrong.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert wrong == []


def _base_name(base: ast.expr) -> str:
    """The name a base class is written with (``Error`` in ``errors.Error`` too)."""
    if isinstance(base, ast.Attribute):
        return base.attr
    return base.id if isinstance(base, ast.Name) else ""


def _exception_classes() -> dict[str, list[tuple[str, set[str]]]]:
    """Every exception class the package defines (at any depth, in functions
    too): its name, where it is defined and the names of its bases; a class is
    one when a base is a builtin exception, a click exception or another one."""
    defined: list[tuple[str, str, set[str]]] = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {_base_name(b) for b in node.bases}
                defined.append((node.name, f"{path.relative_to(SRC)}:{node.lineno}", bases))
    known = {
        name
        for name, value in vars(builtins).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    } | {"ClickException"}
    while True:
        more = {name for name, _, bases in defined if bases & known} - known
        if not more:
            break
        known |= more
    found: dict[str, list[tuple[str, set[str]]]] = {}
    for name, where, bases in defined:
        if bases & known:
            found.setdefault(name, []).append((where, bases))
    return found


def _descends_from(name: str, root: str, classes: dict[str, list[tuple[str, set[str]]]]) -> bool:
    """Whether a class of that name has ``root`` among its ancestors (by name)."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current == root:
            return True
        if current not in seen:
            seen.add(current)
            todo.extend(base for _, bases in classes.get(current, []) for base in bases)
    return False


def test_every_tapelog_error_is_defined_in_the_one_exception_module() -> None:
    """The tree in ``tapelog._errors`` is the whole tree: a user reads every error
    a catch can see in one place, and the public packages re-export it."""
    classes = _exception_classes()
    assert "TapelogError" in classes  # the walk finds the tree it checks
    wrong = [
        f"{where} defines {name}"
        for name in sorted(classes)
        if _descends_from(name, "TapelogError", classes)
        for where, _ in classes[name]
        if not where.startswith("_errors.py:")
    ]
    assert wrong == []


def test_no_two_exception_classes_share_a_name() -> None:
    """Two classes of one name (two ``Aborted``) let an ``except`` catch the wrong
    one and miss the other."""
    twice = {
        name: [where for where, _ in places]
        for name, places in _exception_classes().items()
        if len(places) > 1
    }
    assert twice == {}
