"""A real Apache ZooKeeper server (Debian's zookeeper package) on 127.0.0.1, for tests."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.support.broker import free_port

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_CONF_DIR = Path("/etc/zookeeper/conf")
# Optional: sends the server's log to stderr, and so to the log file.
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")
STARTUP_TIMEOUT_S = 30.0
# Sessions expire at a tick boundary: a short tick keeps expiry close to the timeout.
TICK_MS = 100
MIN_SESSION_TIMEOUT_MS = 2000
MAX_SESSION_TIMEOUT_MS = 30000


def require_zookeeper() -> str:
    """The java command that runs ZooKeeper, or a loud failure saying what to install."""
    java = shutil.which("java")
    if java is None or not ZOOKEEPER_JAR.exists():
        raise RuntimeError(
            "ZooKeeper is not installed: install Debian's zookeeper package "
            "(apt-get install -y zookeeper)"
        )
    return java


class ZooKeeperProcess:
    """A standalone ZooKeeper server whose data lives in data_dir."""

    def __init__(self, data_dir: Path) -> None:
        self.java = require_zookeeper()
        self.data_dir = data_dir
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.config_path = data_dir / "zoo.cfg"
        self.log_path = data_dir.parent / f"{data_dir.name}-zookeeper.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.config_path.write_text(
            f"tickTime={TICK_MS}\n"
            f"dataDir={data_dir}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            f"minSessionTimeout={MIN_SESSION_TIMEOUT_MS}\n"
            f"maxSessionTimeout={MAX_SESSION_TIMEOUT_MS}\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr\n"
            # Tests write little; no need to fsync every transaction to the log.
            "forceSync=no\n"
        )

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> ZooKeeperProcess:
        classpath = [str(ZOOKEEPER_CONF_DIR), str(ZOOKEEPER_JAR)]
        if SLF4J_SIMPLE_JAR.exists():
            classpath.append(str(SLF4J_SIMPLE_JAR))
        command = [
            self.java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            ":".join(classpath),
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(self.config_path),
        ]
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with {self.process.returncode}:\n{self.log()}"
                )
            # "ruok" answers before the server takes sessions; "srvr" says when it does.
            if (self.four_letter_word("srvr") or "").startswith("Zookeeper version"):
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"ZooKeeper did not answer within {STARTUP_TIMEOUT_S}s:\n{self.log()}")

    def four_letter_word(self, word: str) -> str | None:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as sock:
                sock.sendall(word.encode())
                return sock.recv(4096).decode(errors="replace")
        except OSError:
            return None

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait."""
        assert self.process is not None
        self.resume()
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: sessions are not closed; clients see the server vanish."""
        if self.alive():
            assert self.process is not None
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def pause(self) -> None:
        """SIGSTOP: the server holds its connections but answers nothing."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)

    def restart(self) -> ZooKeeperProcess:
        """Stop and start again on the same port with the same data; sessions survive if
        their clients reconnect within the session timeout."""
        self.stop()
        return self.start()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return ""
