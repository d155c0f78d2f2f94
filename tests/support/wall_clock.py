"""A broker process's wall clock, stepped by a test as NTP or `date -s` would step it.

wall_clock_shift.c, built here with the system's C compiler and loaded with
LD_PRELOAD, adds a shift read from a file to CLOCK_REALTIME, gettimeofday and
time in the process it is loaded into; its monotonic clock runs on untouched.
(libfaketime shifts the monotonic clock too, which breaks Python's time.sleep.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

SOURCE = Path(__file__).with_name("wall_clock_shift.c")
# Twice the shim's re-read interval (READ_INTERVAL_NS).
SEEN_WITHIN_S = 0.02


def build_shim(directory: Path) -> Path:
    """The shared library, compiled into `directory`; fails loudly without a compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError(
            "stepping a process's wall clock needs a C compiler (apt-get install gcc)"
        )
    library = directory / "libwallclockshift.so"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(SOURCE), "-ldl"],
        check=True,
        capture_output=True,
    )
    return library


class SteppedWallClock:
    """The wall clock of the processes started under `prefix`: shifted by every step."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.library = build_shim(directory)
        self.shift_file = directory / "wall-clock-shift-ms"
        self.shift_ms = 0
        self._write()

    @property
    def prefix(self) -> tuple[str, ...]:
        """A command prefix that runs a process on this clock."""
        return ("env", f"LD_PRELOAD={self.library}", f"WALL_CLOCK_SHIFT_FILE={self.shift_file}")

    def step(self, ms: int) -> None:
        """Step the wall clock by `ms` (back if negative); return once every process on it
        reads the new time (the shim reads the file again at most every 10 ms)."""
        self.shift_ms += ms
        self._write()
        time.sleep(SEEN_WITHIN_S)

    def _write(self) -> None:
        # Replaced whole, so that the shim never reads half a number.
        staged = self.shift_file.with_suffix(".new")
        staged.write_text(f"{self.shift_ms}\n")
        os.replace(staged, self.shift_file)
