"""Running the `herdless` command as a user would, and reading what it prints.

Its output is captured, so it is not a terminal: tables come out as `plain`
(tab-separated lines under a header line, tables apart by an empty line), the
form scripts read.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

COMMAND = [sys.executable, "-m", "herdless"]


def sigint_as_in_a_terminal() -> None:
    """preexec_fn of a command a test stops with SIGINT, as Ctrl-C stops it: a shell that
    runs the tests in the background ignores SIGINT, and children inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def herdless(
    *args: str, input: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """The `herdless` command, its standard input `input` (empty if None)."""
    env = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    return subprocess.run(
        [*COMMAND, *args],
        input=input or "",
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def tables(output: str) -> list[list[list[str]]]:
    """The tables of a command's plain output, each a header row and its body rows."""
    blocks = [block for block in output.strip("\n").split("\n\n") if block]
    return [[line.split("\t") for line in block.splitlines()] for block in blocks]


def table_rows(output: str) -> list[list[str]]:
    """The body rows of every table in a command's plain output (headers left out)."""
    return [row for table in tables(output) for row in table[1:]]


def succeeded(result: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a command that must have worked."""
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


def refused(result: subprocess.CompletedProcess[str], words: str, code: int = 1) -> str:
    """The one error line of a command that must have failed, saying `words`."""
    assert result.returncode == code, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert words in errors[0], errors[0]
    assert "Traceback" not in result.stdout + result.stderr
    assert "error:" not in result.stdout, result.stdout
    return errors[0]


DOCS_CLI = Path(__file__).parents[2] / "docs" / "cli.md"


def documented_json_keys() -> dict[tuple[str, str], list[str]]:
    """docs/cli.md's JSON keys table: (command, jq path) -> the keys, in order."""
    rows = re.findall(
        r"^\| `([^`]+)` \| `([^`]+)` \| (`.*`) \|$", DOCS_CLI.read_text(), flags=re.MULTILINE
    )
    return {(command, path): re.findall(r"`([^`]+)`", keys) for command, path, keys in rows}


def objects_at(document: Any, path: str) -> list[Any]:
    """What a jq path of the simple forms docs/cli.md uses (`.`, `.[]`, `.a[].b[]`) selects."""
    found = [document]
    for step in path.strip(".").split("."):
        if not step:
            continue
        name, each = step.removesuffix("[]"), step.endswith("[]")
        if name:
            found = [item[name] for item in found]
        if each:
            found = [element for item in found for element in item]
    return found


def assert_documented(command: str, document: Any) -> None:
    """Every path docs/cli.md lists for the command selects objects with exactly its keys."""
    paths = {path: keys for (name, path), keys in documented_json_keys().items() if name == command}
    assert paths, f"docs/cli.md documents no JSON for {command!r}"
    for path, keys in paths.items():
        objects = objects_at(document, path)
        assert objects, f"{command} {path}: nothing there to check in {document}"
        for obj in objects:
            assert list(obj) == keys, f"{command} {path}: {list(obj)} != documented {keys}"
