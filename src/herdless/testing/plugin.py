"""pytest fixtures that run real herdless brokers for a project's own tests.

pytest loads this module through herdless's `pytest11` entry point (named after
the module, so `-p herdless.testing.plugin` and `pytest_plugins` naming it work
too, installed or not). It is loaded into every pytest session where herdless is
installed, so it imports nothing heavy until a fixture is used, and adds nothing
that runs on its own.

    def test_orders(herdless_broker):
        herdless_broker.create_topic("orders", partitions=3)
        herdless_broker.produce("orders", [("alice", "42")])
        assert herdless_broker.consume("orders", 1)[0].value == b"42"

Fixtures: `herdless_broker`, `herdless_broker_factory`, `herdless_cluster`,
`herdless_cluster_factory`, `herdless_secured_broker`; docs/testing.md describes them
and their options. Secured brokers and clusters take a
herdless.testing.security.Security: `herdless_broker_factory(security=Security(...))`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from herdless.testing.broker import HerdlessBroker
    from herdless.testing.clients import Brokers
    from herdless.testing.cluster import HerdlessCluster
    from herdless.testing.security import Security

B = TypeVar("B", bound="Brokers")

SCOPES = ("session", "package", "module", "class", "function")
# Fixture values that outlive one test, healed after each test that used them.
_SHARED = pytest.StashKey[list[Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("herdless", "herdless brokers")
    for kind in ("broker", "cluster"):
        group.addoption(
            f"--herdless-{kind}-scope",
            choices=SCOPES,
            default=None,
            help=f"scope of the herdless_{kind} fixture (default: the ini option"
            f" herdless_{kind}_scope, else session)",
        )
        parser.addini(
            f"herdless_{kind}_scope",
            f"scope of the herdless_{kind} fixture: {', '.join(SCOPES)} (default session)",
            default="session",
        )
    parser.addini(
        "herdless_broker_settings",
        "broker settings, key=value one a line, for every broker the herdless fixtures start",
        type="linelist",
        default=[],
    )
    parser.addini(
        "herdless_cluster_brokers",
        "how many brokers the herdless_cluster fixture starts (default 3)",
        default="3",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SHARED] = []


def _scope_option(kind: str) -> Callable[[str, pytest.Config], str]:
    def scope(fixture_name: str, config: pytest.Config) -> str:
        value = config.getoption(f"herdless_{kind}_scope") or config.getini(
            f"herdless_{kind}_scope"
        )
        if value not in SCOPES:
            raise pytest.UsageError(
                f"herdless_{kind}_scope must be one of {', '.join(SCOPES)}, not {value!r}"
            )
        return value

    return scope


def _ini_settings(config: pytest.Config) -> dict[str, str]:
    settings = {}
    for line in config.getini("herdless_broker_settings"):
        key, sep, value = line.partition("=")
        if not sep:
            raise pytest.UsageError(f"herdless_broker_settings: expected key=value, got {line!r}")
        settings[key.strip()] = value.strip()
    return settings


class _Factory:
    """Starts brokers for the session's tests, and stops at its end those still running."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory, base: Mapping[str, str]) -> None:
        self._tmp_path_factory = tmp_path_factory
        self._base = dict(base)
        self._started: list[Brokers] = []

    def _settings(
        self, settings: Mapping[str, object] | None, names: Mapping[str, object]
    ) -> dict[str, str]:
        from herdless.testing.clients import kafka_settings

        return {**self._base, **kafka_settings(settings, names)}

    def _start(self, brokers: B, what: str) -> B:
        self._started.append(brokers)
        try:
            brokers.start()
        except (RuntimeError, TimeoutError) as exc:  # exited, did not listen or register
            failure = f"herdless {what} did not start: {exc}"
        else:
            return brokers
        # Outside the except block: the message alone, not chained to its cause.
        pytest.fail(failure, pytrace=False)

    def stop_all(self) -> None:
        for brokers in reversed(self._started):
            brokers.shutdown()


