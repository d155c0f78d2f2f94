from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest
from kazoo.client import KazooClient

from herdless.broker.clock import wall_ms
from herdless.cluster import ClusterStore
from tests.support.zookeeper import ZooKeeperProcess

T = TypeVar("T")
SESSION_TIMEOUT_S = 2.0
_chroots = itertools.count()

OpenStore = Callable[..., ClusterStore]


def _monotonic_ms() -> float:
    # The broker's monotonic clock without its rounding to whole milliseconds: the lease
    # tests hold the lease's deadlines against time.monotonic() read around a renewal.
    return time.monotonic() * 1000


# The clocks a broker gives its store.
CLOCKS: dict[str, Any] = {"wall_ms": wall_ms, "monotonic_ms": _monotonic_ms}


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """One ZooKeeper server for the store tests; each test works under its own chroot."""
    process = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper") / "data").start()
    yield process
    process.kill()


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperProcess]:
    """A ZooKeeper server this test may pause, kill and restart."""
    process = ZooKeeperProcess(tmp_path / "zookeeper").start()
    yield process
    process.resume()
    process.kill()


@pytest.fixture
def connect(zookeeper: ZooKeeperProcess, request: pytest.FixtureRequest) -> str:
    name = re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[:60]
    return f"{zookeeper.connect}/{name}-{next(_chroots)}"


def store_opener(connect: str) -> Generator[OpenStore]:
    opened: list[ClusterStore] = []

    def open_store(**options: Any) -> ClusterStore:
        options.setdefault("session_timeout", SESSION_TIMEOUT_S)
        options.setdefault("request_timeout", 5.0)
        store = ClusterStore(connect, **CLOCKS, **options)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


@pytest.fixture
def open_store(connect: str) -> Iterator[OpenStore]:
    """Open ClusterStores on this test's chroot (2 s sessions); all closed at the end."""
    yield from store_opener(connect)


@pytest.fixture
def raw(connect: str, open_store: OpenStore) -> Iterator[KazooClient]:
    """A plain kazoo client on this test's chroot, to look at znodes as Kafka's tools do."""
    open_store()  # creates the chroot and Kafka's paths
    client = KazooClient(hosts=connect)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


class Recorder(Generic[T]):
    """Collects what a callback receives, from whichever thread calls it."""

    def __init__(self) -> None:
        self.values: list[T] = []
        self.threads: set[str] = set()
        self._condition = threading.Condition()

    def __call__(self, value: T) -> None:
        with self._condition:
            self.values.append(value)
            self.threads.add(threading.current_thread().name)
            self._condition.notify_all()

    def wait_for(self, predicate: Callable[[T], bool], timeout: float = 10.0) -> T:
        deadline = time.monotonic() + timeout
        with self._condition:
            while True:
                for value in self.values:
                    if predicate(value):
                        return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no matching callback within {timeout}s: {self.values}")
                self._condition.wait(remaining)

    @property
    def last(self) -> T:
        with self._condition:
            return self.values[-1]


def expire_session(store: ClusterStore, connect: str) -> None:
    """End the store's session from outside, as the server does when it times out."""
    twin = KazooClient(hosts=connect, client_id=store._client.client_id)  # noqa: SLF001
    twin.start(timeout=10)
    twin.stop()
    twin.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        for name in ("zookeeper", "own_zookeeper"):
            process = funcargs.get(name)
            if isinstance(process, ZooKeeperProcess):
                report.sections.append((f"{name} log ({process.log_path})", process.log_tail()))
    return report
