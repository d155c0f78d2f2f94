"""The controller: one broker, elected through ZooKeeper, that decides partition leadership.

Every broker runs a Controller; the one that creates the ephemeral /controller
(and increments /controller_epoch) acts, the others wait for it to go. Acting
means keeping each partition's state in ZooKeeper true to the live brokers:
new partitions get their first leader and ISR, a partition whose leader's
session ended gets a new leader from its ISR (cluster/election.py has Kafka's
rules), a dead replica leaves the ISR, every such change bumps the leader
epoch, and topics marked for deletion are removed.

A broker whose data directory failed is live but its replicas are offline: it says
so with a log directory event (/log_dir_event_notification, Kafka's path), and the
controller then treats it as it treats a dead broker, electing other leaders from
the ISR and removing it from ISRs, until it says the directory writes again, or
registers anew (a restart). What the events said is the controller's memory alone:
a new controller starts knowing nothing, and an offline broker tells it again (on
seeing a new controller, and whenever it is elected leader while offline), as
Kafka's controller relearns offline replicas from the brokers' LeaderAndIsr answers.

It works level-triggered: any watch that fires marks the cluster dirty, and
the controller then compares the whole of ZooKeeper's state with what it
should be, in a worker thread (kazoo calls block). Every write is conditional
on the partition state's version and on /controller_epoch's, so a controller
that has been replaced without knowing it writes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace

from herdless.cluster import election
from herdless.cluster.errors import (
    ClusterError,
    ControllerMoved,
    MalformedZNode,
    StateVersionConflict,
)
from herdless.cluster.layout import LogDirEvent, PartitionState, TopicAssignment
from herdless.cluster.store import ClusterStore, ControllerElection, Watch
from herdless.cluster.zookeeper.calls import zookeeper_call

log = logging.getLogger(__name__)

# After a failed pass (ZooKeeper unreachable, a write raced), try again this soon.
RETRY_S = 0.5


class Controller:
    def __init__(
        self,
        store: ClusterStore,
        node_id: int,
        unclean_election: Callable[[str], bool],
    ) -> None:
        self._store = store
        self.node_id = node_id
        self._unclean_election = unclean_election
        self.election: ControllerElection | None = None
        self._dirty = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._watches: list[Watch] = []
        # One per topic: new partitions (CreatePartitions) change the topic's znode only.
        self._topic_watches: dict[str, Watch] = {}
        self._task: asyncio.Task[None] | None = None
        # Brokers whose data directory is offline, by the broker epoch they said so in.
        self._offline_dirs: dict[int, int] = {}

    @property
    def active(self) -> bool:
        return self.election is not None

    def set_watches(self) -> None:
        """In a worker thread: setting a watch reads its znode."""
        self._watches = [
            self._store.watch_controller(lambda _: self.mark_dirty()),
            self._store.watch_brokers(lambda _: self.mark_dirty()),
            self._store.watch_topic_names(lambda _: self.mark_dirty()),
            self._store.watch_pending_deletions(lambda _: self.mark_dirty()),
            self._store.watch_log_dir_events(lambda _: self.mark_dirty()),
        ]

    def start(self) -> None:
        self._task = self._loop.create_task(self._run())

    def mark_dirty(self) -> None:
        """Thread-safe: watches call it from kazoo's thread."""
        self._loop.call_soon_threadsafe(self._dirty.set)

    def session_lost(self) -> None:
        """The ZooKeeper session ended: /controller went with it."""
        if self.election is not None:
            log.info("controller epoch %d ended with the ZooKeeper session", self.election.epoch)
        self.election = None
        self.mark_dirty()

    async def stop(self) -> None:
        for watch in [*self._watches, *self._topic_watches.values()]:
            watch.cancel()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        election_held, self.election = self.election, None
        if election_held is not None:
            try:
                await zookeeper_call(self._store.resign_controller, election_held)
            except ClusterError as exc:
                log.info("could not resign as controller: %s", exc)

    async def _run(self) -> None:
        self._dirty.set()
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await zookeeper_call(self._pass)
            except ControllerMoved:
                log.info("another broker became controller")
                self.election = None
                self._dirty.set()
            except (ClusterError, OSError) as exc:
                log.warning("controller pass failed: %s; retrying", exc)
                await asyncio.sleep(RETRY_S)
                self._dirty.set()
            except Exception:
                log.exception("controller pass failed; retrying")
                await asyncio.sleep(RETRY_S)
                self._dirty.set()

    # -- in a worker thread ----------------------------------------------------------

    def _pass(self) -> None:
        if self.election is None:
            self.election = self._store.try_elect_controller(self.node_id)
            if self.election is None:
                return
            log.info("this broker is the controller, epoch %d", self.election.epoch)
            self._offline_dirs.clear()
        election_ = self.election
        epochs = self._store.broker_epochs()
        handled = self._read_log_dir_events(epochs)
        # Replicas on a broker whose data directory failed are offline, as on a dead one.
        live = set(epochs) - set(self._offline_dirs)
        for name in sorted(self._store.pending_deletions()):
            self._store.complete_deletion(name, controller_epoch_version=election_.epoch_version)
            log.info("deleted topic %s", name)
        names = self._store.topic_names()
        for name in names - set(self._topic_watches):
            self._topic_watches[name] = self._store.watch_topic(name, lambda _: self.mark_dirty())
        for name in set(self._topic_watches) - names:
            self._topic_watches.pop(name).cancel()
        for name in sorted(names):
            found = self._store.topic(name)
            if found is not None:
                self._reconcile_topic(found.value, live, election_)
        if handled:
            self._store.delete_log_dir_events(handled, election_.epoch_version)

    def _read_log_dir_events(self, epochs: dict[int, int]) -> list[str]:
        """Learn from the log directory events which brokers' data directories are offline;
        returns the names of the events read, to delete once acted on."""
        names = self._store.log_dir_event_names()
        for name in names:
            try:
                event = self._store.log_dir_event(name)
            except MalformedZNode as exc:
                log.error("ignoring a log directory event: %s", exc)
                continue
            if event is None:
                continue
            epoch = epochs.get(event.broker_id)
            if epoch is None or event.zxid < epoch:
                continue  # from a broker gone since, or from an earlier life of it
            if event.event is LogDirEvent.FAILURE:
                if self._offline_dirs.get(event.broker_id) != epoch:
                    log.warning(
                        "broker %d's data directory failed: its replicas are offline; electing"
                        " other leaders from the ISRs and removing it from them",
                        event.broker_id,
                    )
                self._offline_dirs[event.broker_id] = epoch
            elif self._offline_dirs.pop(event.broker_id, None) is not None:
                log.info(
                    "broker %d's data directory writes again: its replicas may rejoin ISRs"
                    " and lead",
                    event.broker_id,
                )
        for broker_id, epoch in list(self._offline_dirs.items()):
            if epochs.get(broker_id) != epoch:
                # Gone, or registered anew: a restarted broker's directory is its new life's.
                del self._offline_dirs[broker_id]
        return names

    def _reconcile_topic(
        self, assignment: TopicAssignment, live: set[int], election_: ControllerElection
    ) -> None:
        new_states: dict[int, PartitionState] = {}
        for partition, replicas in sorted(assignment.replicas.items()):
            current = self._store.get_partition_state(assignment.name, partition)
            if current is None:
                first = election.initial_state(replicas, live, election_.epoch)
                if isinstance(first, election.Offline):
                    log.warning("%s-%d is offline: %s", assignment.name, partition, first.reason)
                else:
                    new_states[partition] = first
                continue
            state = current.value
            wanted = self._wanted_state(assignment.name, replicas, state, live, election_.epoch)
            if wanted is None or wanted == state:
                continue
            try:
                self._store.update_partition_state(
                    assignment.name,
                    partition,
                    wanted,
                    current.version,
                    controller_epoch_version=election_.epoch_version,
                )
            except ControllerMoved:
                raise
            except StateVersionConflict:
                # The leader changed the ISR meanwhile: look again on the next pass.
                self.mark_dirty()
                continue
            log.info(
                "%s-%d: leader %d -> %d, ISR %s -> %s, leader epoch %d",
                assignment.name,
                partition,
                state.leader,
                wanted.leader,
                list(state.isr),
                list(wanted.isr),
                wanted.leader_epoch,
            )
        if new_states:
            self._store.create_partition_states(
                assignment.name, new_states, election_.epoch_version
            )
            log.info("%s: %d partitions online", assignment.name, len(new_states))

    def _wanted_state(
        self,
        topic: str,
        replicas: tuple[int, ...],
        state: PartitionState,
        live: set[int],
        controller_epoch: int,
    ) -> PartitionState | None:
        """The state the partition should have with these live brokers; None to leave it."""
        if state.leader in live:
            # The leader stays; dead replicas leave the ISR (with one epoch bump).
            isr = tuple(r for r in state.isr if r in live)
            if isr == state.isr or not isr:
                return None
            return replace(
                state,
                leader_epoch=state.leader_epoch + 1,
                isr=isr,
                controller_epoch=controller_epoch,
            )
        elected = election.elect_offline_leader(
            replicas, state, live, controller_epoch, unclean=self._unclean_election(topic)
        )
        if isinstance(elected, election.Offline):
            if state.leader != -1:
                # Nobody may lead: record that the old leader is gone, keeping the ISR.
                return election.remove_replica_from_isr(state, state.leader, controller_epoch)
            return None
        return elected
