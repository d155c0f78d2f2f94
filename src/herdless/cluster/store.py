"""The cluster's state in ZooKeeper, in Kafka's layout, through kazoo.

Threads. Every method is synchronous and blocks its caller for at most the request
timeout; call them from worker threads, never from the event loop. Kazoo runs its own
threads: one talks to ZooKeeper, one runs watch and session callbacks in order, and a few
short-lived ones re-read watched znodes after a reconnection. A watch callback therefore
runs on a kazoo thread (its first call runs in the thread that set the watch, before
watch_* returns); hand its value to the event loop, do not do long work in it.

Watches. A callback gets the znode's value as it is when read, not every change: changes
that come faster than the re-read are seen as one. Kazoo drops ZooKeeper's watches when
the connection drops and re-reads on reconnection, calling back only if the value moved.
Setting a watch reads the znode first and retries while disconnected, so watch_* blocks
until ZooKeeper answers; set watches after connecting, as a broker does at start-up.

Conditional writes. Partition state is only ever written against the znode version the
writer read, and a controller's writes are also conditional on the version of
/controller_epoch it got when elected, both in one ZooKeeper transaction. So a deposed
controller, or a leader with a stale view of its partition, gets StateVersionConflict
(ControllerMoved for the former) and never overwrites a newer decision.

The session lease (see lease.py). Every answered request moves it: lease_deadline() is
until when this session is certainly alive, and a leader must not act past it.

Security (herdless.security.zookeeper). With a login the session is SASL DIGEST-MD5
authenticated on every connection, and a refused login ends it: ZooKeeperAuthentication
Failed, never retried with the same password. Every znode is created through one client
whose creates take their ACLs from znode_acls, so no path can be created another way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import (
    AuthFailedError,
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SASLException,
    SessionClosedRequireSaslError,
    SessionExpiredError,
    ZookeeperError,
)
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import Callback, ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.security import ACL

from herdless.cluster import acl_layout, layout, znode_acls
from herdless.cluster.errors import (
    BrokerIdInUse,
    ClusterUnavailable,
    ControllerMoved,
    MalformedZNode,
    StateVersionConflict,
    TopicExists,
    TopicNameCollision,
    UnknownTopic,
    ZooKeeperAuthenticationFailed,
)
from herdless.cluster.layout import (
    BrokerRegistration,
    LogDirEvent,
    LogDirNotification,
    PartitionState,
    TopicAssignment,
    Versioned,
)
from herdless.cluster.lease import SessionLease
from herdless.security.acls import AccessControlEntry, ResourcePattern
from herdless.security.zookeeper import ZooKeeperSecurity
from herdless.storage.manager import new_topic_id

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Kafka's zookeeper.session.timeout.ms default.
DEFAULT_SESSION_TIMEOUT_S = 18.0
DEFAULT_CONNECT_TIMEOUT_S = 18.0
DEFAULT_REQUEST_TIMEOUT_S = 10.0
# Share of the session timeout kept back from the lease.
DEFAULT_LEASE_MARGIN = 0.1
# How a transaction reports the operations that did not fail themselves.
_ROLLED_BACK = (RolledBackError, RuntimeInconsistency)
_CONNECTION_ERRORS = (ConnectionLoss, SessionExpiredError, OperationTimeoutError)
# Conditional writes tried again after another writer's got in first.
_CONFLICT_RETRIES = 10


class SessionState(Enum):
    CONNECTED = "connected"
    # Disconnected; the session may still be alive and may come back.
    SUSPENDED = "suspended"
    # The session expired (or the store was closed): ephemeral znodes are gone.
    LOST = "lost"


@dataclass(frozen=True, slots=True)
class ControllerElection:
    """This broker became controller: the epoch it wrote and /controller_epoch's version,
    on which every later controller write is conditional."""

    epoch: int
    epoch_version: int


class Watch:
    """A handle on a watch or listener: cancel() stops further callbacks."""

    def __init__(self, on_cancel: Callable[[], None] | None = None) -> None:
        self._cancelled = threading.Event()
        self._on_cancel = on_cancel

    def cancel(self) -> None:
        self._cancelled.set()
        if self._on_cancel is not None:
            self._on_cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()


class ClusterStore:
    """One ZooKeeper session, and the cluster's znodes read and written through it."""

    def __init__(
        self,
        connect: str,
        *,
        session_timeout: float = DEFAULT_SESSION_TIMEOUT_S,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S,
        lease_margin: float = DEFAULT_LEASE_MARGIN,
        security: ZooKeeperSecurity | None = None,
    ) -> None:
        """Connect to "host:port[,host:port...][/chroot]", creating the chroot and Kafka's
        top-level paths if missing. Raises ClusterUnavailable if no session is established
        within connect_timeout seconds, ZooKeeperAuthenticationFailed if ZooKeeper
        refuses `security`'s login."""
        security = security or ZooKeeperSecurity()
        self.connect_string = connect
        self._request_timeout = request_timeout
        self._lease = SessionLease(lease_margin)
        # The session that last registered this broker: its leftover znode is ours.
        self._registered_session: int | None = None
        hosts, _, chroot = connect.partition("/")
        if chroot:
            with _client(hosts, session_timeout, connect_timeout, connect, security) as root:
                for prefix in _prefixes("/" + chroot):
                    with suppress(NodeExistsError):
                        try:
                            root.create(prefix, None)
                        except SessionClosedRequireSaslError:
                            raise _sasl_required(connect) from None
        self._client = _KafkaZkClient(connect, session_timeout, security)
        self._hook_negotiated_timeout()
        self._client.add_listener(self._on_kazoo_state)
        _start(self._client, connect_timeout, connect)
        try:
            for path in layout.PERSISTENT_PATHS:
                self._ensure_path(path)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """End the session: this broker's ephemeral znodes go at once."""
        self._client.stop()
        self._client.close()

    def __enter__(self) -> ClusterStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- session and lease ---------------------------------------------------------------

    @property
    def session_id(self) -> int | None:
        return self._client._session_id  # noqa: SLF001 - kazoo exposes it only with the password

    @property
    def negotiated_session_timeout(self) -> float | None:
        """Seconds, as the server granted them; None before the first session."""
        return self._lease.session_timeout

    def lease_deadline(self) -> float:
        """A time.monotonic() value until which this client's current session is certainly
        alive; -inf when nothing proves it (no answered request in this session)."""
        return self._lease.deadline(self.session_id)

    def renew_lease(self, timeout: float | None = None) -> float:
        """One cheap round trip to ZooKeeper; returns lease_deadline() after it. A round
        trip that fails or times out leaves the lease as it was."""
        try:
            self._run(lambda: self._client.exists_async("/"), timeout)
        except ClusterUnavailable as exc:
            logger.debug("lease not renewed: %s", exc)
        return self.lease_deadline()

    def add_session_listener(self, callback: Callable[[SessionState], None]) -> Watch:
        """Call back on every session state change, in order, on kazoo's callback thread.

        On LOST this broker's registration and any controllership are gone: stop leading,
        then register again (a new session, so a new broker epoch).
        """
        watch: Watch

        def listener(state: str) -> bool:
            if watch.cancelled:
                return True
            session_state = SessionState(state.lower())
            # The listener runs on kazoo's connection thread, which must not block.
            self._client.handler.dispatch_callback(
                Callback("session", _guarded(callback), (session_state,))
            )
            return False

        watch = Watch(lambda: self._client.remove_listener(listener))
        self._client.add_listener(listener)
        return watch

    # -- cluster id and brokers ----------------------------------------------------------

    def cluster_id(self) -> str:
        """/cluster/id, created with a new Kafka-style id by the first broker to ask."""
        path = layout.CLUSTER_ID_PATH
        try:
            data, _ = self._run(lambda: self._client.get_async(path))
            return layout.decode_cluster_id(data)
        except NoNodeError:
            pass
        proposed = layout.kafka_uuid_str(new_topic_id())
        self._ensure_path("/cluster")
        try:
            self._run(lambda: self._client.create_async(path, layout.encode_cluster_id(proposed)))
            return proposed
        except NodeExistsError:
            data, _ = self._run(lambda: self._client.get_async(path))
            return layout.decode_cluster_id(data)

    def register_broker(self, registration: BrokerRegistration) -> int:
        """Create this broker's ephemeral /brokers/ids/N; returns the broker epoch (the
        znode's creation zxid), as Kafka's registerBroker does.

        Raises BrokerIdInUse when another live session holds the id. A znode left by this
        store's own earlier, expired session is replaced (ZooKeeper can be late removing
        it); one this session already created is kept, with its data brought up to date.
        """
        path = layout.broker_path(registration.broker_id)
        data = layout.encode_broker(registration, _now_ms())
        for _ in range(3):
            try:
                _, stat = self._run(
                    lambda: self._client.create_async(path, data, ephemeral=True, include_data=True)
                )
                self._registered_session = self.session_id
                return stat.czxid
            except NodeExistsError:
                pass
            try:
                existing, stat = self._run(lambda: self._client.get_async(path))
            except NoNodeError:
                continue
            owner, version = stat.ephemeralOwner, stat.version
            if owner == self.session_id:
                self._run(lambda v=version: self._client.set_async(path, data, v))
                self._registered_session = owner
                return stat.czxid
            if owner == self._registered_session:
                logger.info("replacing %s left by this broker's expired session %#x", path, owner)
                with suppress(NoNodeError, BadVersionError):
                    self._run(lambda v=version: self._client.delete_async(path, v))
                continue
            raise BrokerIdInUse(
                f"broker id {registration.broker_id} is already registered by a live broker "
                f"at {_address_of(registration.broker_id, existing)}"
            )
        raise BrokerIdInUse(f"broker id {registration.broker_id}: {path} keeps changing")

    def live_brokers(self) -> dict[int, BrokerRegistration]:
        """The registered brokers by id; a broker whose session just ended may be missing."""
        brokers: dict[int, BrokerRegistration] = {}
        for broker_id in self._broker_ids():
            try:
                data, _ = self._run(
                    lambda b=broker_id: self._client.get_async(layout.broker_path(b))
                )
            except NoNodeError:
                continue
            brokers[broker_id] = layout.decode_broker(broker_id, data)
        return brokers

    def broker_epochs(self) -> dict[int, int]:
        """The registered brokers' epochs by id: the zxid that created each registration,
        as Kafka's broker epoch is; a broker whose session just ended may be missing."""
        epochs: dict[int, int] = {}
        for broker_id in self._broker_ids():
            stat = self._run(lambda b=broker_id: self._client.exists_async(layout.broker_path(b)))
            if stat is not None:
                epochs[broker_id] = stat.czxid
        return epochs

    def watch_brokers(self, callback: Callable[[list[int]], None]) -> Watch:
        """Call back with the sorted ids of the registered brokers whenever they change."""
        return self._watch_children(
            layout.BROKER_IDS_PATH, lambda children: callback(_broker_ids(children))
        )

    # -- controller ----------------------------------------------------------------------

    def try_elect_controller(self, broker_id: int) -> ControllerElection | None:
        """Become controller: create the ephemeral /controller and increment
        /controller_epoch in one transaction, conditional on the epoch read. None when
        another broker is controller (or won the race)."""
        current = self.controller_epoch()
        if current is None:
            with suppress(NodeExistsError):
                self._run(
                    lambda: self._client.create_async(
                        layout.CONTROLLER_EPOCH_PATH,
                        layout.encode_controller_epoch(layout.INITIAL_CONTROLLER_EPOCH),
                    )
                )
            current = self.controller_epoch()
            if current is None:
                raise MalformedZNode(layout.CONTROLLER_EPOCH_PATH, "vanished while read")
        epoch = current.value + 1
        tx = self._client.transaction()
        tx.create(
            layout.CONTROLLER_PATH,
            layout.encode_controller(broker_id, _now_ms()),
            ephemeral=True,
        )
        tx.set_data(
            layout.CONTROLLER_EPOCH_PATH, layout.encode_controller_epoch(epoch), current.version
        )
        results = self._commit(tx)
        failure = _first_failure(results)
        if failure is None:
            stat = results[1]
            return ControllerElection(epoch, stat.version)
        if not isinstance(failure, NodeExistsError | BadVersionError):
            raise failure
        # As Kafka does: the transaction may have committed before a lost connection hid
        # the answer; it did if /controller is ours and the epoch is the one we wrote.
        if self.controller_id() == broker_id:
            now = self.controller_epoch()
            if now is not None and now.value == epoch:
                return ControllerElection(epoch, now.version)
        return None

    def controller_id(self) -> int | None:
        try:
            data, _ = self._run(lambda: self._client.get_async(layout.CONTROLLER_PATH))
        except NoNodeError:
            return None
        return layout.decode_controller(data)

    def controller_epoch(self) -> Versioned[int] | None:
        try:
            data, stat = self._run(lambda: self._client.get_async(layout.CONTROLLER_EPOCH_PATH))
        except NoNodeError:
            return None
        return Versioned(layout.decode_controller_epoch(data), stat.version)

    def resign_controller(self, election: ControllerElection) -> None:
        """Delete /controller if this election still holds it, so that another broker can
        take over without waiting for this session to expire."""
        tx = self._client.transaction()
        tx.check(layout.CONTROLLER_EPOCH_PATH, election.epoch_version)
        tx.delete(layout.CONTROLLER_PATH)
        failure = _first_failure(self._commit(tx))
        if failure is not None and not isinstance(failure, BadVersionError | NoNodeError):
            raise failure

    def watch_controller(self, callback: Callable[[int | None], None]) -> Watch:
        """Call back with the controller's broker id, or None while there is none."""
        return self._watch_data(
            layout.CONTROLLER_PATH,
            lambda data, _stat: None if data is None else layout.decode_controller(data),
            callback,
        )

    # -- topics --------------------------------------------------------------------------

    def create_topic(self, assignment: TopicAssignment, configs: Mapping[str, str]) -> int:
        """Create /config/topics/T and /brokers/topics/T in one transaction; returns the
        topic znode's version (0). The controller creates the partition states.

        Raises TopicExists if the topic exists or is marked for deletion, and
        TopicNameCollision for a name that differs from an existing one only by '.'
        versus '_'.
        """
        name = assignment.name
        if self._exists(layout.delete_topic_path(name)):
            raise TopicExists(f"Topic '{name}' is marked for deletion.")
        if "." in name or "_" in name:
            colliding = sorted(
                other
                for other in self.topic_names()
                if other != name and other.replace(".", "_") == name.replace(".", "_")
            )
            if colliding:
                raise TopicNameCollision(
                    f"Topic '{name}' collides with existing topics: {', '.join(colliding)}"
                )
        config_path = layout.topic_config_path(name)
        config_data = layout.encode_topic_config(configs)
        tx = self._client.transaction()
        # A config left behind by an unfinished deletion is overwritten, as Kafka does.
        if self._exists(config_path):
            tx.set_data(config_path, config_data)
        else:
            tx.create(config_path, config_data)
        tx.create(layout.topic_path(name), layout.encode_topic(assignment))
        failure = _first_failure(self._commit(tx))
        if isinstance(failure, NodeExistsError | NoNodeError):
            if self._exists(layout.topic_path(name)):
                raise TopicExists(f"Topic '{name}' already exists.")
            raise StateVersionConflict(f"the config of topic '{name}' changed while creating it")
        if failure is not None:
            raise failure
        return 0

    def topic(self, name: str) -> Versioned[TopicAssignment] | None:
        try:
            data, stat = self._run(lambda: self._client.get_async(layout.topic_path(name)))
        except NoNodeError:
            return None
        return Versioned(layout.decode_topic(name, data), stat.version)

    def topic_names(self) -> set[str]:
        return set(self._run(lambda: self._client.get_children_async(layout.TOPICS_PATH)))

    def watch_topic_names(self, callback: Callable[[set[str]], None]) -> Watch:
        return self._watch_children(layout.TOPICS_PATH, lambda children: callback(set(children)))

    def watch_topic(
        self, name: str, callback: Callable[[Versioned[TopicAssignment] | None], None]
    ) -> Watch:
        """Call back with the topic's assignment whenever it changes; None once deleted."""
        return self._watch_data(
            layout.topic_path(name),
            lambda data, stat: _versioned(stat, lambda: layout.decode_topic(name, data)),
            callback,
        )

    def set_partitions(
        self,
        assignment: TopicAssignment,
        expected_version: int,
        *,
        controller_epoch_version: int | None = None,
    ) -> int:
        """Replace the topic's assignment (CreatePartitions) if the znode is still at
        expected_version; returns the new version."""
        path = layout.topic_path(assignment.name)
        stat = self._conditional_set(
            path, layout.encode_topic(assignment), expected_version, controller_epoch_version
        )
        if stat is None:
            raise UnknownTopic(f"The topic '{assignment.name}' does not exist.")
        return stat.version

    # -- partition state -----------------------------------------------------------------

    def get_partition_state(self, topic: str, partition: int) -> Versioned[PartitionState] | None:
        path = layout.partition_state_path(topic, partition)
        try:
            data, stat = self._run(lambda: self._client.get_async(path))
        except NoNodeError:
            return None
        return Versioned(layout.decode_partition_state(topic, partition, data), stat.version)

    def watch_partition_state(
        self,
        topic: str,
        partition: int,
        callback: Callable[[Versioned[PartitionState] | None], None],
    ) -> Watch:
        return self._watch_data(
            layout.partition_state_path(topic, partition),
            lambda data, stat: _versioned(
                stat, lambda: layout.decode_partition_state(topic, partition, data)
            ),
            callback,
        )

    def create_partition_states(
        self,
        topic: str,
        states: Mapping[int, PartitionState],
        controller_epoch_version: int,
    ) -> dict[int, Versioned[PartitionState]]:
        """The controller creates the first state of new partitions, all or none, if it is
        still controller. StateVersionConflict if one of them exists already."""
        self._create_parents(topic, list(states))
        tx = self._client.transaction()
        tx.check(layout.CONTROLLER_EPOCH_PATH, controller_epoch_version)
        for partition, state in states.items():
            tx.create(
                layout.partition_state_path(topic, partition),
                layout.encode_partition_state(state),
            )
        _check_committed(
            self._commit(tx),
            f"creating the state of partitions of '{topic}'",
            epoch_checked=True,
        )
        return {partition: Versioned(state, 0) for partition, state in states.items()}

    def update_partition_state(
        self,
        topic: str,
        partition: int,
        state: PartitionState,
        expected_version: int,
        *,
        controller_epoch_version: int | None = None,
    ) -> Versioned[PartitionState]:
        """Write a partition's state if its znode is still at expected_version and, for a
        controller's write (controller_epoch_version given), if /controller_epoch is still
        at that version. StateVersionConflict (ControllerMoved) otherwise."""
        path = layout.partition_state_path(topic, partition)
        stat = self._conditional_set(
            path, layout.encode_partition_state(state), expected_version, controller_epoch_version
        )
        if stat is None:
            raise StateVersionConflict(f"{path} does not exist")
        return Versioned(state, stat.version)

    # -- producer ids ------------------------------------------------------------------

    def reserve_producer_id_block(self, broker_id: int, size: int) -> tuple[int, int]:
        """Reserve the next `size` producer ids for this broker, as Kafka's ZooKeeper-era
        brokers do; returns (first id, id past the last). Never the same block twice:
        each reservation is a write conditional on the version of the one before."""
        path = layout.PRODUCER_ID_BLOCK_PATH
        while True:
            try:
                data, stat = self._run(lambda: self._client.get_async(path))
            except NoNodeError:
                data, stat = None, None
            start = layout.decode_producer_id_block_end(data) + 1
            value = layout.encode_producer_id_block(broker_id, start, start + size - 1)
            try:
                if stat is None:
                    self._run(lambda value=value: self._client.create_async(path, value))
                else:
                    version = stat.version
                    self._run(
                        lambda value=value, version=version: self._client.set_async(
                            path, value, version
                        )
                    )
            except (NodeExistsError, BadVersionError):
                continue  # another broker reserved a block meanwhile: take the next one
            return start, start + size

    # -- topic configs -------------------------------------------------------------------

    def topic_config(self, name: str) -> dict[str, str]:
        """The topic's configs as set (Kafka keeps only overrides of the defaults here)."""
        try:
            data, _ = self._run(lambda: self._client.get_async(layout.topic_config_path(name)))
        except NoNodeError:
            return {}
        return layout.decode_topic_config(name, data)

    def set_topic_config(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's configs (the whole set, as AlterConfigs leaves it)."""
        path = layout.topic_config_path(name)
        data = layout.encode_topic_config(configs)
        try:
            self._run(lambda: self._client.set_async(path, data))
        except NoNodeError:
            try:
                self._run(lambda: self._client.create_async(path, data))
            except NodeExistsError:
                self._run(lambda: self._client.set_async(path, data))

    def watch_topic_config(self, name: str, callback: Callable[[dict[str, str]], None]) -> Watch:
        return self._watch_data(
            layout.topic_config_path(name),
            lambda data, _stat: layout.decode_topic_config(name, data),
            callback,
        )

    # -- group configs (KIP-848) ---------------------------------------------------------

    def set_group_config(self, group: str, configs: Mapping[str, str]) -> None:
        """Replace the group's configs; none: remove its znode (the broker's defaults)."""
        path = layout.group_config_path(group)
        if not configs:
            with suppress(NoNodeError):
                self._run(lambda: self._client.delete_async(path))
            return
        data = layout.encode_topic_config(configs)
        try:
            self._run(lambda: self._client.set_async(path, data))
        except NoNodeError:
            self._ensure_path(layout.GROUP_CONFIGS_PATH)
            try:
                self._run(lambda: self._client.create_async(path, data))
            except NodeExistsError:
                self._run(lambda: self._client.set_async(path, data))

    def watch_group_configs(self, callback: Callable[[set[str]], None]) -> Watch:
        """The groups that have configs, now and at every change."""
        self._ensure_path(layout.GROUP_CONFIGS_PATH)
        return self._watch_children(
            layout.GROUP_CONFIGS_PATH,
            lambda children: callback({layout.group_of_config_node(c) for c in children}),
        )

    def watch_group_config(self, group: str, callback: Callable[[dict[str, str]], None]) -> Watch:
        path = layout.group_config_path(group)
        return self._watch_data(
            path, lambda data, _stat: layout.decode_topic_config(group, data), callback
        )

    # -- users' configs: SCRAM credentials ----------------------------------------------

    def user_configs(self) -> dict[str, dict[str, str]]:
        """Every user's config, by user name; a znode whose name or data is not a user's
        config is left out, logged."""
        children = self._run(lambda: self._client.get_children_async(layout.USER_CONFIGS_PATH))
        configs = {}
        for child in children:
            try:
                user = layout.desanitize(child)
                configs[user] = self.user_config(user)
            except (ValueError, MalformedZNode) as exc:
                logger.error("skipped the config of user znode %r: %s", child, exc)
        return configs

    def user_config(self, user: str) -> dict[str, str]:
        """The user's config ({} for none); MalformedZNode if it is not one."""
        try:
            data, _ = self._run(lambda: self._client.get_async(layout.user_config_path(user)))
        except NoNodeError:
            return {}
        return layout.decode_user_config(user, data)

    def alter_user_config(
        self, user: str, change: Callable[[dict[str, str]], dict[str, str]]
    ) -> dict[str, str]:
        """Apply `change` to the user's config and tell every broker, as Kafka's
        AdminZkClient.changeConfigs does: the config's znode and a change notification
        in /config/changes, here in one transaction conditional on the version read (read
        again and `change` applied again when another writer got in between). A config
        left empty takes its znode away unless it has children (client quotas). Returns
        the config written; what `change` raises propagates, with nothing written."""
        path = layout.user_config_path(user)
        notification = layout.encode_config_change(layout.user_config_entity_path(user))
        for _ in range(_CONFLICT_RETRIES):
            try:
                data, stat = self._run(lambda: self._client.get_async(path))
            except NoNodeError:
                data, stat = None, None
            config = change(layout.decode_user_config(user, data))
            tx = self._client.transaction()
            if stat is None:
                if not config:
                    return config
                tx.create(path, layout.encode_user_config(config))
            elif not config and stat.numChildren == 0:
                tx.delete(path, stat.version)
            else:
                tx.set_data(path, layout.encode_user_config(config), stat.version)
            tx.create(
                layout.config_change_path(layout.CONFIG_CHANGE_PREFIX), notification, sequence=True
            )
            failure = _first_failure(self._commit(tx))
            if failure is None:
                return config
            if not isinstance(
                failure, BadVersionError | NodeExistsError | NoNodeError | NotEmptyError
            ):
                raise failure
        raise StateVersionConflict(f"the config of user {user!r} kept changing while altered")

    def watch_config_changes(self, callback: Callable[[list[str]], None]) -> Watch:
        """The names of the config change notifications, now and at every change."""
        return self._watch_children(layout.CONFIG_CHANGES_PATH, callback)

    def config_change(self, name: str) -> layout.ConfigChange | None:
        """One config change notification; None once deleted. MalformedZNode if not one."""
        try:
            data, stat = self._run(lambda: self._client.get_async(layout.config_change_path(name)))
        except NoNodeError:
            return None
        return layout.ConfigChange(name, layout.decode_config_change(name, data), stat.ctime)

    def delete_config_change(self, name: str) -> None:
        """Delete a notification every broker has had time to read (every broker does so
        with the old ones, as Kafka's, so one deleted already is no error)."""
        with suppress(NoNodeError):
            self._run(lambda: self._client.delete_async(layout.config_change_path(name)))

    # -- topic deletion ------------------------------------------------------------------

    def mark_for_deletion(self, name: str) -> None:
        """Ask the controller to delete the topic; marking it twice is not an error."""
        if not self._exists(layout.topic_path(name)):
            raise UnknownTopic(f"Topic `{name}` to delete does not exist")
        with suppress(NodeExistsError):
            self._run(lambda: self._client.create_async(layout.delete_topic_path(name), None))

    def pending_deletions(self) -> set[str]:
        return set(self._run(lambda: self._client.get_children_async(layout.DELETE_TOPICS_PATH)))

    def watch_pending_deletions(self, callback: Callable[[set[str]], None]) -> Watch:
        return self._watch_children(
            layout.DELETE_TOPICS_PATH, lambda children: callback(set(children))
        )

    def complete_deletion(self, name: str, *, controller_epoch_version: int | None = None) -> None:
        """Remove the topic's znodes, its config and its deletion mark, in one transaction
        (conditional on the controller epoch when given)."""
        for _ in range(3):
            paths = self._subtree(layout.topic_path(name))
            tx = self._client.transaction()
            if controller_epoch_version is not None:
                tx.check(layout.CONTROLLER_EPOCH_PATH, controller_epoch_version)
            for path in reversed(paths):
                tx.delete(path)
            for path in (layout.topic_config_path(name), layout.delete_topic_path(name)):
                if self._exists(path):
                    tx.delete(path)
            failure = _first_failure(self._commit(tx))
            if failure is None:
                return
            if isinstance(failure, BadVersionError):
                raise ControllerMoved("/controller_epoch moved on: no longer the controller")
            if not isinstance(failure, NoNodeError | NotEmptyError):
                raise failure
        raise StateVersionConflict(f"the znodes of topic '{name}' kept changing while deleted")

    # -- log directory events ------------------------------------------------------------

    def propagate_log_dir_event(self, broker_id: int, event: LogDirEvent) -> str:
        """Tell the controller that this broker's log directory failed or writes again: a
        persistent sequential znode, as Kafka's propagateLogDirEvent writes it; returns its
        name. One written twice (an answer lost with the connection) says the same twice."""
        prefix = layout.log_dir_event_path(layout.LOG_DIR_EVENT_PREFIX)
        data = layout.encode_log_dir_event(broker_id, event)
        path = self._run(lambda: self._client.create_async(prefix, data, sequence=True))
        return str(path).rpartition("/")[2]

    def log_dir_event_names(self) -> list[str]:
        """The names of the log directory events not yet handled, oldest first."""
        children = self._run(
            lambda: self._client.get_children_async(layout.LOG_DIR_EVENT_NOTIFICATION_PATH)
        )
        # The sequence numbers are zero-padded to one width: their text order is theirs.
        return sorted(c for c in children if c.startswith(layout.LOG_DIR_EVENT_PREFIX))

    def log_dir_event(self, name: str) -> LogDirNotification | None:
        """One log directory event; None once deleted. MalformedZNode if it is not one."""
        try:
            data, stat = self._run(lambda: self._client.get_async(layout.log_dir_event_path(name)))
        except NoNodeError:
            return None
        broker_id, event = layout.decode_log_dir_event(name, data)
        return LogDirNotification(name, broker_id, event, stat.czxid)

    def watch_log_dir_events(self, callback: Callable[[list[str]], None]) -> Watch:
        return self._watch_children(layout.LOG_DIR_EVENT_NOTIFICATION_PATH, callback)

    def delete_log_dir_events(self, names: list[str], controller_epoch_version: int) -> None:
        """Delete handled log directory events, in one transaction conditional on the
        controller epoch (ControllerMoved if it moved on); ones gone already are skipped."""
        remaining = list(names)
        while remaining:
            tx = self._client.transaction()
            tx.check(layout.CONTROLLER_EPOCH_PATH, controller_epoch_version)
            for name in remaining:
                tx.delete(layout.log_dir_event_path(name))
            results = self._commit(tx)
            index = _failed_index(results)
            if index is None:
                return
            if index == 0:
                raise ControllerMoved("/controller_epoch moved on while deleting log dir events")
            if not isinstance(results[index], NoNodeError):
                raise results[index]
            del remaining[index - 1]  # deleted by an earlier controller

    # -- ACLs ----------------------------------------------------------------------------

    def create_acl_paths(self) -> None:
        """The znodes ACLs and their change notifications go under, as Kafka's brokers
        create them at start (KafkaZkClient.createAclPaths)."""
        for path in acl_layout.paths_to_create():
            self._ensure_path(path)

    def all_acls(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every pattern's ACLs (Kafka's loadAllAcls); znodes that are not ACLs, or of
        resource types Kafka would ignore, are logged and left out."""
        found: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        for pattern_type in acl_layout.STORED_PATTERN_TYPES:
            root = acl_layout.acls_root(pattern_type)
            try:
                type_names = self._run(lambda r=root: self._client.get_children_async(r))
            except NoNodeError:
                continue
            for type_name in sorted(type_names):
                resource_type = acl_layout.resource_type_of_path_name(type_name)
                if resource_type is None:
                    logger.warning("ignoring ACLs of unknown resource type %s/%s", root, type_name)
                    continue
                parent = acl_layout.resource_type_path(pattern_type, resource_type)
                try:
                    names = self._run(lambda p=parent: self._client.get_children_async(p))
                except NoNodeError:
                    continue
                for name in sorted(names):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    try:
                        versioned = self.resource_acls(pattern)
                    except MalformedZNode as exc:
                        logger.error("ignoring ACLs that cannot be read: %s", exc)
                        continue
                    if versioned is not None and versioned.value:
                        found[pattern] = versioned.value
        return found

    def resource_acls(
        self, pattern: ResourcePattern
    ) -> Versioned[frozenset[AccessControlEntry]] | None:
        """A pattern's ACLs and its znode's version; None if it has no znode."""
        path = acl_layout.resource_path(pattern)
        try:
            data, stat = self._run(lambda: self._client.get_async(path))
        except NoNodeError:
            return None
        return Versioned(acl_layout.decode_acls(pattern, data), stat.version)

    def update_resource_acls(
        self,
        pattern: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
        attempts: int = 10,
    ) -> tuple[frozenset[AccessControlEntry], frozenset[AccessControlEntry]]:
        """Apply `change` to the pattern's ACLs as ZooKeeper holds them, with a write
        conditional on the version read (re-read and re-applied when another broker
        wrote meanwhile, so neither loses the other's ACLs), then announce the change
        to every broker. Returns the ACLs before and after; a pattern left without ACLs
        loses its znode. StateVersionConflict after `attempts` lost races."""
        path = acl_layout.resource_path(pattern)
        for _ in range(attempts):
            current = self.resource_acls(pattern)
            before = current.value if current is not None else frozenset()
            after = frozenset(change(before))
            if after == before:
                return before, after
            if self._write_acls(path, current, after):
                self._announce_acl_change(pattern)
                return before, after
        raise StateVersionConflict(f"{path} kept changing: gave up after {attempts} attempts")

    def _write_acls(
        self,
        path: str,
        current: Versioned[frozenset[AccessControlEntry]] | None,
        acls: frozenset[AccessControlEntry],
    ) -> bool:
        """Write a pattern's ACLs if its znode is still as read; False if it is not."""
        data = acl_layout.encode_acls(acls)
        try:
            if current is None:
                self._run(lambda: self._client.create_async(path, data))
            elif not acls:
                self._run(lambda: self._client.delete_async(path, current.version))
            else:
                self._run(lambda: self._client.set_async(path, data, current.version))
        except NoNodeError:
            if current is None:  # the resource type's znode is missing
                self._ensure_path(path.rpartition("/")[0])
            return False
        except (BadVersionError, NodeExistsError):
            return False
        return True

    def _announce_acl_change(self, pattern: ResourcePattern) -> None:
        prefix = f"{acl_layout.changes_path(pattern.pattern_type)}/{acl_layout.CHANGE_PREFIX}"
        data = acl_layout.encode_change(pattern)
        self._run(lambda: self._client.create_async(prefix, data, sequence=True))

    def watch_acl_changes(self, changes_root: str, callback: Callable[[list[str]], None]) -> Watch:
        """The names of the change notifications under one of the two change paths, now
        and at every change."""
        return self._watch_children(changes_root, callback)

    def acl_change(self, changes_root: str, name: str) -> ResourcePattern | None:
        """The pattern a change notification names; None once deleted. MalformedZNode if
        it names none."""
        try:
            data, _ = self._run(lambda: self._client.get_async(f"{changes_root}/{name}"))
        except NoNodeError:
            return None
        return acl_layout.decode_change(changes_root, name, data)

    def purge_acl_changes(self, changes_root: str, names: list[str]) -> None:
        """Delete the notifications older than Kafka's 15 minutes, by their creation time
        (ZooKeeper's clock), as each Kafka broker does after reading notifications."""
        oldest = _now_ms() - acl_layout.CHANGE_EXPIRATION_MS
        for name in names:
            path = f"{changes_root}/{name}"
            stat = self._run(lambda p=path: self._client.exists_async(p))
            if stat is not None and stat.ctime < oldest:
                with suppress(NoNodeError):
                    self._run(lambda p=path: self._client.delete_async(p))

    # -- internals -----------------------------------------------------------------------

    def _run(self, request: Callable[[], IAsyncResult], timeout: float | None = None) -> Any:
        """Send one request and wait for its answer; an answer, error codes included,
        proves the session alive when the request was sent (see the module's notes)."""
        sent = self._lease.sending(self.session_id)
        try:
            result = request().get(timeout=self._request_timeout if timeout is None else timeout)
        except self._client.handler.timeout_exception:
            raise ClusterUnavailable(
                f"ZooKeeper at {self.connect_string} did not answer within "
                f"{self._request_timeout if timeout is None else timeout}s"
            ) from None
        except SessionClosedRequireSaslError:
            raise _sasl_required(self.connect_string) from None
        except (ConnectionClosedError, AuthFailedError) as exc:
            if self._client.sasl_failure is not None:
                raise ZooKeeperAuthenticationFailed(self._client.sasl_failure) from None
            raise ClusterUnavailable(f"the ZooKeeper session is closed: {exc}") from None
        except _CONNECTION_ERRORS as exc:
            raise ClusterUnavailable(
                f"lost ZooKeeper at {self.connect_string}: {type(exc).__name__}"
            ) from None
        except Exception:
            self._lease.answered(sent, self.session_id)
            raise
        self._lease.answered(sent, self.session_id)
        return result

    def _commit(self, tx: TransactionRequest) -> list[Any]:
        return self._run(tx.commit_async)

    def _on_kazoo_state(self, state: str) -> None:
        # On kazoo's connection thread: quick, no requests.
        if state == KazooState.LOST:
            self._lease.lost()

    def _hook_negotiated_timeout(self) -> None:
        # Kazoo keeps the session timeout the server granted to itself, deriving its
        # read timeout as two thirds of it; the lease needs the granted one, which the
        # server may have lowered below what was asked.
        connection = getattr(self._client, "_connection", None)
        original = getattr(connection, "_connect", None)
        if original is None:
            raise RuntimeError("this kazoo version does not expose its connection handler")

        def connect(*args: Any) -> tuple[float, float]:
            read_timeout_ms, connect_timeout_ms = original(*args)
            self._lease.session_timeout = read_timeout_ms * 1.5 / 1000
            return read_timeout_ms, connect_timeout_ms

        connection._connect = connect  # type: ignore[union-attr]

    def _ensure_path(self, path: str) -> None:
        """Create path and its missing parents with no data, as Kafka's createRecursive
        does (kazoo's ensure_path would write empty data instead of none)."""
        for prefix in _prefixes(path):
            with suppress(NodeExistsError):
                self._run(lambda p=prefix: self._client.create_async(p, None))

    def _exists(self, path: str) -> bool:
        return self._run(lambda: self._client.exists_async(path)) is not None

    def _broker_ids(self) -> list[int]:
        children = self._run(lambda: self._client.get_children_async(layout.BROKER_IDS_PATH))
        return _broker_ids(children)

    def _subtree(self, root: str) -> list[str]:
        """root and its descendants, parents before children; [] if root is gone."""
        try:
            children = self._run(lambda: self._client.get_children_async(root))
        except NoNodeError:
            return []
        paths = [root]
        for child in sorted(children):
            paths.extend(self._subtree(f"{root}/{child}"))
        return paths

    def _create_parents(self, topic: str, partitions: list[int]) -> None:
        """The data-less znodes above partition states. Kazoo's transactions cannot create
        a znode without data, so these are created one by one and without the controller
        epoch check: a stale controller can add no more than an empty znode under a topic
        that still exists, and decides nothing by it."""
        for path in [layout.partitions_path(topic)] + [
            layout.partition_path(topic, p) for p in partitions
        ]:
            try:
                self._run(lambda p=path: self._client.create_async(p, None))
            except NodeExistsError:
                pass
            except NoNodeError:
                raise UnknownTopic(f"The topic '{topic}' does not exist.") from None

    def _conditional_set(
        self,
        path: str,
        data: bytes,
        expected_version: int,
        controller_epoch_version: int | None,
    ) -> ZnodeStat | None:
        """set_data at expected_version, with the controller epoch check when given;
        None if the znode does not exist."""
        tx = self._client.transaction()
        if controller_epoch_version is not None:
            tx.check(layout.CONTROLLER_EPOCH_PATH, controller_epoch_version)
        tx.set_data(path, data, expected_version)
        results = self._commit(tx)
        if (
            isinstance(_first_failure(results), NoNodeError)
            and _failed_index(results) == len(results) - 1
        ):
            return None
        _check_committed(
            results,
            f"writing {path} at version {expected_version}",
            epoch_checked=controller_epoch_version is not None,
        )
        return results[-1]

    def _watch_children(self, path: str, deliver: Callable[[list[str]], None]) -> Watch:
        watch = Watch()
        guarded = _guarded(deliver)

        def on_children(children: list[str]) -> bool | None:
            if watch.cancelled:
                return False
            guarded(children)
            return None

        ChildrenWatch(self._client, path, on_children)
        return watch

    def _watch_data(
        self,
        path: str,
        decode: Callable[[bytes | None, ZnodeStat | None], T],
        callback: Callable[[T], None],
    ) -> Watch:
        watch = Watch()
        guarded = _guarded(callback)

        def on_data(data: bytes | None, stat: ZnodeStat | None) -> bool | None:
            if watch.cancelled:
                return False
            try:
                value = decode(data if stat is not None else None, stat)
            except MalformedZNode as exc:
                logger.error("watch on %s skipped a change: %s", path, exc)
                return None
            guarded(value)
            return None

        DataWatch(self._client, path, on_data)
        return watch


class _KafkaZkClient(KazooClient):
    """A kazoo client that logs in as `security` says and creates every znode with the
    ACLs znode_acls chooses for its path, transactions included."""

    def __init__(self, hosts: str, session_timeout: float, security: ZooKeeperSecurity) -> None:
        login = security.login
        super().__init__(
            hosts=hosts,
            timeout=session_timeout,
            # Retry a lost connection often: the session may still be saved within its
            # timeout.
            connection_retry={"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 1.0},
            sasl_options=None if login is None else login.sasl_options(),
        )
        self.hosts_given = hosts
        self.secure_acls = security.set_acl
        self.login = login
        # Set once the first SASL login is over, with why it failed if it did.
        self.sasl_over = threading.Event()
        self.sasl_failure: str | None = None
        if login is not None:
            self._hook_sasl()

    def acls(self, path: str) -> list[ACL]:
        return znode_acls.default_acls(path, self.secure_acls)

    def create_async(  # type: ignore[override]
        self,
        path: str,
        value: bytes | None = b"",
        acl: list[ACL] | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> IAsyncResult:
        return super().create_async(path, value, acl or self.acls(path), *args, **kwargs)

    def transaction(self) -> TransactionRequest:
        return _KafkaZkTransaction(self)

    def _hook_sasl(self) -> None:
        # Kazoo reports a session as connected before its SASL login, and a login that
        # ZooKeeper refuses by closing the session ends kazoo's connection thread with a
        # traceback. This records how each login ended, and turns a refusal into
        # kazoo's AuthFailedError: the session ends, quietly and for good.
        connection = self._connection
        original = connection._authenticate_with_sasl
        assert self.login is not None
        username, hosts = self.login.username, self.hosts_given

        def authenticate(host: str, timeout: float) -> None:
            try:
                original(host, timeout)
            except (SASLException, ZookeeperError) as exc:  # AuthFailedError among them
                self.sasl_failure = (
                    f"ZooKeeper at {hosts} {_REFUSED} {username!r}"
                    f" ({type(exc).__name__}): check the password in the JAAS file's"
                    " section for ZooKeeper, and that ZooKeeper has this user"
                )
                self.sasl_over.set()
                raise AuthFailedError(self.sasl_failure) from None
            self.sasl_failure = None
            self.sasl_over.set()

        connection._authenticate_with_sasl = authenticate


class _KafkaZkTransaction(TransactionRequest):
    client: _KafkaZkClient

    def create(  # type: ignore[override]
        self,
        path: str,
        value: bytes | None = b"",
        acl: list[ACL] | None = None,
        ephemeral: bool = False,
        sequence: bool = False,
    ) -> None:
        super().create(path, value, acl or self.client.acls(path), ephemeral, sequence)


def _start(client: _KafkaZkClient, connect_timeout: float, address: str) -> None:
    deadline = time.monotonic() + connect_timeout
    try:
        client.start(timeout=connect_timeout)
    except client.handler.timeout_exception:
        client.stop()
        client.close()
        raise ClusterUnavailable(
            f"could not connect to ZooKeeper at {address} within {connect_timeout}s"
        ) from None
    if client.login is None:
        return
    client.sasl_over.wait(max(0.0, deadline - time.monotonic()))
    if client.sasl_failure is not None or not client.sasl_over.is_set():
        client.stop()
        client.close()
        if client.sasl_failure is not None:
            raise ZooKeeperAuthenticationFailed(client.sasl_failure)
        raise ClusterUnavailable(
            f"the SASL login to ZooKeeper at {address} did not finish within {connect_timeout}s"
        )


@contextmanager
def _client(
    hosts: str,
    session_timeout: float,
    connect_timeout: float,
    address: str,
    security: ZooKeeperSecurity,
) -> Iterator[KazooClient]:
    client = _KafkaZkClient(hosts, session_timeout, security)
    _start(client, connect_timeout, address)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _sasl_required(address: str) -> ZooKeeperAuthenticationFailed:
    return ZooKeeperAuthenticationFailed(
        f"ZooKeeper at {address} takes only SASL logins: name a JAAS file with a Client"
        " section (java.security.auth.login.config) to log in with"
    )


class _ReportedByTheStore(logging.Filter):
    """Leaves out kazoo's own line about a SASL login that a ClusterStore refused: the
    store raises ZooKeeperAuthenticationFailed saying the same."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.msg == "AUTH_FAILED closing: %s" and _REFUSED in str(record.args or ""))


_REFUSED = "refused the SASL login of"
logging.getLogger("kazoo.client").addFilter(_ReportedByTheStore())


def _prefixes(path: str) -> list[str]:
    parts = [part for part in path.split("/") if part]
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _first_failure(results: list[Any]) -> Exception | None:
    index = _failed_index(results)
    return None if index is None else results[index]


def _failed_index(results: list[Any]) -> int | None:
    for index, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(result, _ROLLED_BACK):
            return index
    return None


def _check_committed(results: list[Any], doing: str, *, epoch_checked: bool) -> None:
    """Raise what a failed transaction means. Where there is a controller epoch check it
    is the first operation, so its failure means the controller moved."""
    index = _failed_index(results)
    if index is None:
        return
    failure = results[index]
    if epoch_checked and index == 0:
        raise ControllerMoved(f"/controller_epoch moved on while {doing}") from failure
    if isinstance(failure, BadVersionError | NodeExistsError | NoNodeError):
        raise StateVersionConflict(f"{type(failure).__name__} while {doing}") from failure
    raise failure


def _versioned(stat: ZnodeStat | None, decode: Callable[[], T]) -> Versioned[T] | None:
    return None if stat is None else Versioned(decode(), stat.version)


def _broker_ids(children: list[str]) -> list[int]:
    return sorted(int(child) for child in children if child.isascii() and child.isdigit())


def _address_of(broker_id: int, data: bytes | None) -> str:
    try:
        registration = layout.decode_broker(broker_id, data)
    except MalformedZNode:
        return "an unknown address"
    return f"{registration.host}:{registration.port}"


def _guarded(callback: Callable[[T], None]) -> Callable[[T], None]:
    """A callback that logs its exceptions instead of raising them into kazoo's threads."""

    def call(value: T) -> None:
        try:
            callback(value)
        except Exception:
            logger.exception("cluster store callback %r failed", callback)

    return call


def _now_ms() -> int:
    """The wall clock: the time written into a broker's or the controller's znode, as
    Kafka writes it, for people and other brokers to read."""
    return int(time.time() * 1000)
