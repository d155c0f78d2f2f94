"""The cluster `herdless cluster up` runs on this machine: ZooKeeper and N brokers.

It is for trying a cluster, failover first of all, so a broker that dies does not
take the others with it (as in Kafka's quickstart, each broker is a process of its
own): `up` says which broker stopped, how, where its log is and how to start it
again, and restarts it when Enter is pressed. Only Ctrl-C, or ZooKeeper stopping,
ends the whole cluster.
"""

from __future__ import annotations

import select
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from herdless.cli.child_process import ChildProcess
from herdless.cli.errors import fail
from herdless.cli.output import counted, note
from herdless.cli.ports import in_use
from herdless.cli.zookeeper import ZooKeeperServer

HOST = "127.0.0.1"
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
WATCH_S = 0.5


class LocalBroker(ChildProcess):
    """One broker of the local cluster, its data in `data_dir/broker-N`."""

    def __init__(
        self, broker_id: int, port: int, data_dir: Path, zookeeper: str, settings: list[str]
    ) -> None:
        super().__init__(data_dir / f"broker-{broker_id}.log")
        self.broker_id = broker_id
        self.port = port
        self.command = [
            sys.executable, "-m", "herdless", "serve",
            "--port", str(port),
            "--data-dir", str(data_dir / f"broker-{broker_id}"),
            "--zookeeper", zookeeper,
            "--broker-id", str(broker_id),
            *settings,
        ]  # fmt: skip

    def start(self) -> None:
        # A session of its own: Ctrl-C at the terminal reaches `up` alone, which stops
        # the brokers in order.
        self.spawn(self.command, new_session=True)

    def wait_listening(self, deadline: float) -> None:
        assert self.process is not None
        while True:
            if self.process.poll() is not None:
                raise fail(f"broker {self.broker_id} exited: {self.last_words()}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise fail(
                        f"broker {self.broker_id} did not listen within"
                        f" {STARTUP_TIMEOUT_S:g} s; see {self.log_path}"
                    ) from None
                time.sleep(0.1)

    def how_it_ended(self) -> str:
        assert self.process is not None
        code = self.process.returncode
        if code is not None and code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exit code {code}"

    def last_words(self) -> str:
        lines = self.log_tail().strip().splitlines()
        return lines[-1] if lines else f"see {self.log_path}"


def check_addresses_free(zookeeper_port: int, broker_ports: list[int]) -> None:
    """Every address the cluster needs, before anything starts or is written: a second
    `cluster up` beside a running one fails here, naming what holds the address."""
    wanted = [("--zookeeper-port", zookeeper_port)]
    wanted += [(f"--port (broker {i + 1})", port) for i, port in enumerate(broker_ports)]
    for option, port in wanted:
        taken = in_use(HOST, port)
        if taken is not None:
            raise fail(f"cannot start the cluster: {taken}; give another {option}")


def run(zookeeper: ZooKeeperServer, brokers: list[LocalBroker], data_dir: Path) -> None:
    """Start ZooKeeper and the brokers, then watch them until Ctrl-C; stop them all."""
    try:
        try:
            zookeeper.start()
        except RuntimeError as exc:
            raise fail(f"ZooKeeper did not start on port {zookeeper.port}: {exc}") from None
        note(f"ZooKeeper on {zookeeper.connect}, its data in {zookeeper.data_dir}")
        for broker in brokers:
            broker.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        for broker in brokers:
            broker.wait_listening(deadline)
        bootstrap = ",".join(f"{HOST}:{b.port}" for b in brokers)
        count = len(brokers)
        note(f"{counted(count, 'broker')} up: bootstrap servers {bootstrap}; logs in {data_dir}/")
        note(f"try: herdless cluster describe -b {HOST}:{brokers[0].port} ; Ctrl-C stops them all")
        _watch(zookeeper, brokers)
    except KeyboardInterrupt:
        note("stopping the brokers, then ZooKeeper")
    finally:
        _stop(zookeeper, brokers)


def _stop(zookeeper: ZooKeeperServer, brokers: list[LocalBroker]) -> None:
    """SIGTERM to every broker at once (each moves its work on), then ZooKeeper."""
    started = [b.process for b in brokers if b.process is not None]
    for process in started:
        if process.poll() is None:
            process.terminate()
    for process in started:
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # never leave one running
            process.kill()
            process.wait()
    if zookeeper.alive():
        zookeeper.stop()


def _watch(zookeeper: ZooKeeperServer, brokers: list[LocalBroker]) -> None:
    reported: set[int] = set()
    stdin_open = True
    while True:
        if not zookeeper.alive():
            raise fail(f"ZooKeeper stopped; see its log {zookeeper.log_path}")
        for broker in brokers:
            if not broker.alive() and broker.broker_id not in reported:
                reported.add(broker.broker_id)
                _report_stopped(broker, stdin_open)
        stdin_open, enter = _enter_pressed(stdin_open)
        if enter and reported:
            for broker in brokers:
                if broker.broker_id in reported:
                    note(f"restarting broker {broker.broker_id} on {HOST}:{broker.port}")
                    broker.start()
            reported.clear()


def _report_stopped(broker: LocalBroker, enter_restarts: bool) -> None:
    note(
        f"broker {broker.broker_id} ({HOST}:{broker.port}) stopped, {broker.how_it_ended()};"
        f" its log: {broker.log_path} (last line: {broker.last_words()})"
    )
    how = "Press Enter to restart it, or run" if enter_restarts else "To restart it, run"
    note(f"the other brokers and ZooKeeper keep running. {how}: {shlex.join(broker.command)}")


def _enter_pressed(stdin_open: bool) -> tuple[bool, bool]:
    """(is stdin still open, was a line entered), waiting at most WATCH_S."""
    if not stdin_open:
        time.sleep(WATCH_S)
        return False, False
    try:
        ready, _, _ = select.select([sys.stdin], [], [], WATCH_S)
    except (OSError, ValueError):  # no stdin to watch
        time.sleep(WATCH_S)
        return False, False
    if not ready:
        return True, False
    line = sys.stdin.readline()
    if line == "":  # end of input (</dev/null, a closed pipe): only Ctrl-C remains
        return False, False
    return True, True
