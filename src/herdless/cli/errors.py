"""How every `herdless` command tells its user that something is wrong.

One line on stderr, `error: ...` or `warning: ...`, never wrapped and never a
traceback, so that a script reading stdout is not disturbed and a person reads
the whole reason at once. A failing command exits non-zero.
"""

from __future__ import annotations

import sys

import typer

# Kafka's tools exit 1 on a failed command; 2 is what option parsing uses for a
# command line that cannot be run at all (a bad option, a bad setting).
FAILED = 1
USAGE = 2


def fail(message: str, code: int = FAILED) -> typer.Exit:
    """Print `error: message`; the caller raises what this returns (`raise fail(...)`)."""
    error(message)
    return typer.Exit(code)


def error(message: str) -> None:
    """Print `error: message` for one failure of several; the command fails at its end."""
    _line("error", message)


def warn(message: str) -> None:
    _line("warning", message)


def _line(prefix: str, message: str) -> None:
    text = " ".join(part.strip() for part in message.splitlines() if part.strip())
    sys.stdout.flush()  # what was printed before the error comes out before it
    sys.stderr.write(f"{prefix}: {text}\n")
    sys.stderr.flush()
