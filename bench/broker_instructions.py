"""Instructions the broker executes per OffsetCommit, counted by valgrind: a cost figure
that the machine's load does not change.

On a shared machine, CPU seconds per request swing by half with what else runs
(caches, cores shared with other work), and requests per second more. Counting
the instructions of the broker's event-loop thread (callgrind, user space only:
system calls are left out, as are the kernel's socket and page-cache work)
gives the same figure to within a fraction of a percent from one run to the
next, so a change to the request path can be judged on its own, and two trees
compared, whatever the load.

The broker runs under `valgrind --tool=callgrind` (about 50 times slower), one
committer commits `--warmup` times, the counters are zeroed, it commits
`--commits` more times, and the counts are dumped: each commit is one
OffsetCommit of 4 partitions with generation -1 to a group of its own, one in
flight, each on its own pass of the event loop.

    apt-get install -y valgrind
    python bench/broker_instructions.py
    python bench/broker_instructions.py --baseline /tmp/before   # another checkout too

This prints figures; it is not a test. Instructions are not time: a system call
counts as none here, and the kernel's share of a commit (the socket write, the
pwrite to the log) is about a quarter of the broker's CPU (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import simulated_members as sm
from groups import TOPIC, create_topic
from peers import SRC_DIR, BrokerError, free_port, herdless_serve_args, tree_env

START_TIMEOUT_S = 300.0
PARTITIONS = 4


async def commit(bootstrap: str, group: str, times: int) -> None:
    connection = await sm.Connection.open(bootstrap, "instructions")
    try:
        for offset in range(1, times + 1):
            codes = await sm.offset_commit(
                connection, group, TOPIC, dict.fromkeys(range(PARTITIONS), offset)
            )
            if any(code != sm.NONE for code in codes):
                raise BrokerError(f"commit {offset} answered {[sm.error_name(c) for c in codes]}")
    finally:
        connection.close()


def _callgrind_control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True, timeout=120)


def _loop_thread_instructions(directory: Path, out: str) -> int:
    """The instructions of the first thread (the event loop's) in the last dump."""
    dumps = sorted(directory.glob(f"{out}.*-01"), key=lambda p: p.stat().st_mtime)
    if not dumps:
        raise BrokerError(f"callgrind wrote no dump in {directory}")
    match = re.search(r"^summary: (\d+)$", dumps[-1].read_text(errors="replace"), re.M)
    if match is None:
        raise BrokerError(f"{dumps[-1]} has no summary line")
    return int(match.group(1))


def measure(src: Path, args: argparse.Namespace) -> float:
    """Instructions per commit of the broker built from `src`."""
    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as tmp:
        directory = Path(tmp)
        port = free_port()
        env = tree_env(src)
        log_path = directory / "broker.log"
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--separate-threads=yes",
            f"--callgrind-out-file={directory}/callgrind.out",
            # The interpreter itself: a pyenv shim or a venv's script would be what
            # valgrind follows, not the broker.
            os.path.realpath(sys.executable),
            *herdless_serve_args(port, directory / "data"),
        ]
        with open(log_path, "wb") as log:
            process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while b"herdless listening" not in log_path.read_bytes():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise BrokerError(f"the broker under valgrind did not start: see {log_path}")
                time.sleep(1)
            bootstrap = f"127.0.0.1:{port}"
            create_topic(bootstrap, TOPIC, PARTITIONS)
            asyncio.run(commit(bootstrap, "instructions-warmup", args.warmup))
            _callgrind_control("-z", str(process.pid))
            asyncio.run(commit(bootstrap, "instructions", args.commits))
            _callgrind_control("-d", str(process.pid))
            return _loop_thread_instructions(directory, "callgrind.out") / args.commits
        finally:
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--baseline", type=Path, help="also measure this checkout")
    args = parser.parse_args()
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed: apt-get install -y valgrind", file=sys.stderr)
            return 2
    trees = {"herdless": SRC_DIR}
    if args.baseline is not None:
        trees["herdless-base"] = args.baseline.resolve() / "src"
    figures: dict[str, list[float]] = {name: [] for name in trees}
    for round_no in range(1, args.rounds + 1):
        for name, src in trees.items():
            per_commit = measure(src, args)
            figures[name].append(per_commit)
            print(f"round {round_no} {name}: {per_commit:,.0f} instructions per commit", flush=True)
    print()
    print("| tree | instructions per OffsetCommit (rounds) |")
    print("|---|---:|")
    for name, values in figures.items():
        print(f"| {name} | {' '.join(f'{v:,.0f}' for v in values)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
