"""A local Apache ZooKeeper server from Debian's `zookeeper` package, for `herdless cluster up`.

It runs ZooKeeper's standalone server (ZooKeeperServerMain) with a config file
written into its data directory, on 127.0.0.1 unless told another address, and
waits until it takes sessions. A production cluster runs its own ZooKeeper ensemble instead.

Given SASL users, it takes SASL DIGEST-MD5 logins for them (a JAAS `Server` section
with ZooKeeper's DigestLoginModule) and no session without one, as a ZooKeeper that
Kafka's brokers log in to is set up.
"""

from __future__ import annotations

import shutil
import socket
import time
from collections.abc import Mapping
from pathlib import Path

from herdless.cli.child_process import ChildProcess
from herdless.security.jaas import quote
from herdless.storage.checkpoint import atomic_write

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_CONF_DIR = Path("/etc/zookeeper/conf")
# Optional: sends the server's log to stderr, and so to the log file.
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")
STARTUP_TIMEOUT_S = 30.0
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"


class ZooKeeperMissing(Exception):
    """Java or Debian's zookeeper package is not installed."""


def require_zookeeper() -> str:
    """The java command that runs ZooKeeper; ZooKeeperMissing says what to install."""
    java = shutil.which("java")
    if java is None or not ZOOKEEPER_JAR.exists():
        raise ZooKeeperMissing(
            "ZooKeeper is not installed: install Debian's zookeeper package"
            " (apt-get install -y zookeeper), or run your own and give its address"
            " to 'herdless serve --zookeeper'"
        )
    return java


class ZooKeeperServer(ChildProcess):
    """A standalone ZooKeeper server whose data and config live in `data_dir`.

    It listens on `host`; `prefix` is a command it runs under (e.g. `ip netns exec NAME`
    to put it in a network namespace of its own), which must exec it: signals go to
    the process started.
    """

    def __init__(
        self,
        data_dir: Path,
        port: int,
        *,
        tick_ms: int = 2000,
        min_session_timeout_ms: int | None = None,
        max_session_timeout_ms: int | None = None,
        sync_writes: bool = True,
        host: str = "127.0.0.1",
        prefix: tuple[str, ...] = (),
        sasl_users: Mapping[str, str] | None = None,
    ) -> None:
        self.java = require_zookeeper()
        self.data_dir = data_dir
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = port
        self.host = host
        self.prefix = prefix
        self.config_path = data_dir / "zoo.cfg"
        super().__init__(data_dir.parent / f"{data_dir.name}-zookeeper.log")
        lines = [
            f"tickTime={tick_ms}",
            f"dataDir={data_dir}",
            f"clientPort={port}",
            f"clientPortAddress={host}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr",
        ]
        if min_session_timeout_ms is not None:
            lines.append(f"minSessionTimeout={min_session_timeout_ms}")
        if max_session_timeout_ms is not None:
            lines.append(f"maxSessionTimeout={max_session_timeout_ms}")
        if not sync_writes:
            lines.append("forceSync=no")
        # The JAAS file the server reads its SASL users from; None: no SASL.
        self.jaas_path: Path | None = None
        if sasl_users:
            self.jaas_path = data_dir / "zookeeper-server-jaas.conf"
            # Only its owner may read it: it holds passwords.
            atomic_write(self.jaas_path, server_jaas(sasl_users).encode(), 0o600)
            lines += [
                "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
                # ZooKeeper 3.6+: a session that has not logged in is closed at its first
                # request (3.4's requireClientAuthScheme=sasl did less: it only logged).
                "sessionRequireClientSASLAuth=true",
            ]
        self.config_path.write_text("\n".join(lines) + "\n")

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> ZooKeeperServer:
        classpath = [str(ZOOKEEPER_CONF_DIR), str(ZOOKEEPER_JAR)]
        if SLF4J_SIMPLE_JAR.exists():
            classpath.append(str(SLF4J_SIMPLE_JAR))
        command = [
            *self.prefix,
            self.java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            *self._jvm_properties(),
            "-cp",
            ":".join(classpath),
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(self.config_path),
        ]
        self.spawn(command, new_session=True)
        assert self.process is not None
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

    def _jvm_properties(self) -> list[str]:
        if self.jaas_path is None:
            return []
        return [f"-Djava.security.auth.login.config={self.jaas_path}"]

    def four_letter_word(self, word: str) -> str | None:
        try:
            with socket.create_connection((self.host, self.port), timeout=1.0) as sock:
                sock.sendall(word.encode())
                return sock.recv(4096).decode(errors="replace")
        except OSError:
            return None


def server_jaas(users: Mapping[str, str]) -> str:
    """ZooKeeper's JAAS `Server` section taking DIGEST-MD5 logins of `users` (name ->
    password), as ZooKeeper's DigestLoginModule reads them: `user_<name>="<password>"`."""
    options = "".join(f"\n    user_{name}={quote(password)}" for name, password in users.items())
    return f"Server {{\n  {DIGEST_LOGIN_MODULE} required{options};\n}};\n"
