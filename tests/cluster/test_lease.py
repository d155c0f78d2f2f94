"""The session lease: a broker must stop acting as leader before its session can expire
and another broker be elected in its place."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import closing
from typing import Any

import pytest
from kazoo.client import KazooClient

from herdless.cluster import BrokerRegistration, ClusterStore, ClusterUnavailable, SessionState
from tests.cluster.conftest import CLOCKS, OpenStore, Recorder, expire_session
from tests.support.tcp_relay import TcpRelay
from tests.support.zookeeper import ZooKeeperProcess

MARGIN = 0.1


def test_renewal_moves_the_lease_to_send_time_plus_session_timeout(open_store: OpenStore) -> None:
    store = open_store(session_timeout=4.0, lease_margin=MARGIN)
    assert store.negotiated_session_timeout == 4.0
    before = time.monotonic()
    deadline = store.renew_lease()
    after = time.monotonic()
    granted = 4.0 * (1 - MARGIN)
    assert before + granted <= deadline <= after + granted
    assert store.lease_deadline() == deadline


def test_the_granted_session_timeout_counts_not_the_requested_one(open_store: OpenStore) -> None:
    # The server grants at most its maxSessionTimeout (30 s here).
    store = open_store(session_timeout=120.0)
    assert store.negotiated_session_timeout == 30.0
    assert store.renew_lease() <= time.monotonic() + 30.0


def test_lease_is_void_once_the_session_is_lost(open_store: OpenStore, connect: str) -> None:
    store = open_store()
    states: Recorder[SessionState] = Recorder()
    store.add_session_listener(states)
    store.renew_lease()
    assert store.lease_deadline() > time.monotonic()
    old_session = store.session_id
    expire_session(store, connect)
    states.wait_for(lambda state: state is SessionState.LOST)
    states.wait_for(lambda s: s is SessionState.CONNECTED and store.session_id != old_session)
    # Nothing was answered in the new session yet: no lease...
    assert store.lease_deadline() == -math.inf
    # ...until a round trip proves the new session alive.
    assert store.renew_lease() > time.monotonic()


def test_lease_runs_out_when_zookeeper_stops_answering(own_zookeeper: ZooKeeperProcess) -> None:
    with ClusterStore(
        own_zookeeper.connect,
        **CLOCKS,
        session_timeout=2.0,
        request_timeout=0.5,
        lease_margin=MARGIN,
    ) as store:
        states: Recorder[SessionState] = Recorder()
        store.add_session_listener(states)
        store.renew_lease()
        paused_at = time.monotonic()
        own_zookeeper.pause()
        try:
            started = time.monotonic()
            with pytest.raises(ClusterUnavailable, match=f"ZooKeeper at {own_zookeeper.connect}"):
                store.topic_names()
            assert time.monotonic() - started < 2.0
            while time.monotonic() < paused_at + 2.0 + 0.2:
                store.renew_lease(timeout=0.2)
                assert store.lease_deadline() <= paused_at + 2.0 * (1 - MARGIN)
            assert time.monotonic() > store.lease_deadline()
            states.wait_for(lambda state: state is SessionState.SUSPENDED)
        finally:
            own_zookeeper.resume()


def test_a_late_answer_extends_the_lease_from_when_it_was_sent(
    own_zookeeper: ZooKeeperProcess,
) -> None:
    # ZooKeeper holds the answer for 1.5 s; the session (6 s) survives, and the answer
    # moves the lease, but only as far as send time plus the timeout: a process stopped
    # between sending and reading the answer must not be credited with the wait.
    with ClusterStore(
        own_zookeeper.connect, **CLOCKS, session_timeout=6.0, lease_margin=MARGIN
    ) as store:
        first = store.renew_lease()
        own_zookeeper.pause()
        try:
            renewal = threading.Thread(target=store.renew_lease, kwargs={"timeout": 5.0})
            renewal.start()
            time.sleep(1.5)
        finally:
            own_zookeeper.resume()
        resumed_at = time.monotonic()
        renewal.join()
        deadline = store.lease_deadline()
        assert deadline > first
        # Credited from the answer, it would be about resumed_at + 5.4.
        assert deadline < resumed_at + 6.0 * (1 - MARGIN) - 1.0


# The child checks every 10 ms, so it reports at once on resuming.
REPORT_WITHIN_S = 20.0


def _next_report(child: subprocess.Popen[str], seconds: float) -> Any:
    """The child's next line, or a failure that leaves its threads' stacks in stderr."""
    line: list[str] = []
    assert child.stdout is not None
    reader = threading.Thread(target=lambda: line.append(child.stdout.readline()), daemon=True)
    reader.start()
    reader.join(seconds)
    if not line:
        os.kill(child.pid, signal.SIGUSR1)  # faulthandler in the child: every stack
        time.sleep(1.0)
        pytest.fail(f"the resumed child reported nothing within {seconds:.0f} s (stacks above)")
    return json.loads(line[0])


@pytest.mark.timeout(60)
def test_a_stopped_broker_finds_its_lease_gone_when_it_resumes(
    own_zookeeper: ZooKeeperProcess,
) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.cluster.lease_child", own_zookeeper.connect],
        stdout=subprocess.PIPE,
        text=True,
    )
    observer = KazooClient(hosts=own_zookeeper.connect)
    observer.start(timeout=10)
    try:
        assert child.stdout is not None
        assert json.loads(child.stdout.readline()) == {"ready": True}
        assert observer.get_children("/brokers/ids") == ["1"]
        os.kill(child.pid, signal.SIGSTOP)
        # Past the session timeout ZooKeeper expires the stopped broker's session: its
        # registration goes, and a controller would now elect other leaders.
        deadline = time.monotonic() + 10
        while observer.get_children("/brokers/ids") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert observer.get_children("/brokers/ids") == []
        time.sleep(0.5)
        os.kill(child.pid, signal.SIGCONT)
        report = _next_report(child, REPORT_WITHIN_S)
        assert report["stalled_s"] > 2.0
        # Its first check after resuming already says: do not act as leader.
        assert report["lease_valid"] is False
        assert child.wait(timeout=20) == 0
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
            child.wait()
        observer.stop()
        observer.close()


def test_session_survives_a_handshake_zookeeper_never_answers(
    zookeeper: ZooKeeperProcess, connect: str
) -> None:
    # A ZooKeeper that is starting may accept a connection and never answer it; the
    # session must not wait on it for its whole timeout.
    chroot = connect.partition("/")[2]
    with (
        closing(TcpRelay(zookeeper.host, zookeeper.port)) as relay,
        ClusterStore(f"{relay.address}/{chroot}", **CLOCKS, session_timeout=6.0) as store,
    ):
        states: Recorder[SessionState] = Recorder()
        store.add_session_listener(states)
        session = store.session_id
        relay.cut(hold_next=1)
        states.wait_for(lambda state: state is SessionState.SUSPENDED)
        states.wait_for(lambda state: state is SessionState.CONNECTED, timeout=12)
        assert relay.held == 1
        assert SessionState.LOST not in states.values
        assert store.session_id == session


def test_session_survives_a_quick_zookeeper_restart(own_zookeeper: ZooKeeperProcess) -> None:
    with ClusterStore(own_zookeeper.connect, **CLOCKS, session_timeout=8.0) as store:
        states: Recorder[SessionState] = Recorder()
        store.add_session_listener(states)
        store.register_broker(BrokerRegistration(1, "127.0.0.1", 9092))
        session = store.session_id
        own_zookeeper.restart()
        states.wait_for(lambda state: state is SessionState.SUSPENDED)
        states.wait_for(lambda state: state is SessionState.CONNECTED, timeout=15)
        assert SessionState.LOST not in states.values
        assert store.session_id == session
        assert list(store.live_brokers()) == [1]
        assert store.renew_lease() > time.monotonic()
