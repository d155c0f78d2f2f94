"""Real network partitions for tests and soaks, on one machine.

A NetworkLab puts named nodes each in a network namespace of its own, with an
address of its own on a private /24, joined by a Linux bridge in the root
namespace. The test process and its clients stay in the root namespace and
reach every node's address through the bridge.

A cut is a pair of iptables DROP rules (INPUT from the peer, OUTPUT to it) inside
the nodes' namespaces: packets vanish with no reset and no ICMP, as in a real
partition, and established connections go silent too (the filter sees every
packet, not only new flows). Healing removes the rules and the same connections
carry on. The bridge and the root namespace get no rules at all.

Names start with the owner's pid, so that a lab can clean what an earlier,
crashed run left behind without touching a lab another live process runs.
Needs root, `ip` (iproute2) and `iptables`.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import itertools
import json
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

logger = logging.getLogger(__name__)

# The root namespace as a party to a cut: the test process and its clients.
CLIENTS = "clients"
# Namespaces and bridges are named hlab-<pid>-<lab>[-<node>], veths hlv-<pid>-<lab>-<n>
# (pid, lab and n in base 36, so that a veth's name fits Linux's 15 characters).
LAB_PREFIX = "hlab-"
VETH_PREFIX = "hlv-"
IFNAME_MAX = 15
# The /24s a lab may take, the first that no route or address of the machine overlaps.
SUBNET_POOL = ipaddress.ip_network("10.251.0.0/16")
# Inside each namespace, where the lab's cuts live.
NODE_INTERFACE = "eth0"
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
COMMAND_TIMEOUT_S = 30.0
LOCK_PATH = Path(tempfile.gettempdir()) / "herdless-netlab.lock"

# Connects to port 9 of argv[1]; exits 0 only on a refusal, the sign of a path both ways.
_REFUSAL_PROBE = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], 9), timeout=1.0).close()
except ConnectionRefusedError:
    sys.exit(0)
sys.exit("port 9 answered")
"""
_labs_made = itertools.count()
# Closed at interpreter exit if their owner did not close them.
_open_labs: set[NetworkLab] = set()


class NetworkLabUnavailable(RuntimeError):
    """The machine cannot host a lab; the message says what is missing."""


class NetworkLabError(RuntimeError):
    """A command that builds or changes the lab failed; the message has its output."""


