"""This broker as a member of a ZooKeeper cluster.

It holds the ZooKeeper session: registers the broker (an ephemeral node),
keeps the session lease fresh, and turns ZooKeeper's watches into the
cluster metadata view and into local replicas: a partition this broker is
assigned gets a local log, then leads or follows it as the partition's state
says, with one fetcher per leader it follows. It also runs this broker's
candidacy for controller. Watches fire on kazoo's thread; everything they
change is handed to the event loop and applied there, in order.

When the data directory fails, every local replica goes offline and the
controller is told with a log directory event; nothing is written to the
directory until it writes again (log_dir_failed, log_dir_writes_again,
resume_replicas; broker/logs/log_dir_failure.py decides when).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

from herdless.broker.config import BrokerConfig
from herdless.broker.network.peer import PeerSecurity
from herdless.broker.producer_ids import ProducerIds
from herdless.broker.replication.cluster_replica_manager import (
    ClusterReplicaManager,
    Partition,
    Role,
)
from herdless.broker.replication.durability import Durability
from herdless.broker.replication.fetcher import ReplicaFetcher
from herdless.cluster.controller import Controller
from herdless.cluster.errors import (
    BrokerIdInUse,
    ClusterError,
    ClusterUnavailable,
    StateVersionConflict,
)
from herdless.cluster.layout import (
    BrokerRegistration,
    LogDirEvent,
    PartitionState,
    TopicAssignment,
    Versioned,
)
from herdless.cluster.metadata import BrokerEndpoint
from herdless.cluster.metadata_cache import ClusterMetadata
from herdless.cluster.rereads import Reread
from herdless.cluster.store import ClusterStore, SessionState, Watch
from herdless.cluster.zookeeper_calls import zookeeper_call
from herdless.security.listeners import Endpoint
from herdless.storage import LogConfig, LogManager, PartitionLog, StorageError, StorageIOError

log = logging.getLogger(__name__)

# How long one step of leaving the cluster (resigning, closing the session) may take.
STOP_STEP_TIMEOUT_S = 5.0
# Between two tries to write a log directory event while ZooKeeper does not answer.
LOG_DIR_EVENT_RETRY_S = 0.5
# Between two looks at whether the controller has acted on a log directory event.
LOG_DIR_EVENT_POLL_S = 0.05


class ClusterNode:
    def __init__(
        self,
        config: BrokerConfig,
        logs: LogManager,
        durability: Durability,
        metadata: ClusterMetadata,
        clock: Callable[[], int],
        peer_security: PeerSecurity | None = None,
    ) -> None:
        self.config = config
        # How replica fetchers connect and log in to leaders.
        self._peer_security = peer_security
        self.node_id = config.node_id
        self.logs = logs
        self.metadata = metadata
        self._durability = durability
        self._clock = clock
        self.store: ClusterStore | None = None
        self.controller: Controller | None = None
        self.replicas = ClusterReplicaManager(
            logs,
            durability,
            clock,
            config.node_id,
            metadata,
            self.lease_valid,
            self._write_isr,
            config.replica_lag_time_max_ms,
        )
        self.replicas.on_role_change = self._on_role_change
        metadata.vouch_for_self(config.node_id, self.lease_valid)
        self.producer_ids = ProducerIds(self._reserve_producer_ids)
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._topic_watches: dict[str, list[Watch]] = {}
        self._partition_watches: dict[tuple[str, int], Watch] = {}
        # Whether the topic names watch has delivered the names once.
        self._topic_names_known = False
        self._watches: list[Watch] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._jobs: set[asyncio.Task[None]] = set()
        self._registration: BrokerRegistration | None = None
        # The ZooKeeper session this broker is registered in; None while it is not.
        self._session: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._live_brokers = Reread(
            "the live brokers", self._read_brokers, self._apply_brokers, (ClusterError,)
        )
        # Told when this broker's role for a partition changes: leader, follower, or
        # none (the group coordinator's shards follow __consumer_offsets leadership).
        self.leadership_listeners: list[Callable[[str, int, Role | None], None]] = []
        # Told when a followed partition's log or high watermark moved (the group
        # coordinator's standby shards replay what became committed).
        self.replication_listeners: list[Callable[[PartitionLog], None]] = []
        # The log directory event the controller is yet to be told, how many have been
        # asked for, and the task telling it.
        self._log_dir_event: LogDirEvent | None = None
        self._log_dir_asks = 0
        self._last_log_dir_event: str | None = None
        self._telling: asyncio.Task[None] | None = None
        # Topics whose configs changed while the data directory was offline.
        self._configs_changed_offline: set[str] = set()
        # While the data directory is offline: the leader epoch of each partition this
        # broker was last seen elected to lead in (it tells the controller once for each).
        self._elected_while_offline: dict[tuple[str, int], int] = {}
        # Between telling the controller the directory writes again and taking the replicas
        # back: an election of this broker meanwhile is the controller acting on that.
        self._announcing_online = False

    # -- lifecycle -----------------------------------------------------------------

    async def connect(self) -> str:
        """Open the ZooKeeper session; returns the cluster id. ClusterError if it can't."""
        self._loop = asyncio.get_running_loop()
        timeout_s = self.config.zookeeper_session_timeout_ms / 1000
        self.store = await zookeeper_call(
            functools.partial(
                ClusterStore,
                self.config.zookeeper_connect,
                session_timeout=timeout_s,
                connect_timeout=self.config.zookeeper_connection_timeout_ms / 1000,
                security=self.config.zookeeper_security(),
            )
        )
        deadline = time.monotonic() + self.config.zookeeper_connection_timeout_ms / 1000
        while True:
            try:
                return await zookeeper_call(self.store.cluster_id)
            except ClusterUnavailable:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(0.25)

    async def join(self, endpoints: list[Endpoint]) -> None:
        """Register this broker, with its advertised listeners, and start following the
        cluster's state. Its host and port are its inter-broker listener's."""
        store = self._store()
        inter_broker = self.config.inter_broker_listener()
        own = next(e for e in endpoints if e.listener == inter_broker)
        host, port = own.host, own.port
        self._registration = BrokerRegistration(
            self.node_id, host, port, self.config.rack, tuple(endpoints)
        )
        await self._register(self._registration)
        self._session = store.session_id
        log.info("registered as broker %d at %s:%d in ZooKeeper", self.node_id, host, port)
        await zookeeper_call(store.renew_lease)
        loop = self._loop
        assert loop is not None
        # Setting a watch reads its znode at once (and calls back in this thread), so
        # watches are set in worker threads, never on the loop.
        self._watches = [
            store.add_session_listener(lambda state: self._later(self._on_session, state)),
            await zookeeper_call(
                store.watch_brokers, lambda _: self._later(self._live_brokers.changed)
            ),
            await zookeeper_call(
                store.watch_controller, lambda node: self._later(self._on_controller, node)
            ),
            await zookeeper_call(
                store.watch_topic_names,
                lambda names: self._later(self._on_topic_names, names),
            ),
        ]
        self.controller = Controller(store, self.node_id, self._unclean_election)
        await zookeeper_call(self.controller.set_watches)
        self.controller.start()
        self._tasks = [
            loop.create_task(self._renew_lease_forever()),
            loop.create_task(self._shrink_isr_forever()),
        ]

    def caught_up(self) -> bool:
        """Whether the metadata view has what ZooKeeper held when this broker joined: the
        live brokers (this one among them), and every topic with its partitions' states."""
        if not self._topic_names_known or not self.metadata.is_live(self.node_id):
            return False
        for name, watches in self._topic_watches.items():
            assignment = self.metadata.assignment(name)
            # Both of a topic's watches set (config, then assignment) have delivered.
            if len(watches) < 2 or assignment is None:
                return False
            if any((name, p) not in self._partition_watches for p in assignment.replicas):
                return False
        return True

    async def wait_caught_up(self, timeout_s: float) -> bool:
        """Return once caught_up() (the watches set in join() deliver within moments), or
        False after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while not self.caught_up():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    async def _register(self, registration: BrokerRegistration) -> None:
        """Register, waiting out the session of a previous life of this broker, and
        riding out a ZooKeeper that is restarting.

        A broker restarted right after a crash finds its old registration still
        there until that session expires. If the registration names this broker's own
        address, it is a previous life (this process listens there now, so no other
        broker can): wait for its session to expire, however slow ZooKeeper is about
        it, up to three session timeouts plus the connection timeout. Another address
        may be a live broker with the same id: wait one and a half session timeouts,
        then refuse. A ZooKeeper that drops the connection meanwhile is retried until
        zookeeper.connection.timeout.ms has passed.
        """
        store = self._store()
        loop = asyncio.get_running_loop()
        started = loop.time()
        session_s = self.config.zookeeper_session_timeout_ms / 1000
        connection_s = self.config.zookeeper_connection_timeout_ms / 1000
        waiting = False
        while True:
            try:
                await zookeeper_call(store.register_broker, registration)
                return
            except BrokerIdInUse as exc:
                try:
                    holders = await zookeeper_call(store.live_brokers)
                except ClusterError:
                    holders = {}
                holder = holders.get(registration.broker_id)
                ours = holder is not None and (holder.host, holder.port) == (
                    registration.host,
                    registration.port,
                )
                patience = 3 * session_s + connection_s if ours else 1.5 * session_s
                if loop.time() >= started + patience:
                    raise
                if not waiting:
                    log.info("%s; waiting for its session to expire", exc)
                    waiting = True
            except ClusterUnavailable as exc:
                if loop.time() >= started + connection_s:
                    raise
                log.info("registering in ZooKeeper: %s; retrying", exc)
            await asyncio.sleep(0.25)

    async def stop(self) -> None:
        telling = [t for t in (self._telling, self._live_brokers.task) if t is not None]
        for task in [*self._tasks, *self._jobs, *telling]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._jobs, *telling, return_exceptions=True)
        for fetcher in self._fetchers.values():
            await fetcher.stop()
        if self.controller is not None:
            # Resigning is a courtesy (the session's end removes /controller too):
            # a ZooKeeper that does not answer must not hold the shutdown.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STOP_STEP_TIMEOUT_S):
                    await self.controller.stop()
        for watch in [*self._watches, *self._partition_watches.values()]:
            watch.cancel()
        for watches in self._topic_watches.values():
            for watch in watches:
                watch.cancel()
        # Lead nothing from here on, then end the session: the ephemeral registration
        # goes at once and the controller moves leadership without waiting for a timeout.
        self.replicas.resign_all()
        if self.store is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STOP_STEP_TIMEOUT_S):
                    await zookeeper_call(self.store.close)

    def connected_store(self) -> ClusterStore:
        assert self.store is not None, "connect() first"
        return self.store

    _store = connected_store

    async def _reserve_producer_ids(self, size: int) -> tuple[int, int]:
        return await zookeeper_call(self._store().reserve_producer_id_block, self.node_id, size)

    def _later(self, function: Callable[..., Any], *args: Any) -> None:
        """From a kazoo thread: run `function(*args)` on the event loop, in order."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(function, *args)

    # -- the session lease ------------------------------------------------------------

    def lease_valid(self) -> bool:
        """Whether this broker may act as a leader now: its session is provably alive,
        and it is the session the broker registered (and learned its leadership) in.

        The second half matters after a session expired: kazoo opens a new one at
        once and renewals prove it alive, possibly before the loss has been handled
        here (every partition resigned); until this broker has registered again in
        the new session, it leads nothing."""
        store = self.store
        return (
            store is not None
            and self._session is not None
            and store.session_id == self._session
            and time.monotonic() < store.lease_deadline()
        )

    async def _renew_lease_forever(self) -> None:
        # Renewing several times per session timeout keeps the lease well ahead of now.
        interval_s = self.config.zookeeper_session_timeout_ms / 1000 / 6
        store = self._store()
        while True:
            await zookeeper_call(store.renew_lease, interval_s)
            await asyncio.sleep(interval_s)

    def _on_session(self, state: SessionState) -> None:
        if state is SessionState.LOST:
            log.warning("ZooKeeper session lost: leading nothing until registered again")
            self._session = None
            self.replicas.resign_all()
            if self.controller is not None:
                self.controller.session_lost()
        elif state is SessionState.CONNECTED and self._registration is not None:
            assert self._loop is not None
            self._loop.create_task(self._register_again())

    async def _register_again(self) -> None:
        assert self._registration is not None
        if self._session is not None and self._session == self._store().session_id:
            return  # reconnected within the same session: still registered
        try:
            await self._register(self._registration)
        except ClusterError as exc:
            log.error("could not register again in ZooKeeper: %s", exc)
            return
        self._session = self._store().session_id
        if self._reports_failure():
            # A new broker epoch: the controller forgot what the old one said.
            self._tell_controller(LogDirEvent.FAILURE)
        # Watches that did not fire kept their old values: read every state again.
        self._live_brokers.changed()
        for name in list(self._topic_watches):
            await self._reread_topic(name)

    async def _reread_topic(self, name: str) -> None:
        store = self._store()
        try:
            found = await zookeeper_call(store.topic, name)
            self._on_topic(name, found)
            if found is None:
                return
            for partition in found.value.replicas:
                state = await zookeeper_call(store.get_partition_state, name, partition)
                self._on_partition_state(name, partition, state)
        except ClusterError as exc:
            # The watches deliver whatever changed once ZooKeeper answers again.
            log.warning("could not read topic %s again: %s", name, exc)

    # -- watches, on the loop ----------------------------------------------------------

    async def _read_brokers(self) -> dict[int, BrokerRegistration]:
        return await zookeeper_call(self._store().live_brokers)

    def _apply_brokers(self, brokers: dict[int, BrokerRegistration]) -> None:
        self.metadata.set_brokers(list(brokers.values()))
        # A follower waits for its leader's address; it may have just registered.
        for partition in list(self.replicas.partitions.values()):
            if partition.role is Role.FOLLOWER:
                self._on_role_change(partition, partition.key)

    def _on_controller(self, node_id: int | None) -> None:
        self.metadata.controller_id = -1 if node_id is None else node_id
        if node_id is not None and self._reports_failure():
            # A new controller knows nothing of the events its predecessor handled.
            self._tell_controller(LogDirEvent.FAILURE)

    def _on_topic_names(self, names: set[str]) -> None:
        self._topic_names_known = True
        for name in names - set(self._topic_watches):
            self._topic_watches[name] = []
            self._background(self._watch_topic(name))
        for name in set(self._topic_watches) - names:
            self._on_topic(name, None)

    async def _watch_topic(self, name: str) -> None:
        # The config first: a replica's log is opened with it when the assignment comes.
        store = self._store()
        watches = self._topic_watches.get(name)
        if watches is None:
            return
        watches.append(
            await zookeeper_call(
                store.watch_topic_config,
                name,
                lambda configs: self._later(self._on_topic_config, name, configs),
            )
        )
        watches.append(
            await zookeeper_call(
                store.watch_topic, name, lambda found: self._later(self._on_topic, name, found)
            )
        )

    async def _watch_partitions(self, name: str, partitions: list[int]) -> None:
        store = self._store()
        for partition in partitions:
            key = (name, partition)
            if key in self._partition_watches or name not in self._topic_watches:
                continue
            self._partition_watches[key] = await zookeeper_call(
                store.watch_partition_state,
                name,
                partition,
                lambda state, key=key: self._later(self._on_partition_state, *key, state),
            )

    def _background(self, job: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None
        task = self._loop.create_task(job)
        self._jobs.add(task)
        task.add_done_callback(self._job_done)

    def _job_done(self, task: asyncio.Task[None]) -> None:
        self._jobs.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("cluster watch job failed", exc_info=task.exception())

    def _on_topic_config(self, name: str, configs: dict[str, str]) -> None:
        self.metadata.set_topic_configs(name, configs)
        if self.replicas.offline:
            self._configs_changed_offline.add(name)
        elif name in self.logs.topics:
            try:
                self.logs.alter_topic_configs(name, configs, replace=True)
            except StorageIOError as exc:
                # The data directory fails: applied once it writes again.
                self._configs_changed_offline.add(name)
                self.logs.on_io_error("configs", f"topic {name}", exc)
            except StorageError as exc:
                log.error("topic %s: cannot apply configs %s: %s", name, configs, exc)

    def _on_topic(self, name: str, found: Versioned[TopicAssignment] | None) -> None:
        if found is None:
            self._forget_topic(name)
            return
        assignment = found.value
        self.metadata.set_topic(name, assignment)
        unwatched = [p for p in assignment.replicas if (name, p) not in self._partition_watches]
        if unwatched:
            self._background(self._watch_partitions(name, unwatched))
        for partition in assignment.replicas:
            self._sync_partition(name, partition)

    def _forget_topic(self, name: str) -> None:
        for watch in self._topic_watches.pop(name, []):
            watch.cancel()
        for key in [k for k in self._partition_watches if k[0] == name]:
            self._partition_watches.pop(key).cancel()
            self.replicas.stop_replica(*key)
        self.metadata.set_topic(name, None)
        if not self.replicas.offline:
            # Else once the data directory writes again (resume_replicas).
            self._delete_local_topic(name)

    def _delete_local_topic(self, name: str) -> None:
        if name in self.logs.topics:
            for partition_log in self.logs.topics[name].partitions.values():
                self.replicas.forget(partition_log)
            try:
                self.logs.delete_topic(name)
            except StorageIOError as exc:
                # The data directory fails: deleted once it writes again (resume_replicas).
                self.logs.on_io_error("deletion", f"topic {name}", exc)
                return
            log.info("deleted the local replicas of topic %s", name)

    def _on_partition_state(
        self, topic: str, partition: int, state: Versioned[PartitionState] | None
    ) -> None:
        if self.metadata.assignment(topic) is None:
            return  # the topic went meanwhile
        self.metadata.set_partition_state(topic, partition, state)
        self._sync_partition(topic, partition)

    def _sync_partition(self, topic: str, partition: int) -> None:
        """Make the local replica what the metadata says: hosted or not, leader or follower."""
        assignment = self.metadata.assignment(topic)
        if assignment is None or partition not in assignment.replicas:
            return
        replicas = assignment.replicas[partition]
        if self.replicas.offline:
            self._check_elected_while_offline(topic, partition)
            return  # nothing is written to a failed data directory
        try:
            if self.node_id not in replicas:
                if self.logs.partition(topic, partition) is not None:
                    self.replicas.stop_replica(topic, partition)
                    self.logs.drop_partition(topic, partition)
                return
            partition_log = self._local_log(assignment, partition)
        except StorageIOError as exc:
            # The data directory fails: synced again once it writes again (resume_replicas).
            self.logs.on_io_error("hosting", f"{topic}-{partition}", exc)
            return
        except StorageError as exc:
            log.error("%s-%d: cannot open its local replica: %s", topic, partition, exc)
            return
        versioned = self.metadata.partition_state_versioned(topic, partition)
        if versioned is None:
            return
        try:
            self.replicas.apply_state(partition_log, versioned.value, versioned.version, replicas)
        except StorageIOError as exc:
            # The leader epoch's checkpoint could not be written: the directory goes offline,
            # and every replica's role is taken up again once it writes (resume_replicas).
            self.logs.on_io_error("leading", f"{topic}-{partition}", exc)

    def _local_log(self, assignment: TopicAssignment, partition: int) -> PartitionLog:
        name = assignment.name
        local = self.logs.topics.get(name)
        if local is not None and local.topic_id != assignment.topic_id:
            # A topic of this name was deleted and created again while this broker was away.
            log.info("topic %s has a new id; dropping the old local replicas", name)
            self.logs.delete_topic(name)
            local = None
        count = max(assignment.replicas) + 1
        if local is None:
            configs = self.metadata.topic_configs(name)
            self.logs.create_topic(
                name, count, configs, topic_id=assignment.topic_id, hosted=[partition]
            )
        elif local.partition_count < count:
            self.logs.create_partitions(name, count, hosted=[])
        (partition_log,) = self.logs.host_partitions(name, [partition])
        return partition_log

    # -- a failed data directory ---------------------------------------------------------

    def log_dir_failed(self) -> None:
        """The data directory failed: every local replica goes offline (it leads and
        follows nothing), and the controller is told, which elects other leaders from the
        ISRs and removes this broker from them."""
        self._elected_while_offline = {
            key: partition.leader_epoch
            for key, partition in self.replicas.partitions.items()
            if partition.role is Role.LEADER
        }
        self.replicas.take_offline()
        for partition_log in self.logs.logs():
            self.replicas.forget(partition_log)
        self._tell_controller(LogDirEvent.FAILURE)

    async def log_dir_writes_again(self, timeout_s: float) -> None:
        """The data directory writes again, its logs reopened: tell the controller, and
        wait up to `timeout_s` for it to act on it, so that it does not take this broker
        out of an ISR it has just rejoined. resume_replicas() next."""
        self._announcing_online = True
        telling = self._tell_controller(LogDirEvent.ONLINE)
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.shield(telling)
                await self._wait_handled(self._last_log_dir_event)
        except TimeoutError:
            log.warning(
                "the controller did not take in within %.0fs that the data directory writes"
                " again; following all the same",
                timeout_s,
            )

    async def _wait_handled(self, name: str | None) -> None:
        """Return once the controller has acted on log directory event `name`: it deletes
        the events it has acted on."""
        store = self._store()
        while name is not None:
            with contextlib.suppress(ClusterError):
                if await zookeeper_call(store.log_dir_event, name) is None:
                    return
            await asyncio.sleep(LOG_DIR_EVENT_POLL_S)

    def resume_replicas(self) -> None:
        """Take up the roles the partitions' states give, as after a restart: followers
        truncate to agree with their leaders, catch up and rejoin the ISR. And do on the
        disk what ZooKeeper asked for meanwhile."""
        self.replicas.bring_online()
        self._elected_while_offline = {}
        self._announcing_online = False
        # What changed in ZooKeeper meanwhile and was left undone on the disk.
        if self._topic_names_known:
            for name in [n for n in self.logs.topics if n not in self._topic_watches]:
                self._delete_local_topic(name)
        changed, self._configs_changed_offline = self._configs_changed_offline, set()
        for name in changed:
            self._on_topic_config(name, self.metadata.topic_configs(name))
        for name in list(self._topic_watches):
            assignment = self.metadata.assignment(name)
            for partition in [] if assignment is None else assignment.replicas:
                self._sync_partition(name, partition)

    def _check_elected_while_offline(self, topic: str, partition: int) -> None:
        """A controller that elects this broker while its data directory is offline has
        not heard (or has forgotten) that it is: tell it again, once for each election."""
        state = self.metadata.partition_state(topic, partition)
        key = (topic, partition)
        if state is None or state.leader != self.node_id or not self._reports_failure():
            return
        if state.leader_epoch > self._elected_while_offline.get(key, -1):
            self._elected_while_offline[key] = state.leader_epoch
            self._tell_controller(LogDirEvent.FAILURE)

    def _reports_failure(self) -> bool:
        """Whether the controller is to hear, again, that the directory failed: while it is
        offline, but not once this broker has said it writes again (the FAILURE would
        come after that ONLINE, and the controller would take it offline again)."""
        return self.replicas.offline and not self._announcing_online

    def _tell_controller(self, event: LogDirEvent) -> asyncio.Task[None]:
        """Write a log directory event; returns the task writing it. Events asked for
        while one is being written are written after it, the latest only."""
        self._log_dir_event = event
        self._log_dir_asks += 1
        if self._telling is None or self._telling.done():
            assert self._loop is not None
            self._telling = self._loop.create_task(self._write_log_dir_events())
        return self._telling

    async def _write_log_dir_events(self) -> None:
        store = self._store()
        warned = False
        while self._log_dir_event is not None:
            event, asks = self._log_dir_event, self._log_dir_asks
            try:
                name = await zookeeper_call(store.propagate_log_dir_event, self.node_id, event)
            except ClusterError as exc:
                if not warned:
                    log.warning("could not tell the controller (%s); retrying", exc)
                    warned = True
                await asyncio.sleep(LOG_DIR_EVENT_RETRY_S)
                continue
            log.debug("wrote log directory event %s: %s", name, event.name)
            self._last_log_dir_event = name
            if self._log_dir_asks == asks:
                self._log_dir_event = None

    # -- leadership and fetchers --------------------------------------------------------

    def _on_role_change(self, partition: Partition | None, key: tuple[str, int]) -> None:
        leader = None
        if partition is not None and partition.role is Role.FOLLOWER and partition.leader >= 0:
            # None until the leader's registration is known: _apply_brokers comes back to it.
            leader = self.metadata.broker(partition.leader)
        for leader_id, fetcher in list(self._fetchers.items()):
            if key in fetcher.partitions and (leader is None or leader.node_id != leader_id):
                fetcher.unfollow(key)
        if partition is not None and leader is not None:
            fetcher = self._fetcher_for(leader)
            followed = fetcher.partitions.get(key)
            new_leader = followed is None or followed.log is not partition.log
            fetcher.follow(partition.log, partition.leader_epoch, new_leader)
        role = None if partition is None else partition.role
        for listener in self.leadership_listeners:
            listener(key[0], key[1], role)

    def _fetcher_for(self, leader: BrokerEndpoint) -> ReplicaFetcher:
        """The fetcher from `leader`, started anew if its address changed (a restart)."""
        fetcher = self._fetchers.get(leader.node_id)
        if fetcher is not None and (fetcher.leader.host, fetcher.leader.port) == (
            leader.host,
            leader.port,
        ):
            return fetcher
        if fetcher is not None:
            assert self._loop is not None
            self._loop.create_task(fetcher.stop())
        fetcher = self._fetchers[leader.node_id] = ReplicaFetcher(
            self.node_id,
            leader,
            self._durability,
            self._clock,
            self._replicated,
            self._peer_security,
        )
        fetcher.start()
        return fetcher

    def _replicated(self, partition_log: PartitionLog) -> None:
        for listener in self.replication_listeners:
            listener(partition_log)

    async def _write_isr(
        self, topic: str, partition: int, state: PartitionState, version: int
    ) -> int | None:
        current = self.metadata.partition_state(topic, partition)
        controller_epoch = current.controller_epoch if current is not None else 0
        state = replace(state, controller_epoch=controller_epoch)
        try:
            written = await zookeeper_call(
                self._store().update_partition_state, topic, partition, state, version
            )
        except StateVersionConflict:
            return None
        except ClusterUnavailable as exc:
            # The ISR stays as it was; the next fetch or lag check tries again.
            log.warning(
                "%s-%d: could not write the ISR %s: %s", topic, partition, list(state.isr), exc
            )
            return None
        log.info("%s-%d: ISR is now %s", topic, partition, list(state.isr))
        return written.version

    async def _shrink_isr_forever(self) -> None:
        interval_s = self.config.replica_lag_time_max_ms / 1000 / 2
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.replicas.shrink_lagging()
            except Exception:
                log.exception("ISR check failed")

    def _unclean_election(self, topic: str) -> bool:
        configs = self.metadata.topic_configs(topic)
        config = LogConfig.from_topic_configs(configs, self.logs.default_config)
        return config.unclean_leader_election_enable
