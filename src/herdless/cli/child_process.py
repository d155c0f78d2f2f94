"""A server process that herdless starts (a broker, ZooKeeper): its output goes to a log
file, and it is stopped, killed, paused and resumed by signal."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

# How much of the end of a log an error message shows.
LOG_TAIL_CHARS = 5000


def sigstop(pid: int, timeout_s: float = 5.0) -> None:
    """SIGSTOP, and return once every thread of the process has stopped: a thread busy
    on another core may otherwise still answer a request sent right after the signal."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout_s
    tasks = Path(f"/proc/{pid}/task")
    while time.monotonic() < deadline:
        try:
            states = [
                (task / "stat").read_text().rsplit(")", 1)[1].split()[0] for task in tasks.iterdir()
            ]
        except OSError:
            return  # gone, or no /proc: nothing more to wait for
        if all(state in ("T", "t") for state in states):
            return
        time.sleep(0.005)


class ChildProcess:
    """One child process writing to `log_path`."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def spawn(self, command: list[str], *, new_session: bool = False) -> None:
        """Start `command` without waiting for it to be ready."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=new_session
            )

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (after SIGCONT: a stopped process takes it only once it runs) and wait."""
        assert self.process is not None
        self.resume()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: nothing gets to flush or close."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def pause(self) -> None:
        """SIGSTOP: the process holds its connections and answers nothing."""
        assert self.process is not None
        sigstop(self.process.pid)

    def resume(self) -> None:
        if self.alive():
            assert self.process is not None
            os.kill(self.process.pid, signal.SIGCONT)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        """The process's whole log: what a check searches."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self) -> str:
        """The end of the log: what an error message shows."""
        return self.log()[-LOG_TAIL_CHARS:]