class BrokerFactory(_Factory):
    """`herdless_broker_factory(settings=None, /, **names)`: start a broker of your own.

    Each call starts a new broker with its own data directory, with the ini option
    herdless_broker_settings under the settings given, and secured listeners and
    users if given a `security`. It is stopped at the end of the session, or sooner
    as a context manager (`with factory(...) as broker:`).
    """

    def __call__(
        self,
        settings: Mapping[str, object] | None = None,
        /,
        *,
        security: Security | None = None,
        **names: object,
    ) -> HerdlessBroker:
        from herdless.testing.broker import HerdlessBroker

        data_dir = self._tmp_path_factory.mktemp("herdless-broker") / "data"
        broker = HerdlessBroker(data_dir, self._settings(settings, names), security=security)
        return self._start(broker, "broker")


class ClusterFactory(_Factory):
    """`herdless_cluster_factory(brokers=3, settings=None, /, **names)`: a cluster of your
    own, stopped at the end of the session or sooner as a context manager."""

    def __call__(
        self,
        brokers: int = 3,
        settings: Mapping[str, object] | None = None,
        /,
        *,
        security: Security | None = None,
        **names: object,
    ) -> HerdlessCluster:
        from herdless.cli.zookeeper import ZooKeeperMissing
        from herdless.testing.cluster import HerdlessCluster

        base_dir = self._tmp_path_factory.mktemp("herdless-cluster")
        try:
            cluster = HerdlessCluster(
                base_dir, brokers, self._settings(settings, names), security=security
            )
        except ZooKeeperMissing as exc:
            missing = f"herdless_cluster needs ZooKeeper. {exc}"
        else:
            return self._start(cluster, "cluster")
        pytest.fail(missing, pytrace=False)


@pytest.fixture(scope="session")
def herdless_broker_factory(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[BrokerFactory]:
    """Start brokers with settings of your own: `herdless_broker_factory(num_partitions=3)`."""
    factory = BrokerFactory(tmp_path_factory, _ini_settings(pytestconfig))
    yield factory
    factory.stop_all()


@pytest.fixture(scope="session")
def herdless_cluster_factory(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[ClusterFactory]:
    """Start clusters of your own: `herdless_cluster_factory(5, min_insync_replicas=2)`."""
    factory = ClusterFactory(tmp_path_factory, _ini_settings(pytestconfig))
    yield factory
    factory.stop_all()


@pytest.fixture(scope=_scope_option("broker"))
def herdless_broker(
    request: pytest.FixtureRequest, herdless_broker_factory: BrokerFactory
) -> Iterator[HerdlessBroker]:
    """A broker process on 127.0.0.1 (session-scoped unless configured otherwise)."""
    with herdless_broker_factory() as broker:
        yield from _shared(request, broker)


@pytest.fixture(scope=_scope_option("broker"))
def herdless_secured_broker(
    request: pytest.FixtureRequest, herdless_broker_factory: BrokerFactory
) -> Iterator[HerdlessBroker]:
    """A broker serving SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) with throw-away
    certificates, its super user admin made before it starts; scoped as herdless_broker.
    `client_settings()` says how admin connects, for each client library."""
    from herdless.testing.security import Security

    with herdless_broker_factory(security=Security()) as broker:
        yield from _shared(request, broker)


@pytest.fixture(scope=_scope_option("cluster"))
def herdless_cluster(
    request: pytest.FixtureRequest, herdless_cluster_factory: ClusterFactory
) -> Iterator[HerdlessCluster]:
    """ZooKeeper and N brokers (ini herdless_cluster_brokers, default 3)."""
    brokers = int(request.config.getini("herdless_cluster_brokers"))
    with herdless_cluster_factory(brokers) as cluster:
        yield from _shared(request, cluster)


def _shared(request: pytest.FixtureRequest, value: Any) -> Iterator[Any]:
    """Yield the value; while it is shared by several tests, heal it after each."""
    shared = request.config.stash[_SHARED]
    if request.scope != "function":
        shared.append(value)
    try:
        yield value
    finally:
        if request.scope != "function":
            shared.remove(value)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """A test may kill, stop or pause the brokers it shares with the next: bring them
    back, so that every test starts with all of them up."""
    if nextitem is None:
        return  # the session ends: they are about to stop anyway
    funcargs = getattr(item, "funcargs", {})
    for value in item.config.stash[_SHARED]:
        if any(value is arg for arg in funcargs.values()):
            value.heal()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """On failure, the logs of the brokers the test used go into its report."""
    report = yield
    if report.failed:
        from herdless.testing.clients import Brokers

        for name, value in getattr(item, "funcargs", {}).items():
            if isinstance(value, Brokers):
                report.sections.append((f"{name} logs", value.logs()))
    return report
