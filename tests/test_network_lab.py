"""The network lab itself: cuts are silent, stop established connections, spare
everything else, heal, and leave nothing behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import network
from tests.support.network import CLIENTS, NetworkLab, NetworkLabUnavailable

PROBE = str(Path(__file__).parent / "support" / "tcp_probe.py")
PORT = 7000
# Long enough for a packet between namespaces of one machine, many times over.
SILENCE_S = 1.0
# After a heal, TCP resends what the cut swallowed on its next retransmission timer.
RECOVERY_S = 20.0


class Talker:
    """A connection from a node (or from the root namespace) to a node's echo server."""

    def __init__(self, lab: NetworkLab, source: str, target: str) -> None:
        prefix = () if source == CLIENTS else lab.prefix(source)
        self.process = subprocess.Popen(
            [*prefix, sys.executable, PROBE, "talk", lab.address(target), str(PORT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.answer() == "connected"

    def ping(self, seconds: float = SILENCE_S) -> str:
        return self.ask(f"ping {seconds}")

    def connect(self, seconds: float = SILENCE_S) -> str:
        return self.ask(f"connect {seconds}")

    def ask(self, line: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self.answer()

    def answer(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def lab() -> Iterator[NetworkLab]:
    try:
        made = NetworkLab(["a", "b", "c"])
    except NetworkLabUnavailable as exc:
        pytest.fail(str(exc))
    servers = []
    try:
        for node in made.nodes:
            server = subprocess.Popen(
                [*made.prefix(node), sys.executable, PROBE, "serve", made.address(node), str(PORT)],
                stdout=subprocess.PIPE,
                text=True,
            )
            servers.append(server)
            assert server.stdout is not None and server.stdout.readline().strip() == "listening"
        yield made
    finally:
        for server in servers:
            server.kill()
            server.wait()
        made.close()


@pytest.fixture
def talkers(lab: NetworkLab) -> Iterator[list[Talker]]:
    """Talkers a test opens, closed after it, with the lab healed."""
    opened: list[Talker] = []
    yield opened
    lab.heal()
    for talker in opened:
        talker.close()


def test_a_cut_silences_an_established_connection_and_a_heal_restores_it(
    lab: NetworkLab, talkers: list[Talker]
) -> None:
    a_to_b = Talker(lab, "a", "b")
    c_to_b = Talker(lab, "c", "b")
    a_to_c = Talker(lab, "a", "c")
    talkers += [a_to_b, c_to_b, a_to_c]
    assert a_to_b.ping() == "ok"

    lab.cut("a", "b")
    assert lab.cuts() == {frozenset(("a", "b"))}
    # Silence, both for the connection open before the cut and for a new one: no reset,
    # no refusal, no ICMP error.
    assert a_to_b.ping() == "timeout"
    assert a_to_b.connect() == "timeout"
    b_to_c = Talker(lab, "b", "c")
    talkers.append(b_to_c)
    assert b_to_c.ping() == "ok"
    # Every other pair, and the clients, go on as before.
    assert c_to_b.ping() == "ok"
    assert a_to_c.ping() == "ok"
    assert c_to_b.connect() == "ok"
    from_clients = Talker(lab, CLIENTS, "b")
    talkers.append(from_clients)
    assert from_clients.ping() == "ok"

    lab.heal()
    assert lab.cuts() == set()
    # The same connection carries on: the byte the cut swallowed arrives with the next.
    assert a_to_b.ping(RECOVERY_S) == "ok"
    assert a_to_b.connect() == "ok"
    assert any("cut a | b" in event for event in lab.events), lab.events


def test_a_node_cut_from_the_clients_still_reaches_the_other_nodes(
    lab: NetworkLab, talkers: list[Talker]
) -> None:
    from_clients = Talker(lab, CLIENTS, "b")
    talkers.append(from_clients)
    lab.cut_from_clients("b")
    assert from_clients.ping() == "timeout"
    assert from_clients.connect() == "timeout"
    a_to_b = Talker(lab, "a", "b")
    b_to_c = Talker(lab, "b", "c")
    talkers += [a_to_b, b_to_c]
    assert a_to_b.ping() == "ok"
    assert b_to_c.ping() == "ok"
    lab.heal("b")
    assert from_clients.ping(RECOVERY_S) == "ok"


def test_an_isolated_node_still_talks_to_itself(lab: NetworkLab, talkers: list[Talker]) -> None:
    to_c = [Talker(lab, source, "c") for source in ("a", CLIENTS)]
    talkers += to_c
    lab.isolate("c")
    assert [talker.ping() for talker in to_c] == ["timeout", "timeout"]
    itself = Talker(lab, "c", "c")  # over loopback, to its own address
    talkers.append(itself)
    assert itself.ping() == "ok"
    assert lab.isolated() == {"c"}
    # A heal of another node leaves the isolation alone.
    lab.heal("a")
    assert to_c[0].ping() == "timeout"
    lab.heal("c")
    assert [talker.ping(RECOVERY_S) for talker in to_c] == ["ok", "ok"]


def test_a_process_started_with_the_prefix_is_the_process_itself(lab: NetworkLab) -> None:
    process = subprocess.Popen([*lab.prefix("a"), "sleep", "60"])
    try:
        # `ip netns exec` execs the command: the pid a test signals is the sleep's.
        deadline = time.monotonic() + 10
        while (program := Path(f"/proc/{process.pid}/cmdline").read_bytes()) != b"sleep\x0060\0":
            assert time.monotonic() < deadline, program
            time.sleep(0.01)
        assert os.readlink(f"/proc/{process.pid}/ns/net") != os.readlink("/proc/self/ns/net")
    finally:
        process.kill()
        process.wait()


def test_close_leaves_no_namespace_link_or_rule_behind() -> None:
    root_rules = iptables_rules()
    with pytest.raises(RuntimeError, match="on purpose"), NetworkLab(["x", "y"]) as lab:
        lab.cut("x", "y")
        lab.isolate("y")
        made = [node.namespace for node in lab.nodes.values()]
        assert set(made) <= set(namespaces())
        raise RuntimeError("on purpose")
    assert not [n for n in namespaces() if n.startswith(lab.name)]
    assert not [link for link in links() if lab.name.removeprefix("hlab-") in link]
    assert lab.subnet.compressed not in routes()
    # Its rules lived in its namespaces: the root namespace's were never touched.
    assert iptables_rules() == root_rules


def test_a_new_lab_removes_what_a_crashed_run_left_behind() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"hlab-{network._base36(dead.pid)}-0"
    veth = f"hlv-{network._base36(dead.pid)}-0-0"
    subprocess.run(["ip", "netns", "add", f"{stale}-x"], check=True)
    subprocess.run(["ip", "link", "add", stale, "type", "bridge"], check=True)
    subprocess.run(
        ["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", f"{stale}-x"],
        check=True,
    )
    with NetworkLab() as lab:
        assert lab.name != stale
        assert f"{stale}-x" not in namespaces()
        assert not {stale, veth} & set(links())


def test_without_the_tools_a_lab_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(network.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(network.shutil, "which", lambda name: None)
    with pytest.raises(NetworkLabUnavailable) as raised:
        NetworkLab(["a"])
    message = str(raised.value)
    assert "root" in message and "iproute2" in message and "apt-get install -y iptables" in message


def namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return [line.split()[0] for line in out.stdout.splitlines() if line]


def links() -> list[str]:
    out = subprocess.run(["ip", "-j", "link"], capture_output=True, text=True, check=True)
    return [link["ifname"] for link in json.loads(out.stdout)]


def routes() -> str:
    return subprocess.run(["ip", "route"], capture_output=True, text=True, check=True).stdout


def iptables_rules() -> str:
    return subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=True).stdout
