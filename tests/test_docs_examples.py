"""Every Python example in the user guides runs as written, offline, and checks itself.

docs/api.md and docs/tools.md promise runnable examples: each ```python block is run
as its own script in an empty directory, with no API keys in the environment. A block
must state what it shows with at least one ``assert``, so an example that silently
does the wrong thing fails here instead of misleading a reader.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
GUIDES = ("api.md", "tools.md")


def _blocks(name: str) -> list[str]:
    text = (DOCS / name).read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


EXAMPLES = [
    pytest.param(name, i, block, id=f"{name}#{i + 1}")
    for name in GUIDES
    for i, block in enumerate(_blocks(name))
]


def test_each_guide_has_examples() -> None:
    for name in GUIDES:
        assert _blocks(name), f"docs/{name} has no runnable Python example"


@pytest.mark.parametrize(("name", "index", "block"), EXAMPLES)
def test_example_runs(name: str, index: int, block: str, tmp_path: Path) -> None:
    assert re.search(r"^\s*assert\b", block, flags=re.M), (
        f"docs/{name} example {index + 1} checks nothing: add an assert that states its point"
    )
    script = tmp_path / "example.py"
    script.write_text(block, encoding="utf-8")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("TAPELOG_")
    }
    env["TAPELOG_STORE"] = str(tmp_path / "store")
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, f"docs/{name} example {index + 1} failed:\n{result.stderr}"
