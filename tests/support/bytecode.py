"""Compiled bytecode for the Python processes the suite starts, when Python writes none.

With PYTHONDONTWRITEBYTECODE set, every broker, `herdless` command, member and Spark
worker the suite starts compiles each herdless module it imports from source: about
0.3 s of CPU per process, paid hundreds of times over a run. The variable stops only
the writing: Python still reads bytecode it finds. So the suite compiles herdless's
sources (and its own) once, into the `__pycache__` directories beside them, where
Python would have written them without the variable (git ignores them), and its
child processes read them there. Installed packages have theirs from pip already.
Bytecode is checked against its source's modification time and size when read, so a
stale file is never used.
"""

from __future__ import annotations

import compileall
import sys
from collections.abc import Iterable
from pathlib import Path


def share_compiled_sources(directories: Iterable[Path]) -> None:
    """Compile the Python files under `directories` where the suite's child processes
    look for their bytecode; nothing to do when Python writes bytecode itself."""
    if not sys.dont_write_bytecode:
        return
    for directory in directories:
        compileall.compile_dir(directory, quiet=1)
