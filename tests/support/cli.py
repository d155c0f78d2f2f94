"""Running the `herdless` command as a user would, and reading what it prints.

Its output is captured, so it is not a terminal: tables come out as `plain`
(tab-separated lines under a header line, tables apart by an empty line), the
form scripts read.
"""

from __future__ import annotations

import os
import subprocess
import sys

COMMAND = [sys.executable, "-m", "herdless"]


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
