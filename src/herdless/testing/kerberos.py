"""An MIT Kerberos KDC for tests: Debian's krb5kdc with a realm of its own in a directory,
on a free TCP port of 127.0.0.1, and the principals, keytabs and tickets tests need.

Nothing outside the directory is read or written: the KDC reads its kdc.conf through
KRB5_KDC_PROFILE, and Kerberos programs (kinit, a broker, a client) read the realm's
krb5.conf through KRB5_CONFIG, which `environment()` gives with a ticket cache:

    with MitKdc(tmp / "kdc") as kdc:
        kdc.add_principal("kafka/127.0.0.1")
        broker_keytab = kdc.keytab("kafka/127.0.0.1")
        kdc.add_principal("alice")
        env = kdc.environment(tmp / "alice.cc")
        kdc.kinit("alice", kdc.keytab("alice"), tmp / "alice.cc")
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from herdless.cli.child_process import ChildProcess
from herdless.testing.process import free_port

DEFAULT_REALM = "HERDLESS.TEST"
MASTER_PASSWORD = "herdless-test-master-key"
STARTUP_TIMEOUT_S = 10.0
# Tools of Debian's packages: the KDC, kadmin.local, and the client programs.
TOOLS = {
    "krb5kdc": "krb5-kdc",
    "kdb5_util": "krb5-kdc",
    "kadmin.local": "krb5-admin-server",
    "kinit": "krb5-user",
}


class KerberosMissing(Exception):
    """MIT Kerberos's KDC or tools are not installed; the message names the packages."""


class KerberosError(RuntimeError):
    """A Kerberos tool failed; the message has its output."""


def require_kerberos() -> None:
    missing = sorted({package for tool, package in TOOLS.items() if shutil.which(tool) is None})
    if missing:
        raise KerberosMissing(
            f"MIT Kerberos is not installed: apt-get install -y {' '.join(missing)}"
        )


