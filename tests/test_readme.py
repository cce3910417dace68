"""The README's quick-start example runs as written, and its set-up commands stay two."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_quick_start_example_runs(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1, "the README has exactly one Python example"
    script = tmp_path / "example.py"
    script.write_text(blocks[0], encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 5, result.stdout
    # the tool was called, and what it returned is in the log the example printed from
    call, returned, answer, usage, count = lines
    # the usage line says the whole prompt, not "input" alone (issue 21)
    found = re.fullmatch(
        r"prompt (\d+) tokens, (\d+) read from the cache; output (\d+) tokens", usage
    )
    assert found is not None, usage
    assert int(found.group(1)) >= int(found.group(2)) > 0  # the second request hit the cache
    assert call.startswith("tool call: add ")
    arguments = json.loads(call.removeprefix("tool call: add "))
    assert returned == f"tool result: {arguments['a'] + arguments['b']}"
    # the printed answer agrees with the tool's result: every number it states is
    # an operand or the result
    text = answer.removeprefix("answer: ")
    stated = [int(n) for n in re.findall(r"\d+", text)]
    result_value = int(returned.removeprefix("tool result: "))
    assert result_value in stated, answer
    assert set(stated) <= {arguments["a"], arguments["b"], result_value}, answer
    assert re.fullmatch(r"\d+ events logged", count)


def test_the_fresh_machine_section_has_exactly_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Fresh machine", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert len(commands) == 2
    assert commands[0].strip().endswith("tapelog demo")
    assert "pytest" in commands[1]


def test_the_readme_links_every_doc_page() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Documentation", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`(docs/[\w-]+\.md)`", section))
    pages = {f"docs/{p.name}" for p in (README.parent / "docs").glob("*.md")}
    assert pages == listed
