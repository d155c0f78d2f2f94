"""Restart time of a broker holding one large active segment, after SIGTERM and after SIGKILL.

Writes one partition whose active segment holds --mib MiB of batches of
--batch-records 1 KiB records (straight through the storage layer, closed
cleanly or not), then times a broker process from launch until it accepts a connection. Three cases:

  clean      the data directory was closed cleanly (SIGTERM, or LogManager.close)
  crash-all  SIGKILL with nothing flushed since the segment began: all of it is checked
  crash-tail SIGKILL after a flush, with --tail-mib MiB appended since: only that is checked

    python bench/restart.py                  # 285 MiB, 3 runs each
    python bench/restart.py --mib 64 --runs 1
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from herdless.protocol.records import build_batch, split_batches
from herdless.storage import LogManager
from herdless.storage.log import PartitionLog

TOPIC = "restart-bench"
RECORD_BYTES = 1024


def _append(partition_log: PartitionLog, mib: float, batch_records: int) -> None:
    value = b"x" * RECORD_BYTES
    batch = build_batch([(None, value)] * batch_records, int(time.time() * 1000))
    batches = split_batches(memoryview(batch), len(batch))
    for _ in range(int(mib * 2**20) // len(batch)):
        # Stamped with a leader epoch, as the broker's appends are.
        partition_log.append(batches, int(time.time() * 1000), leader_epoch=0)


def _prepare(data_dir: Path, mib: float, tail_mib: float, clean: bool, batch_records: int) -> None:
    logs = LogManager(data_dir)
    logs.open(int(time.time() * 1000))
    topic = logs.create_topic(TOPIC, 1, {"segment.bytes": str(1 << 30)})
    partition_log = topic.partitions[0]
    _append(partition_log, mib, batch_records)
    if clean:
        logs.close()
        return
    if tail_mib:
        partition_log.flush(checkpoint_now=True)
        _append(partition_log, tail_mib, batch_records)
    # A crash: nothing more reaches the disk's bookkeeping, no clean-shutdown marker.
    os._exit(0)


def _time_start(data_dir: Path) -> float:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "herdless", "serve", "--port", str(port)]
    started = time.monotonic()
    process = subprocess.Popen(
        [*command, "--data-dir", str(data_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"broker exited with {process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return time.monotonic() - started
            except OSError:
                time.sleep(0.01)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()


def _baseline() -> float:
    """Interpreter start-up and an empty data directory: the floor under every figure."""
    with tempfile.TemporaryDirectory() as tmp:
        return _time_start(Path(tmp) / "data")


def _case(name: str, mib: float, tail_mib: float, runs: int, batch_records: int) -> list[float]:
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            data_dir = Path(tmp) / "data"
            clean = name == "clean"
            pid = os.fork()
            if pid == 0:
                _prepare(
                    data_dir, mib, tail_mib if name == "crash-tail" else 0, clean, batch_records
                )
                os._exit(0)
            os.waitpid(pid, 0)
            # The page cache holds the segment either way, as after a quick restart.
            times.append(_time_start(data_dir))
            shutil.rmtree(data_dir, ignore_errors=True)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=285)
    parser.add_argument("--tail-mib", type=float, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch-records", type=int, default=1, help="1 KiB records per batch")
    args = parser.parse_args()
    print(f"empty data directory: {_baseline():.2f} s")
    for name in ("clean", "crash-all", "crash-tail"):
        times = _case(name, args.mib, args.tail_mib, args.runs, args.batch_records)
        print(
            f"{name:10s} {args.mib:.0f} MiB active segment: median {statistics.median(times):.2f} s"
            f" ({', '.join(f'{t:.2f}' for t in times)})"
        )


if __name__ == "__main__":
    main()
