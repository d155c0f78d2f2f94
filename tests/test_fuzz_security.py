"""A short run of tools/fuzz_security.py: malformed SASL exchanges and TLS bytes against a
broker's secured listeners crash nothing, leave no traceback, and a valid login still
works after them (the long run is in docs/reliability.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).parent.parent / "tools" / "fuzz_security.py"


def test_fuzzed_sasl_and_tls_traffic_crashes_nothing(tmp_path: Path) -> None:
    finished = subprocess.run(
        [sys.executable, str(TOOL), "--frames", "3000", "--workers", "8", "--seed", "11"]
        + ["--keep-log", str(tmp_path / "broker.log")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr
    counts = {
        name: int(value.replace(",", ""))
        for name, value in re.findall(r"^(\w[\w ]*?)\s{2,}([\d,]+)", finished.stdout, re.M)
    }
    assert counts["frames"] >= 3000
    assert counts["crashes"] == 0
    assert counts["tracebacks in the log"] == 0, (tmp_path / "broker.log").read_text()
    assert counts["failed health checks"] == 0
    assert counts["exit code on SIGTERM"] == 0