class MitKdc(ChildProcess):
    """A KDC for `realm`, its database and configuration in `directory`.

    `clock_offset_s` runs the KDC's clock that far off (krb5kdc -T), and its krb5.conf
    has clients take the KDC's time as theirs (kdc_timesync), as a client whose clock is
    behind would: a KDC 2 hours behind issues tickets that a broker on the right time
    sees as expired, while the client believes them good.
    """

    def __init__(
        self,
        directory: Path,
        realm: str = DEFAULT_REALM,
        *,
        clock_offset_s: int = 0,
        database: Path | None = None,
    ) -> None:
        require_kerberos()
        self.directory = directory
        self.realm = realm
        self.clock_offset_s = clock_offset_s
        self.port = free_port()
        # Another KDC's database (that KDC's principals and keys), or a new one here.
        self.database = database or directory / "principal"
        self.kdc_conf = directory / "kdc.conf"
        self.krb5_conf = directory / "krb5.conf"
        super().__init__(directory / "krb5kdc.log")

    def start(self, timeout: float = STARTUP_TIMEOUT_S) -> MitKdc:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._write_configuration()
        if not self.database.exists():
            self._run(["kdb5_util", "-r", self.realm, "create", "-s", "-P", MASTER_PASSWORD])
        command = ["krb5kdc", "-n", "-r", self.realm]
        if self.clock_offset_s:
            command += ["-T", str(self.clock_offset_s)]
        self.spawn(["env", *self._env_args(), *command])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise KerberosError(
                    f"krb5kdc exited with {self.process.returncode}:\n{self.log_tail()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.02)
        self.kill()
        raise KerberosError(f"krb5kdc did not listen within {timeout:g}s:\n{self.log_tail()}")

    def with_clock_offset(self, offset_s: int) -> MitKdc:
        """A second KDC on this one's database whose clock is `offset_s` off (see the
        class's docstring); the caller starts and stops it."""
        return MitKdc(
            self.directory / f"offset{offset_s}",
            self.realm,
            clock_offset_s=offset_s,
            database=self.database,
        )

    def principal(self, name: str) -> str:
        """`name` with the realm: alice -> alice@HERDLESS.TEST."""
        return name if "@" in name else f"{name}@{self.realm}"

    def add_principal(self, name: str) -> str:
        """A principal with random keys (tests log in from keytabs); its full name."""
        self._kadmin(f"addprinc -randkey {self.principal(name)}")
        return self.principal(name)

    def keytab(self, name: str, path: Path | None = None) -> Path:
        """A keytab with the principal's current keys (the keys stay as they are)."""
        path = path or self.directory / f"{name.replace('/', '_')}.keytab"
        self._kadmin(f"ktadd -norandkey -k {path} {self.principal(name)}")
        return path

    def set_max_life(self, name: str, life: str) -> None:
        """How long the principal's tickets last at most, in kadmin's words ("20 seconds")."""
        self._kadmin(f'modprinc -maxlife "{life}" {self.principal(name)}')

    def change_keys(self, name: str) -> None:
        """New random keys for the principal: keytabs made before hold stale ones."""
        self._kadmin(f"cpw -randkey {self.principal(name)}")

    def environment(self, ticket_cache: Path | None = None) -> dict[str, str]:
        """The variables that point Kerberos programs at this realm (and a ticket cache)."""
        env = {
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(self.kdc_conf),
            # The replay cache of accepting programs (a broker), here rather than /var/tmp.
            "KRB5RCACHEDIR": str(self.directory),
        }
        if ticket_cache is not None:
            env["KRB5CCNAME"] = f"FILE:{ticket_cache}"
        return env

    def kinit(self, name: str, keytab: Path, ticket_cache: Path) -> None:
        """Log `name` in from its keytab into `ticket_cache`, as `kinit -kt` does."""
        self._run(["kinit", "-kt", str(keytab), self.principal(name)], ticket_cache)

    def __enter__(self) -> MitKdc:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.alive():
            self.stop()

    def _env_args(self) -> list[str]:
        return [f"{key}={value}" for key, value in self.environment().items()]

    def _run(self, command: list[str], ticket_cache: Path | None = None) -> str:
        result = subprocess.run(
            ["env", *[f"{k}={v}" for k, v in self.environment(ticket_cache).items()], *command],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if result.returncode != 0:
            raise KerberosError(
                f"{' '.join(command)} exited with {result.returncode}:\n"
                f"{result.stdout}{result.stderr}"
            )
        return result.stdout

    def _kadmin(self, query: str) -> None:
        # kadmin.local exits 0 whatever happens: its complaints are on stderr.
        result = subprocess.run(
            ["env", *self._env_args(), "kadmin.local", "-r", self.realm, "-q", query],
            capture_output=True,
            text=True,
            timeout=30,
        )
        complaints = [
            line
            for line in result.stderr.splitlines()
            if line.strip() and not line.startswith("No policy specified")
        ]
        if result.returncode != 0 or complaints:
            raise KerberosError(f"kadmin.local -q {query!r} failed:\n{result.stderr}")

    def _write_configuration(self) -> None:
        # TCP alone: free_port() found the TCP port free, not the UDP one.
        self.kdc_conf.write_text(
            "[kdcdefaults]\n"
            ' kdc_listen = ""\n'
            f" kdc_tcp_listen = 127.0.0.1:{self.port}\n"
            "[realms]\n"
            f" {self.realm} = {{\n"
            f"  database_name = {self.database}\n"
            f"  key_stash_file = {self.database.parent / 'stash'}\n"
            f"  acl_file = {self.directory / 'kadm5.acl'}\n"
            "  max_life = 1h\n"
            "  max_renewable_life = 0\n"
            " }\n"
            "[logging]\n"
            f" kdc = FILE:{self.directory / 'kdc.log'}\n"
        )
        timesync = "true" if self.clock_offset_s else "false"
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f" default_realm = {self.realm}\n"
            " dns_lookup_kdc = false\n"
            " dns_lookup_realm = false\n"
            " dns_canonicalize_hostname = false\n"
            " rdns = false\n"
            " udp_preference_limit = 1\n"
            f" kdc_timesync = {timesync}\n"
            "[realms]\n"
            f" {self.realm} = {{\n"
            f"  kdc = 127.0.0.1:{self.port}\n"
            " }\n"
        )