def require_lab_tools() -> None:
    """NetworkLabUnavailable naming what is missing: root, `ip` or `iptables`."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (network namespaces and iptables need CAP_NET_ADMIN)")
    if shutil.which("ip") is None:
        missing.append("the ip command (apt-get install -y iproute2)")
    if shutil.which("iptables-restore") is None:
        missing.append("iptables (apt-get install -y iptables)")
    if missing:
        raise NetworkLabUnavailable("a network lab needs " + ", ".join(missing))


@dataclass(frozen=True)
class Node:
    name: str
    namespace: str
    address: str
    # The root namespace's end of the node's veth pair, a port of the bridge.
    veth: str


class NetworkLab:
    """Nodes in network namespaces of their own, and silent cuts between them.

    Use it as a context manager, or call close(): that removes every namespace, link
    and rule the lab made, and is also run at interpreter exit for a lab left open.
    Kill the processes running in the nodes first: a namespace outlives its name while
    a process is in it.
    """

    def __init__(self, nodes: Iterable[str] = ()) -> None:
        require_lab_tools()
        self.name = f"{LAB_PREFIX}{_base36(os.getpid())}-{_base36(next(_labs_made))}"
        self.bridge = self.name
        self.nodes: dict[str, Node] = {}
        # Every change, timestamped, for a test's or a soak's report.
        self.events: list[str] = []
        self._cuts: set[frozenset[str]] = set()
        self._isolated: set[str] = set()
        self._closed = False
        try:
            with _machine_lock():
                remove_stale_labs()
                self.subnet = _free_subnet()
                self.bridge_address = str(self.subnet.network_address + 1)
                self._make_bridge()
            _open_labs.add(self)
            for node in nodes:
                self.add(node)
        except BaseException:
            self.close()
            raise

    def add(self, node: str) -> str:
        """A new node in a namespace of its own; returns its address."""
        self._check_open()
        if node in self.nodes or node == CLIENTS or not NODE_NAME.fullmatch(node):
            raise ValueError(f"not a new node name: {node!r}")
        index = len(self.nodes)
        hosts = self.subnet.num_addresses - 3  # network, broadcast and the bridge
        if index >= hosts:
            raise ValueError(f"a lab holds {hosts} nodes")
        entry = Node(
            name=node,
            namespace=f"{self.name}-{node}",
            address=str(self.subnet.network_address + 2 + index),
            veth=f"{VETH_PREFIX}{self.name.removeprefix(LAB_PREFIX)}-{_base36(index)}",
        )
        assert len(entry.veth) <= IFNAME_MAX, entry.veth
        self.nodes[node] = entry
        try:
            self._make_node(entry)
        except BaseException:
            del self.nodes[node]
            _run("ip", "link", "del", entry.veth, check=False)
            _run("ip", "netns", "del", entry.namespace, check=False)
            raise
        self._event(f"node {node} at {entry.address} (namespace {entry.namespace})")
        return entry.address

    def address(self, node: str) -> str:
        return self._node(node).address

    def prefix(self, node: str) -> tuple[str, ...]:
        """The command that runs a process inside the node's namespace. `ip netns exec`
        execs it, so the process started is the process itself, and signals reach it."""
        return ("ip", "netns", "exec", self._node(node).namespace)

    def cut(self, a: str, b: str) -> None:
        """Drop every packet between `a` and `b`, both ways, established flows included.
        Either may be CLIENTS, the root namespace."""
        if a == b:
            raise ValueError(f"cannot cut {a} from itself")
        for node in (a, b):
            if node != CLIENTS:
                self._node(node)
        self._cuts.add(frozenset((a, b)))
        self._render(*(node for node in (a, b) if node != CLIENTS))
        self._event(f"cut {a} | {b}")

    def cut_from_clients(self, node: str) -> None:
        """Drop every packet between the node and the root namespace (the test's clients)."""
        self.cut(node, CLIENTS)

    def isolate(self, node: str) -> None:
        """Drop every packet in and out of the node, but its own loopback traffic; nodes
        added later are cut from it too."""
        self._node(node)
        self._isolated.add(node)
        self._render(node)
        self._event(f"isolate {node}")

    def heal(self, node: str | None = None) -> None:
        """Remove the cuts of `node` (its isolation included; CLIENTS for the clients'),
        or every cut."""
        if node is None:
            touched = set(self._isolated).union(*self._cuts)
            self._cuts.clear()
            self._isolated.clear()
        else:
            if node != CLIENTS:
                self._node(node)
            healed = {pair for pair in self._cuts if node in pair}
            self._cuts -= healed
            self._isolated.discard(node)
            touched = {node}.union(*healed)
        self._render(*(n for n in touched if n != CLIENTS))
        self._event(f"heal {node or 'everything'}")

    def cuts(self) -> set[frozenset[str]]:
        """The pairs cut now (isolated nodes are in isolated())."""
        return set(self._cuts)

    def isolated(self) -> set[str]:
        return set(self._isolated)

    def close(self) -> None:
        """Remove the lab's links, namespaces (their rules go with them) and bridge.
        Safe to call twice, and on a lab half made."""
        if self._closed:
            return
        self._closed = True
        _open_labs.discard(self)
        _remove_lab(self.name)
        self._event("closed")

    def __enter__(self) -> NetworkLab:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<NetworkLab {self.name} {getattr(self, 'subnet', '')}: {', '.join(self.nodes)}>"

    def _make_node(self, entry: Node) -> None:
        _run("ip", "netns", "add", entry.namespace)
        _ip_batch(
            f"link add {entry.veth} type veth peer name {NODE_INTERFACE} netns {entry.namespace}",
            f"link set {entry.veth} master {self.bridge} up",
        )
        _ip_batch(
            # Processes in the node talk to themselves too.
            "link set lo up",
            f"addr add {entry.address}/{self.subnet.prefixlen} dev {NODE_INTERFACE}",
            f"link set {NODE_INTERFACE} up",
            namespace=entry.namespace,
        )
        # The lab's routes are symmetric, so reverse-path filtering passes everything;
        # it is off all the same, whatever the namespace inherited from the machine, so
        # that a packet lost is always one of the lab's cuts.
        self._in(
            entry.name,
            "sysctl",
            "-q",
            "-w",
            "net.ipv4.conf.all.rp_filter=0",
            f"net.ipv4.conf.{NODE_INTERFACE}.rp_filter=0",
        )
        self._render(entry.name)
        self._check_reachable(entry)

    def _make_bridge(self) -> None:
        # A fixed address, so that the bridge's MAC does not follow its ports as nodes
        # join (the nodes' ARP entries for it would go stale). No STP: nothing loops.
        mac = "02:" + ":".join(f"{b:02x}" for b in secrets.token_bytes(5))
        _ip_batch(
            f"link add {self.bridge} address {mac} type bridge stp_state 0 forward_delay 0",
            f"addr add {self.bridge_address}/{self.subnet.prefixlen} dev {self.bridge}",
            f"link set {self.bridge} up",
        )

    def _node(self, node: str) -> Node:
        self._check_open()
        try:
            return self.nodes[node]
        except KeyError:
            raise KeyError(f"no node {node!r} in {self!r}") from None

    def _check_open(self) -> None:
        if self._closed:
            raise NetworkLabError(f"{self.name} is closed")

    def _in(self, node: str, *command: str, stdin: str | None = None) -> None:
        _run(*self.prefix(node), *command, stdin=stdin)

    def _render(self, *nodes: str) -> None:
        """Write the filter table of each node's namespace from the lab's cuts, whole and
        at once: the namespace holds no other rules."""
        for node in nodes:
            rules = []
            if node in self._isolated:
                rules += ["-A INPUT ! -i lo -j DROP", "-A OUTPUT ! -o lo -j DROP"]
            for pair in sorted(self._cuts, key=sorted):
                if node in pair:
                    (peer,) = pair - {node}
                    address = self.bridge_address if peer == CLIENTS else self.address(peer)
                    rules += [f"-A INPUT -s {address} -j DROP", f"-A OUTPUT -d {address} -j DROP"]
            table = [
                "*filter",
                ":INPUT ACCEPT [0:0]",
                ":FORWARD ACCEPT [0:0]",
                ":OUTPUT ACCEPT [0:0]",
                *rules,
                "COMMIT",
                "",
            ]
            self._in(node, "iptables-restore", "-w", "5", stdin="\n".join(table))

    def _check_reachable(self, node: Node) -> None:
        """Fail now, not in a test's timeout, if the root namespace or the lab's first
        node cannot reach the new node: the root namespace's own rules may drop it, and
        with net.bridge.bridge-nf-call-iptables set, so may its FORWARD chain (a policy
        of DROP, as Docker sets) between two nodes."""
        first = next(iter(self.nodes.values()))
        sources: list[tuple[str, tuple[str, ...], str]] = [("the root namespace", (), "")]
        if first != node:
            hint = (
                " (with net.bridge.bridge-nf-call-iptables=1, traffic between nodes goes"
                " through the root namespace's FORWARD chain: does it drop it?)"
            )
            sources.append((f"node {first.name}", self.prefix(first.name), hint))
        for source, prefix, hint in sources:
            # Port 9 has no listener in a fresh namespace: a refusal proves the path both
            # ways; anything else (a timeout, no route) fails.
            probe = [*prefix, sys.executable, "-c", _REFUSAL_PROBE, node.address]
            deadline = time.monotonic() + 5.0
            while (done := _probe(probe)).returncode:
                if time.monotonic() >= deadline:
                    raise NetworkLabError(
                        f"node {node.name} at {node.address} is not reachable from {source}"
                        f" through bridge {self.bridge}: {_last_line(done.stderr)}{hint}"
                    )
                time.sleep(0.05)

    def _event(self, what: str) -> None:
        stamped = f"{time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d} {what}"
        self.events.append(stamped)
        logger.info("%s: %s", self.name, what)


def remove_stale_labs() -> list[str]:
    """Remove what labs of processes no longer running left behind (namespaces with
    whatever still runs in them, links, bridges); returns the labs removed."""
    stale = {
        lab
        for name in [*_namespaces(), *_links()]
        if (lab := _lab_of(name)) is not None and not _pid_alive(_owner_pid(lab))
    }
    for lab in sorted(stale):
        # Orphans of a crashed run: nobody will stop them, and nothing can reach them.
        for namespace in _namespaces():
            if _lab_of(namespace) == lab:
                for pid in _run("ip", "netns", "pids", namespace, check=False).split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
        _remove_lab(lab)
        logger.warning("removed stale network lab %s", lab)
    return sorted(stale)


def _remove_lab(lab: str) -> None:
    # Veths first: a namespace goes away asynchronously, and its end of the pair with it.
    short = lab.removeprefix(LAB_PREFIX)
    for link in _links():
        if link.startswith(f"{VETH_PREFIX}{short}-"):
            _run("ip", "link", "del", link, check=False)
    for namespace in _namespaces():
        if namespace.startswith(f"{lab}-"):
            _run("ip", "netns", "del", namespace, check=False)
    if lab in _links():
        _run("ip", "link", "del", lab, check=False)


def _lab_of(name: str) -> str | None:
    """The lab (hlab-<pid>-<n>) that a namespace, bridge or veth of ours belongs to."""
    for prefix in (LAB_PREFIX, VETH_PREFIX):
        if name.startswith(prefix):
            pid, _, rest = name.removeprefix(prefix).partition("-")
            sequence = rest.partition("-")[0]
            if pid.isalnum() and sequence.isalnum():
                return f"{LAB_PREFIX}{pid}-{sequence}"
    return None


def _owner_pid(lab: str) -> int:
    return int(lab.removeprefix(LAB_PREFIX).partition("-")[0], 36)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _namespaces() -> list[str]:
    # `ip netns list` prints "name" or "name (id: N)".
    return [line.split()[0] for line in _run("ip", "netns", "list").splitlines() if line]


def _links() -> list[str]:
    return [link["ifname"] for link in json.loads(_run("ip", "-j", "link", "show") or "[]")]


def _free_subnet() -> ipaddress.IPv4Network:
    """The first /24 of the pool that overlaps no route (other labs' bridges included)
    and no address of the root namespace."""
    taken: list[ipaddress.IPv4Network] = []
    for route in json.loads(_run("ip", "-4", "-j", "route", "show", "table", "all") or "[]"):
        destination = route.get("dst", "default")
        if destination != "default":
            taken.append(ipaddress.ip_network(destination, strict=False))
    for link in json.loads(_run("ip", "-4", "-j", "addr", "show") or "[]"):
        for info in link.get("addr_info", []):
            taken.append(ipaddress.ip_network(f"{info['local']}/{info['prefixlen']}", strict=False))
    for subnet in SUBNET_POOL.subnets(new_prefix=24):
        if not any(subnet.overlaps(other) for other in taken):
            return subnet
    raise NetworkLabError(f"every /24 of {SUBNET_POOL} is taken by a route or address")


@contextlib.contextmanager
def _machine_lock() -> Iterator[None]:
    """Labs of several processes pick subnets and clean stale labs one at a time."""
    with open(LOCK_PATH, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _ip_batch(*commands: str, namespace: str | None = None) -> None:
    """`ip` commands in one process, in the root namespace or in `namespace`."""
    where = () if namespace is None else ("-n", namespace)
    _run("ip", *where, "-batch", "-", stdin="\n".join(commands) + "\n")


def _run(*command: str, stdin: str | None = None, check: bool = True) -> str:
    done = subprocess.run(
        command,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    if check and done.returncode != 0:
        shown = " ".join(command) + (f" <<< {stdin!r}" if stdin else "")
        raise NetworkLabError(f"{shown} exited with {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def _probe(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "(no output)"


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, digit = divmod(number, 36)
        text = digits[digit] + text
        if number == 0:
            return text


@atexit.register
def _close_open_labs() -> None:
    for lab in list(_open_labs):
        with contextlib.suppress(Exception):
            lab.close()
