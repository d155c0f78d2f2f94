"""This broker as a member of a ZooKeeper cluster, as Kafka's KafkaZkClient, KafkaController
and ZkMetadataCache make a broker one.

It holds the ZooKeeper session: registers the broker (an ephemeral node), keeps the
session lease fresh, runs this broker's candidacy for controller, and turns ZooKeeper's
watches into the cluster metadata view. Watches fire on kazoo's thread; everything they
change is handed to the event loop and applied there, in order: first to the metadata
view, then to the broker through MembershipListener, which decides what a change means
for its local replicas (Kafka's ReplicaManager and ReplicaFetcherManager side).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from herdless.cluster.controller import Controller, LeaderBalance
from herdless.cluster.errors import BrokerIdInUse, ClusterError, ClusterUnavailable
from herdless.cluster.layout import (
    BrokerRegistration,
    PartitionState,
    TopicAssignment,
    Versioned,
)
from herdless.cluster.metadata_cache import ClusterMetadata
from herdless.cluster.rereads import Reread
from herdless.cluster.store import ClusterStore, SessionState, Watch
from herdless.cluster.zookeeper.calls import zookeeper_call
from herdless.security.zookeeper import ZooKeeperSecurity

log = logging.getLogger(__name__)

# How long one step of leaving the cluster (resigning, closing the session) may take.
STOP_STEP_TIMEOUT_S = 5.0


class MembershipListener(Protocol):
    """What the broker does when its membership or the cluster changes. Called on the
    event loop, after the metadata view has taken the change in."""

    def stop_leading(self) -> None:
        """The session is lost, or about to end: lead nothing from here on (the
        controller elects other leaders once the session's registration is gone)."""

    def registered_anew(self) -> None:
        """Registered again in a new session, so with a new broker epoch: the controller
        has forgotten what this broker told it in the old one."""

    def brokers_changed(self) -> None:
        """The live brokers changed (a follower may now know its leader's address)."""

    def controller_changed(self, node_id: int | None) -> None:
        """Another controller, or none; a new one knows nothing of its predecessor's
        events."""

    def topic_configs_changed(self, topic: str, configs: dict[str, str]) -> None:
        """A topic's configs as set in ZooKeeper, at first and at every change."""

    def partition_changed(self, topic: str, partition: int) -> None:
        """A partition's assignment or state changed: make the local replica what the
        metadata view says."""

    def topic_deleted(self, topic: str, partitions: list[int]) -> None:
        """The topic is gone from ZooKeeper, with the partitions this broker followed."""


@dataclass(frozen=True, slots=True)
class MembershipConfig:
    node_id: int
    zookeeper_connect: str
    zookeeper_session_timeout_ms: int
    zookeeper_connection_timeout_ms: int
    leader_balance: LeaderBalance = LeaderBalance()


class Membership:
    def __init__(
        self,
        config: MembershipConfig,
        metadata: ClusterMetadata,
        listener: MembershipListener,
        unclean_election: Callable[[str], bool],
        wall_ms: Callable[[], int],
        monotonic_ms: Callable[[], float],
        *,
        open_store: Callable[..., ClusterStore] = ClusterStore,
    ) -> None:
        """unclean_election(topic): whether the controller may elect a leader from outside
        the topic's ISR. wall_ms: the time written into this broker's znodes; monotonic_ms:
        the lease's and every deadline's clock. open_store: how the session is opened,
        ClusterStore's arguments in (unit tests open a store of their own)."""
        self.config = config
        self.node_id = config.node_id
        self.metadata = metadata
        self._listener = listener
        self._unclean_election = unclean_election
        self._wall_ms = wall_ms
        self._monotonic_ms = monotonic_ms
        self._open_store = open_store
        self.store: ClusterStore | None = None
        self.controller: Controller | None = None
        metadata.vouch_for_self(config.node_id, self.lease_valid)
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
        # The broker epoch of the registration (its znode's creation zxid), as Kafka's.
        self.broker_epoch = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._live_brokers = Reread(
            "the live brokers", self._read_brokers, self._apply_brokers, (ClusterError,)
        )

    # -- lifecycle -----------------------------------------------------------------

    async def connect(self, security: ZooKeeperSecurity) -> str:
        """Open the ZooKeeper session; returns the cluster id. ClusterError if it can't."""
        self._loop = asyncio.get_running_loop()
        timeout_s = self.config.zookeeper_session_timeout_ms / 1000
        self.store = await zookeeper_call(
            functools.partial(
                self._open_store,
                self.config.zookeeper_connect,
                wall_ms=self._wall_ms,
                monotonic_ms=self._monotonic_ms,
                session_timeout=timeout_s,
                connect_timeout=self.config.zookeeper_connection_timeout_ms / 1000,
                security=security,
            )
        )
        deadline = self._monotonic_ms() + self.config.zookeeper_connection_timeout_ms
        while True:
            try:
                return await zookeeper_call(self.store.cluster_id)
            except ClusterUnavailable:
                if self._monotonic_ms() >= deadline:
                    raise
                await asyncio.sleep(0.25)

    async def join(self, registration: BrokerRegistration) -> None:
        """Register this broker, and start following the cluster's state and running for
        controller."""
        store = self.connected_store()
        self._registration = registration
        await self._register(registration)
        self._session = store.session_id
        log.info(
            "registered as broker %d at %s:%d in ZooKeeper",
            self.node_id,
            registration.host,
            registration.port,
        )
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
        self.controller = Controller(
            store, self.node_id, self._unclean_election, self.config.leader_balance
        )
        await zookeeper_call(self.controller.set_watches)
        self.controller.start()
        self._tasks = [loop.create_task(self._renew_lease_forever())]

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
        deadline = self._monotonic_ms() + timeout_s * 1000
        while not self.caught_up():
            if self._monotonic_ms() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    @property
    def topic_names_known(self) -> bool:
        """Whether the topic names watch has delivered the names once."""
        return self._topic_names_known

    def followed_topics(self) -> list[str]:
        """The topics ZooKeeper holds, as far as the watches have told."""
        return list(self._topic_watches)

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
        store = self.connected_store()
        loop = asyncio.get_running_loop()
        started = loop.time()
        session_s = self.config.zookeeper_session_timeout_ms / 1000
        connection_s = self.config.zookeeper_connection_timeout_ms / 1000
        waiting = False
        while True:
            try:
                self.broker_epoch = await zookeeper_call(store.register_broker, registration)
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

    async def stop_following(self) -> None:
        """Stop renewing the lease and reading what the watches say changed; leave()
        next."""
        rereading = [t for t in (self._live_brokers.task,) if t is not None]
        for task in [*self._tasks, *self._jobs, *rereading]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._jobs, *rereading, return_exceptions=True)

    async def leave(self) -> None:
        """Stop running for controller, lead nothing, and end the session: the ephemeral
        registration goes at once and the controller moves leadership without waiting for
        a timeout."""
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
        self._listener.stop_leading()
        if self.store is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STOP_STEP_TIMEOUT_S):
                    await zookeeper_call(self.store.close)

    def connected_store(self) -> ClusterStore:
        assert self.store is not None, "connect() first"
        return self.store

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
            and self._monotonic_ms() / 1000 < store.lease_deadline()
        )

    async def _renew_lease_forever(self) -> None:
        # Renewing several times per session timeout keeps the lease well ahead of now.
        interval_s = self.config.zookeeper_session_timeout_ms / 1000 / 6
        store = self.connected_store()
        while True:
            await zookeeper_call(store.renew_lease, interval_s)
            await asyncio.sleep(interval_s)

    def _on_session(self, state: SessionState) -> None:
        if state is SessionState.LOST:
            log.warning("ZooKeeper session lost: leading nothing until registered again")
            self._session = None
            self._listener.stop_leading()
            if self.controller is not None:
                self.controller.session_lost()
        elif state is SessionState.CONNECTED and self._registration is not None:
            assert self._loop is not None
            self._loop.create_task(self._register_again())

    async def _register_again(self) -> None:
        assert self._registration is not None
        if self._session is not None and self._session == self.connected_store().session_id:
            return  # reconnected within the same session: still registered
        try:
            await self._register(self._registration)
        except ClusterError as exc:
            log.error("could not register again in ZooKeeper: %s", exc)
            return
        self._session = self.connected_store().session_id
        self._listener.registered_anew()
        # Watches that did not fire kept their old values: read every state again.
        self._live_brokers.changed()
        for name in list(self._topic_watches):
            await self._reread_topic(name)

    async def _reread_topic(self, name: str) -> None:
        store = self.connected_store()
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
        return await zookeeper_call(self.connected_store().live_brokers)

    def _apply_brokers(self, brokers: dict[int, BrokerRegistration]) -> None:
        self.metadata.set_brokers(list(brokers.values()))
        self._listener.brokers_changed()

    def _on_controller(self, node_id: int | None) -> None:
        self.metadata.controller_id = -1 if node_id is None else node_id
        self._listener.controller_changed(node_id)

    def _on_topic_names(self, names: set[str]) -> None:
        self._topic_names_known = True
        for name in names - set(self._topic_watches):
            self._topic_watches[name] = []
            self._background(self._watch_topic(name))
        for name in set(self._topic_watches) - names:
            self._on_topic(name, None)

    async def _watch_topic(self, name: str) -> None:
        # The config first: a replica's log is opened with it when the assignment comes.
        store = self.connected_store()
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
        store = self.connected_store()
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
        self._listener.topic_configs_changed(name, configs)

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
            self._listener.partition_changed(name, partition)

    def _forget_topic(self, name: str) -> None:
        for watch in self._topic_watches.pop(name, []):
            watch.cancel()
        partitions = []
        for key in [k for k in self._partition_watches if k[0] == name]:
            self._partition_watches.pop(key).cancel()
            partitions.append(key[1])
        self.metadata.set_topic(name, None)
        self._listener.topic_deleted(name, partitions)

    def _on_partition_state(
        self, topic: str, partition: int, state: Versioned[PartitionState] | None
    ) -> None:
        if self.metadata.assignment(topic) is None:
            return  # the topic went meanwhile
        self.metadata.set_partition_state(topic, partition, state)
        self._listener.partition_changed(topic, partition)
