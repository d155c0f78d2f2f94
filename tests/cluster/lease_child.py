"""A broker-like process for the lease test: it holds a ZooKeeper session and a lease,
and reports what its lease says when it finds it was stopped.

python -m tests.cluster.lease_child <connect>
"""

from __future__ import annotations

import faulthandler
import json
import signal
import sys
import threading
import time

from herdless.broker.clock import monotonic_ms, wall_ms
from herdless.cluster import BrokerRegistration, ClusterStore

STALL_S = 1.5


def main(connect: str) -> None:
    # The test asks for every thread's stack (to stderr) if no report comes.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    store = ClusterStore(
        connect,
        wall_ms=wall_ms,
        monotonic_ms=monotonic_ms,
        session_timeout=2.0,
        request_timeout=0.5,
    )
    store.register_broker(BrokerRegistration(1, "127.0.0.1", 9092))
    stop = threading.Event()

    def renew() -> None:
        while not stop.is_set():
            store.renew_lease(timeout=0.5)
            stop.wait(0.1)

    threading.Thread(target=renew, daemon=True).start()
    while time.monotonic() >= store.lease_deadline():
        time.sleep(0.01)
    # Taken before saying ready: a stop that comes after the test reads "ready" must fall
    # between two readings. Taken after, a child preempted between the print and the
    # reading (a loaded machine, CI) was stopped before its first reading, saw no stall
    # on resuming, and never reported.
    last = time.monotonic()
    print(json.dumps({"ready": True}), flush=True)
    while True:
        # What a leader checks before it acts: the time first, then the lease.
        now = time.monotonic()
        deadline = store.lease_deadline()
        if now - last > STALL_S:
            report = {"stalled_s": now - last, "lease_valid": now < deadline}
            print(json.dumps(report), flush=True)
            break
        last = now
        time.sleep(0.01)
    stop.set()
    store.close()


if __name__ == "__main__":
    main(sys.argv[1])
