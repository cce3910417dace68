"""The layout shows the data flow: layers import downwards only, privately within a package.

log -> cache, request -> llm -> checker -> agent / audit / emulator -> cli
(docs/architecture.md). A module-level import that points up a layer, or into
another package's private module, fails here; so does importing the agent or
the wires pulling in the emulator's web stack.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "tapelog"

# What each package may import at module level (besides itself and the leaf modules
# _errors and _loopback, which import nothing of tapelog).
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
    "proxy": {"log", "cache", "request", "llm", "checker", "store"},
    # The OpenTelemetry export reads the cache audit's rows, so it sits above the audit.
    "export": {"log", "cache", "request", "llm", "checker", "audit"},
    # The live view reads stores and renders the report's views.
    "serve": {"log", "cache", "request", "llm", "checker", "store", "audit"},
}


def _module_level_imports(path: Path) -> list[tuple[int, str]]:
    """Absolute ``tapelog.*`` modules imported by top-level statements."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str]] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return [(line, name) for line, name in found if name.split(".")[0] == "tapelog"]


def _all_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return [(line, name) for line, name in found if name.split(".")[0] == "tapelog"]


def _package_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_layer_imports_only_the_layers_below_it(package: str) -> None:
    wrong: list[str] = []
    for path in sorted((SRC / package).rglob("*.py")):
        for line, module in _module_level_imports(path):
            target = module.split(".")[1] if "." in module else ""
            if target in ("", package, "_errors", "_loopback"):
                continue
            if target not in ALLOWED[package]:
                wrong.append(f"{path.relative_to(SRC)}:{line} imports {module}")
    assert wrong == []


def test_no_module_imports_another_packages_private_modules() -> None:
    wrong: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        own = _package_of(path)
        for line, module in _all_imports(path):
            parts = module.split(".")
            if len(parts) >= 3 and parts[2].startswith("_") and parts[1] != own:
                wrong.append(f"{path.relative_to(SRC)}:{line} imports {module}")
    assert wrong == []


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
