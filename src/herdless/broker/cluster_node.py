"""This broker's local replicas in a ZooKeeper cluster.

Membership (cluster/membership.py) holds the ZooKeeper session, the registration, the
lease and the candidacy for controller, and keeps the cluster metadata view from
ZooKeeper's watches; this is the listener it tells of each change, and turns the metadata
into local replicas: a partition this broker is assigned gets a local log, then leads or
follows it as the partition's state says, with one fetcher per leader it follows.

When the data directory fails, every local replica goes offline and the
controller is told with a log directory event; nothing is written to the
directory until it writes again (log_dir_failed, log_dir_writes_again,
resume_replicas; broker/logs/log_dir_failure.py decides when).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace

from herdless.broker.config import BrokerConfig
from herdless.broker.peers.connection import PeerConnection, PeerError, PeerSecurity
from herdless.broker.producer_ids import ProducerIds
from herdless.broker.replication.cluster_replica_manager import (
    ClusterReplicaManager,
    Partition,
    Role,
)
from herdless.broker.replication.durability import Durability
from herdless.broker.replication.fetcher import ReplicaFetcher
from herdless.broker.replication.quota import ReplicationQuota
from herdless.cluster.errors import ClusterError, ClusterUnavailable, StateVersionConflict
from herdless.cluster.layout import BrokerRegistration, LogDirEvent, PartitionState, TopicAssignment
from herdless.cluster.membership import Membership, MembershipConfig
from herdless.cluster.metadata import BrokerEndpoint
from herdless.cluster.metadata_cache import ClusterMetadata
from herdless.cluster.store import ClusterStore
from herdless.cluster.zookeeper.calls import zookeeper_call
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.errors import ErrorCode
from herdless.security.listeners import Endpoint
from herdless.storage import LogConfig, LogManager, PartitionLog, StorageError, StorageIOError

log = logging.getLogger(__name__)

# Between two tries to write a log directory event while ZooKeeper does not answer.
LOG_DIR_EVENT_RETRY_S = 0.5
# Between two looks at whether the controller has acted on a log directory event.
LOG_DIR_EVENT_POLL_S = 0.05
# ControlledShutdown as Kafka 2.4 on sends it (with the broker epoch, flexible).
CONTROLLED_SHUTDOWN_VERSION = 3
# How long the controller may take to answer it (Kafka's controller.socket.timeout.ms).
CONTROLLER_SOCKET_TIMEOUT_S = 30.0


class ClusterNode:
    """The broker side of cluster membership: a MembershipListener."""

    def __init__(
        self,
        config: BrokerConfig,
        logs: LogManager,
        durability: Durability,
        metadata: ClusterMetadata,
        clock: Callable[[], int],
        monotonic_ms: Callable[[], int],
        peer_security: PeerSecurity | None = None,
    ) -> None:
        """clock: the wall clock, for the logs and the znodes; monotonic_ms: the session
        lease's clock and every deadline's."""
        self.config = config
        # How replica fetchers connect and log in to leaders.
        self._peer_security = peer_security
        self.node_id = config.node_id
        self.logs = logs
        self.metadata = metadata
        self._durability = durability
        self._clock = clock
        self._monotonic_ms = monotonic_ms
        self.membership = Membership(
            MembershipConfig(
                config.node_id,
                config.zookeeper_connect,
                config.zookeeper_session_timeout_ms,
                config.zookeeper_connection_timeout_ms,
                config.leader_balance(),
            ),
            metadata,
            self,
            self._unclean_election,
            clock,
            monotonic_ms,
        )
        # Kafka's two replication quotas: what this broker leads out, what it fetches in.
        self.leader_quota = self._replication_quota(config.leader_replication_throttled_rate)
        self.follower_quota = self._replication_quota(config.follower_replication_throttled_rate)
        self.replicas = ClusterReplicaManager(
            logs,
            durability,
            clock,
            config.node_id,
            metadata,
            self.membership.lease_valid,
            self._write_isr,
            config.replica_lag_time_max_ms,
            monotonic_ms,
            self.leader_quota,
            config.replica_selector(),
        )
        self.replicas.on_role_change = self._on_role_change
        self.producer_ids = ProducerIds(self._reserve_producer_ids)
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        # Told when this broker's role for a partition changes: leader, follower, or
        # none (the group coordinator's shards follow __consumer_offsets leadership).
        self.leadership_listeners: list[Callable[[str, int, Role | None], None]] = []
        # Told when a followed partition's log or high watermark moved (the group
        # coordinator's standby shards replay what became committed).
        self.replication_listeners: list[Callable[[PartitionLog], None]] = [
            self.replicas.replicated
        ]
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
        # Set at the start of a controlled shutdown: this broker follows nothing any more,
        # so no leader takes it back into an ISR it is about to leave for good.
        self._shutting_down = False

    def _replication_quota(self, rate: int) -> ReplicationQuota:
        config = self.config
        return ReplicationQuota(
            config.node_id,
            rate,
            self._monotonic_ms,
            config.replication_quota_window_num,
            config.replication_quota_window_size_seconds * 1000,
        )

    # -- lifecycle -----------------------------------------------------------------

    async def connect(self) -> str:
        """Open the ZooKeeper session; returns the cluster id. ClusterError if it can't."""
        self._loop = asyncio.get_running_loop()
        return await self.membership.connect(self.config.zookeeper_security())

    async def join(self, endpoints: list[Endpoint]) -> None:
        """Register this broker, with its advertised listeners, and start following the
        cluster's state. Its host and port are its inter-broker listener's."""
        inter_broker = self.config.inter_broker_listener()
        own = next(e for e in endpoints if e.listener == inter_broker)
        await self.membership.join(
            BrokerRegistration(self.node_id, own.host, own.port, self.config.rack, tuple(endpoints))
        )
        assert self._loop is not None
        self._tasks = [self._loop.create_task(self._shrink_isr_forever())]

    async def wait_caught_up(self, timeout_s: float) -> bool:
        """Return once the metadata view has what ZooKeeper held when this broker joined,
        or False after `timeout_s`."""
        return await self.membership.wait_caught_up(timeout_s)

    async def stop(self) -> None:
        telling = [t for t in (self._telling,) if t is not None]
        for task in [*self._tasks, *telling]:
            task.cancel()
        await self.membership.stop_following()
        await asyncio.gather(*self._tasks, *telling, return_exceptions=True)
        for fetcher in self._fetchers.values():
            await fetcher.stop()
        await self.membership.leave()

    def connected_store(self) -> ClusterStore:
        return self.membership.connected_store()

    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move this broker's leaderships to other ISR members and
        take it out of every ISR, before it stops (Kafka's controlledShutdown): producers
        then go to the new leaders at once, and no acks=all produce waits for this broker.

        Tried controlled.shutdown.max.retries times, controlled.shutdown.retry.backoff.ms
        apart, while the controller cannot be reached or answers that some partitions
        have no other replica to lead them; True once none is left."""
        self._shutting_down = True
        for fetcher in list(self._fetchers.values()):
            await fetcher.stop()
        self._fetchers.clear()
        log.info("starting controlled shutdown")
        retries = self.config.controlled_shutdown_max_retries
        backoff_s = self.config.controlled_shutdown_retry_backoff_ms / 1000
        for attempt in range(retries):
            if attempt:
                log.info("retrying controlled shutdown (%d retries remaining)", retries - attempt)
                await asyncio.sleep(backoff_s)
            problem = await self._ask_controller_to_shut_down()
            if problem is None:
                log.info("controlled shutdown succeeded")
                return True
            log.info("controlled shutdown: %s", problem)
        log.warning("controlled shutdown did not complete; stopping all the same")
        return False

    async def _ask_controller_to_shut_down(self) -> str | None:
        """One ControlledShutdown request; None when it left no partition led here, else
        what stands in the way."""
        controller_id = self.metadata.controller_id
        controller = self.metadata.broker(controller_id) if controller_id >= 0 else None
        if controller is None:
            return "no controller is known"
        connection = PeerConnection(
            controller.host,
            controller.port,
            f"herdless-broker-{self.node_id}",
            CONTROLLER_SOCKET_TIMEOUT_S,
            self._peer_security,
        )
        try:
            response = await connection.request(
                ApiKey.CONTROLLED_SHUTDOWN,
                CONTROLLED_SHUTDOWN_VERSION,
                broker_id=self.node_id,
                broker_epoch=self.membership.broker_epoch,
            )
        except PeerError as exc:
            return f"controller {controller_id} could not be asked: {exc}"
        finally:
            connection.close()
        if response.error_code != ErrorCode.NONE:
            code = response.error_code
            name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else code
            return f"controller {controller_id} answered {name}"
        remaining = response.remaining_partitions
        if remaining:
            shown = ", ".join(f"{p.topic_name}-{p.partition_index}" for p in remaining[:10])
            return f"{len(remaining)} partitions have no other replica to lead them ({shown})"
        return None

    async def _reserve_producer_ids(self, size: int) -> tuple[int, int]:
        store = self.connected_store()
        return await zookeeper_call(store.reserve_producer_id_block, self.node_id, size)

    # -- what membership tells (MembershipListener) ----------------------------------------

    def stop_leading(self) -> None:
        self.replicas.resign_all()

    def registered_anew(self) -> None:
        if self._reports_failure():
            # A new broker epoch: the controller forgot what the old one said.
            self._tell_controller(LogDirEvent.FAILURE)

    def brokers_changed(self) -> None:
        # A follower waits for its leader's address; it may have just registered.
        for partition in list(self.replicas.partitions.values()):
            if partition.role is Role.FOLLOWER:
                self._on_role_change(partition, partition.key)

    def controller_changed(self, node_id: int | None) -> None:
        if node_id is not None and self._reports_failure():
            # A new controller knows nothing of the events its predecessor handled.
            self._tell_controller(LogDirEvent.FAILURE)

    def topic_configs_changed(self, topic: str, configs: dict[str, str]) -> None:
        if self.replicas.offline:
            self._configs_changed_offline.add(topic)
        elif topic in self.logs.topics:
            try:
                self.logs.alter_topic_configs(topic, configs, replace=True)
            except StorageIOError as exc:
                # The data directory fails: applied once it writes again.
                self._configs_changed_offline.add(topic)
                self.logs.on_io_error("configs", f"topic {topic}", exc)
            except StorageError as exc:
                log.error("topic %s: cannot apply configs %s: %s", topic, configs, exc)

    def partition_changed(self, topic: str, partition: int) -> None:
        self._sync_partition(topic, partition)

    def topic_deleted(self, topic: str, partitions: list[int]) -> None:
        for partition in partitions:
            self.replicas.stop_replica(topic, partition)
        if not self.replicas.offline:
            # Else once the data directory writes again (resume_replicas).
            self._delete_local_topic(topic)

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
        store = self.connected_store()
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
        followed = self.membership.followed_topics()
        if self.membership.topic_names_known:
            for name in [n for n in self.logs.topics if n not in followed]:
                self._delete_local_topic(name)
        changed, self._configs_changed_offline = self._configs_changed_offline, set()
        for name in changed:
            self.topic_configs_changed(name, self.metadata.topic_configs(name))
        for name in followed:
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
        store = self.connected_store()
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
        if (
            partition is not None
            and partition.role is Role.FOLLOWER
            and partition.leader >= 0
            and not self._shutting_down
        ):
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
            self.follower_quota,
            self.replicas.in_sync,
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
                self.connected_store().update_partition_state, topic, partition, state, version
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
