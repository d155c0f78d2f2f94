"""Running the `herdless` command as a user would, and reading its tables."""

from __future__ import annotations

import os
import subprocess
import sys


def herdless(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The `herdless` command, wide enough that tables do not wrap."""
    return subprocess.run(
        [sys.executable, "-m", "herdless", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200"},
    )


def table_rows(output: str) -> list[list[str]]:
    """The body rows of the rich tables in a command's output, cells stripped."""
    return [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in output.splitlines()
        if line.startswith("│")
    ]
