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

Leader balance, as Kafka's: ElectLeaders asks for preferred or unclean elections of
given partitions (elect_leaders); every leader.imbalance.check.interval.seconds the
controller hands partitions back to their preferred leaders where a broker's share of
partitions led by others is over leader.imbalance.per.broker.percentage
(cluster/leader_imbalance.py); and a broker about to stop asks for a controlled shutdown
(controlled_shutdown): its leaderships move to other ISR members and it leaves the ISRs
it is in, so that producers never wait for a broker that is going. Until it is gone (or
registers anew) it is not elected anywhere. Like the offline directories, the brokers
shutting down are the active controller's memory alone.

Partition reassignment, as Kafka's (KIP-455, cluster/reassignment.py has the steps):
alter_reassignments writes each partition's full replica set with the replicas adding and
removing in /brokers/topics/<topic>, and every pass completes those whose target replicas
are all in the ISR; the controller watches their states meanwhile, since the leader
changes the ISR without it.

It works level-triggered: any watch that fires marks the cluster dirty, and
the controller then compares the whole of ZooKeeper's state with what it
should be, in a worker thread (kazoo calls block). Every write is conditional
on the partition state's version and on /controller_epoch's, so a controller
that has been replaced without knowing it writes nothing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from enum import IntEnum

from herdless.cluster import election, reassignment
from herdless.cluster.errors import (
    BrokerNotAvailable,
    ClusterError,
    ControllerMoved,
    MalformedZNode,
    StaleBrokerEpoch,
    StateVersionConflict,
)
from herdless.cluster.layout import (
    NO_LEADER,
    LogDirEvent,
    PartitionState,
    TopicAssignment,
    Versioned,
)
from herdless.cluster.leader_imbalance import PartitionLeadership, partitions_to_rebalance
from herdless.cluster.reassignment import ReplicaAssignment
from herdless.cluster.store import ClusterStore, ControllerElection, Watch
from herdless.cluster.zookeeper.calls import zookeeper_call
from herdless.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# After a failed pass (ZooKeeper unreachable, a write raced), try again this soon.
RETRY_S = 0.5
# How often one election re-reads a partition whose state a leader changed meanwhile.
WRITE_ATTEMPTS = 3
# A broker epoch the request did not give (ControlledShutdown before v2): not checked.
UNKNOWN_BROKER_EPOCH = -1


class ElectionType(IntEnum):
    """ElectLeaders' election types, by Kafka's values (KIP-460)."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class LeaderBalance:
    """The automatic preferred-leader rebalance, with Kafka's defaults."""

    enable: bool = True  # auto.leader.rebalance.enable
    check_interval_s: float = 300.0  # leader.imbalance.check.interval.seconds
    per_broker_percentage: int = 10  # leader.imbalance.per.broker.percentage


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """One partition's answer to ElectLeaders: NONE with the new leader, or why not."""

    error: ErrorCode
    message: str | None = None
    leader: int = NO_LEADER


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    """One partition's answer to AlterPartitionReassignments."""

    error: ErrorCode
    message: str | None = None


Key = tuple[str, int]

_NOT_CONTROLLER = ElectionResult(ErrorCode.NOT_CONTROLLER)
_NOT_NEEDED = ElectionResult(ErrorCode.ELECTION_NOT_NEEDED)
_UNKNOWN = ElectionResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
_BEING_DELETED = ElectionResult(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted")


class Controller:
    def __init__(
        self,
        store: ClusterStore,
        node_id: int,
        unclean_election: Callable[[str], bool],
        balance: LeaderBalance | None = None,
    ) -> None:
        self._store = store
        self.node_id = node_id
        self._unclean_election = unclean_election
        self._balance = balance or LeaderBalance()
        self.election: ControllerElection | None = None
        self._dirty = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._watches: list[Watch] = []
        # One per topic: new partitions (CreatePartitions) change the topic's znode only.
        self._topic_watches: dict[str, Watch] = {}
        self._task: asyncio.Task[None] | None = None
        self._balancing: asyncio.Task[None] | None = None
        # Brokers whose data directory is offline, by the broker epoch they said so in.
        self._offline_dirs: dict[int, int] = {}
        # Brokers in a controlled shutdown, by the broker epoch they asked in.
        self._shutting_down: dict[int, int] = {}
        # The states of the partitions being reassigned: the leader adds target replicas
        # to the ISR, which completes the reassignment.
        self._reassigning: dict[Key, Watch] = {}
        # One change of partition states at a time: the reconciling pass, an election
        # asked for, a controlled shutdown, the imbalance check, a reassignment.
        self._acting = asyncio.Lock()

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
        if self._balance.enable:
            self._balancing = self._loop.create_task(self._check_imbalance_forever())

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
        for watch in [
            *self._watches,
            *self._topic_watches.values(),
            *self._reassigning.values(),
        ]:
            watch.cancel()
        tasks = [t for t in (self._task, self._balancing) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
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
                async with self._acting:
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

    # -- asked for ---------------------------------------------------------------------

    async def elect_leaders(
        self, election_type: ElectionType, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], ElectionResult]:
        """ElectLeaders: each partition's result; None for every partition of every
        topic. At a broker that is not the controller, NOT_CONTROLLER for each."""
        if self.election is None:
            return {key: _NOT_CONTROLLER for key in partitions or []}
        try:
            async with self._acting:
                return await zookeeper_call(self._elect, election_type, partitions)
        except ControllerMoved:
            self.election = None
            self.mark_dirty()
            return {key: _NOT_CONTROLLER for key in partitions or []}

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        """ControlledShutdown: move leadership of every partition `broker_id` leads to
        another ISR member and take it out of the ISRs it follows in; returns the
        partitions it still leads (no other replica could take them).

        ControllerMoved if this broker is not the controller; BrokerNotAvailable,
        StaleBrokerEpoch for a broker not registered, or registered anew since."""
        if self.election is None:
            raise ControllerMoved("this broker is not the controller")
        try:
            async with self._acting:
                return await zookeeper_call(self._controlled_shutdown, broker_id, broker_epoch)
        except ControllerMoved:
            self.election = None
            self.mark_dirty()
            raise

    async def alter_reassignments(
        self,
        targets: dict[Key, tuple[int, ...] | None],
        allow_replication_factor_change: bool = True,
    ) -> dict[Key, ReassignmentResult]:
        """AlterPartitionReassignments: start (or replace) the reassignment of each
        partition to its target replicas, or cancel it (None); with KIP-860's option,
        refuse a target of another size than the original replicas'."""
        if self.election is None:
            return dict.fromkeys(targets, ReassignmentResult(ErrorCode.NOT_CONTROLLER))
        try:
            async with self._acting:
                results = await zookeeper_call(
                    self._alter_reassignments, targets, allow_replication_factor_change
                )
        except ControllerMoved:
            self.election = None
            self.mark_dirty()
            return dict.fromkeys(targets, ReassignmentResult(ErrorCode.NOT_CONTROLLER))
        self.mark_dirty()
        return results

    async def list_reassignments(self, keys: list[Key] | None) -> dict[Key, ReplicaAssignment]:
        """ListPartitionReassignments: the partitions asked for (all for None) that are
        being reassigned. ControllerMoved at a broker that is not the controller."""
        if self.election is None:
            raise ControllerMoved("this broker is not the controller")
        return await zookeeper_call(self._list_reassignments, keys)

    async def _check_imbalance_forever(self) -> None:
        while True:
            await asyncio.sleep(self._balance.check_interval_s)
            if self.election is None:
                continue
            try:
                async with self._acting:
                    await zookeeper_call(self._rebalance)
            except ControllerMoved:
                self.election = None
                self.mark_dirty()
            except (ClusterError, OSError) as exc:
                log.warning("leader imbalance check failed: %s", exc)
            except Exception:
                log.exception("leader imbalance check failed")

    # -- in a worker thread ----------------------------------------------------------

    def _pass(self) -> None:
        if self.election is None:
            self.election = self._store.try_elect_controller(self.node_id)
            if self.election is None:
                return
            log.info("this broker is the controller, epoch %d", self.election.epoch)
            self._offline_dirs.clear()
            self._shutting_down.clear()
        election_ = self.election
        epochs = self._store.broker_epochs()
        handled = self._read_log_dir_events(epochs)
        # Replicas on a broker whose data directory failed are offline, as on a dead one.
        live = self._live(epochs)
        for name in sorted(self._store.pending_deletions()):
            self._store.complete_deletion(name, controller_epoch_version=election_.epoch_version)
            log.info("deleted topic %s", name)
        names = self._store.topic_names()
        for name in names - set(self._topic_watches):
            self._topic_watches[name] = self._store.watch_topic(name, lambda _: self.mark_dirty())
        for name in set(self._topic_watches) - names:
            self._topic_watches.pop(name).cancel()
        for key in [k for k in self._reassigning if k[0] not in names]:
            self._reassigning.pop(key).cancel()
        for name in sorted(names):
            found = self._store.topic(name)
            if found is not None:
                self._reconcile_topic(found.value, live, election_)
                self._progress_reassignments(found.value, live, election_)
        if handled:
            self._store.delete_log_dir_events(handled, election_.epoch_version)

    def _live(self, epochs: dict[int, int]) -> set[int]:
        """The brokers whose replicas are online; forgets the brokers shutting down that
        are gone or registered anew."""
        for broker_id, epoch in list(self._shutting_down.items()):
            if epochs.get(broker_id) != epoch:
                del self._shutting_down[broker_id]
        return set(epochs) - set(self._offline_dirs)

    def _partitions(
        self, keys: list[tuple[str, int]] | None
    ) -> Iterator[tuple[tuple[str, int], tuple[int, ...] | None]]:
        """Each partition asked for (every partition of every topic for None), with its
        assignment; None for one that does not exist."""
        names = sorted(self._store.topic_names()) if keys is None else sorted({t for t, _ in keys})
        assignments: dict[str, TopicAssignment | None] = {}
        for name in names:
            found = self._store.topic(name)
            assignments[name] = None if found is None else found.value
        if keys is None:
            keys = [
                (name, partition)
                for name, assignment in assignments.items()
                if assignment is not None
                for partition in sorted(assignment.replicas)
            ]
        for topic, partition in keys:
            assignment = assignments.get(topic)
            yield (
                (topic, partition),
                None if assignment is None else assignment.replicas.get(partition),
            )

    def _write(
        self,
        key: tuple[str, int],
        decide: Callable[[PartitionState], PartitionState | election.Offline | None],
        why: str,
    ) -> Versioned[PartitionState] | election.Offline | None:
        """Write the state `decide` makes of the partition's current one (None: leave it),
        re-reading if a leader changed it meanwhile; the state left, or why `decide` would
        not make one (None: the partition has no state)."""
        assert self.election is not None
        topic, partition = key
        for _ in range(WRITE_ATTEMPTS):
            current = self._store.get_partition_state(topic, partition)
            if current is None:
                return None
            wanted = decide(current.value)
            if isinstance(wanted, election.Offline):
                return wanted
            if wanted is None or wanted == current.value:
                return current
            try:
                written = self._store.update_partition_state(
                    topic,
                    partition,
                    wanted,
                    current.version,
                    controller_epoch_version=self.election.epoch_version,
                )
            except ControllerMoved:
                raise
            except StateVersionConflict:
                continue
            log.info(
                "%s-%d (%s): leader %d -> %d, ISR %s -> %s, leader epoch %d",
                topic,
                partition,
                why,
                current.value.leader,
                wanted.leader,
                list(current.value.isr),
                list(wanted.isr),
                wanted.leader_epoch,
            )
            return written
        raise StateVersionConflict(f"the state of {topic}-{partition} kept changing")

    def _elect(
        self, election_type: ElectionType, keys: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], ElectionResult]:
        """Kafka's processReplicaLeaderElection, for partitions named or all."""
        assert self.election is not None
        epoch = self.election.epoch
        live = self._live(self._store.broker_epochs())
        electable = live - set(self._shutting_down)
        deleting = self._store.pending_deletions()
        results: dict[tuple[str, int], ElectionResult] = {}
        for key, replicas in self._partitions(keys):
            if replicas is None:
                results[key] = _UNKNOWN
                continue
            if key[0] in deleting:
                results[key] = _BEING_DELETED
                continue
            current = self._store.get_partition_state(*key)
            if current is None:
                results[key] = _UNKNOWN
                continue
            state = current.value
            needed = (
                state.leader != replicas[0]
                if election_type is ElectionType.PREFERRED
                else state.leader == NO_LEADER or state.leader not in live
            )
            if not needed:
                results[key] = _NOT_NEEDED
                continue
            decide = functools.partial(_elect_one, election_type, replicas, electable, epoch)
            try:
                written = self._write(key, decide, f"{election_type.name.lower()} election")
            except ControllerMoved:
                raise
            except StateVersionConflict as exc:
                written = election.Offline(str(exc))
            if isinstance(written, Versioned):
                results[key] = ElectionResult(ErrorCode.NONE, leader=written.value.leader)
            elif written is None:
                results[key] = _UNKNOWN
            else:
                error = (
                    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
                    if election_type is ElectionType.PREFERRED
                    else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                )
                results[key] = ElectionResult(error, written.reason)
        return results

    def _controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        """Kafka's doControlledShutdown."""
        assert self.election is not None
        epoch = self.election.epoch
        epochs = self._store.broker_epochs()
        live = self._live(epochs)
        registered = epochs.get(broker_id)
        if registered is None:
            raise BrokerNotAvailable(f"Broker id {broker_id} does not exist.")
        if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch < registered:
            raise StaleBrokerEpoch(
                f"Received controlled shutdown request from an old broker epoch {broker_epoch}"
                f" for broker {broker_id}. Current broker epoch is {registered}."
            )
        if broker_id not in self._shutting_down:
            log.info("broker %d is shutting down: moving its leaderships", broker_id)
        self._shutting_down[broker_id] = registered
        shutting_down = set(self._shutting_down)
        deleting = self._store.pending_deletions()
        remaining = []
        for key, replicas in self._partitions(None):
            # A partition of one replica has nowhere to go; Kafka leaves it out.
            if replicas is None or broker_id not in replicas or len(replicas) < 2:
                continue
            if key[0] in deleting:
                continue

            def decide(
                state: PartitionState, replicas: tuple[int, ...] = replicas
            ) -> PartitionState | None:
                if state.leader == broker_id:
                    return election.elect_controlled_shutdown_leader(
                        replicas, state, live, shutting_down, epoch
                    )
                if state.leader == NO_LEADER:
                    return None  # nothing to move, and the last ISR member stays
                return election.remove_replica_from_isr(state, broker_id, epoch)

            written = self._write(key, decide, f"broker {broker_id} shutting down")
            if isinstance(written, Versioned) and written.value.leader == broker_id:
                remaining.append(key)
        return remaining

    def _alter_reassignments(
        self, targets: dict[Key, tuple[int, ...] | None], allow_replication_factor_change: bool
    ) -> dict[Key, ReassignmentResult]:
        """Kafka's onPartitionReassignment, step 1 (and cancellation)."""
        assert self.election is not None
        epoch = self.election.epoch
        epochs = self._store.broker_epochs()
        live = self._live(epochs)
        deleting = self._store.pending_deletions()
        results: dict[Key, ReassignmentResult] = {}
        for key, target in sorted(targets.items(), key=lambda item: item[0]):
            topic, partition = key
            found = self._store.topic(topic)
            if found is None or partition not in found.value.replicas or topic in deleting:
                results[key] = ReassignmentResult(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
                )
                continue
            current = reassignment.of(found.value, partition)
            if target is None:
                if not current.reassigning:
                    results[key] = ReassignmentResult(
                        ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                        f"Partition {topic}-{partition} is not being reassigned.",
                    )
                    continue
                self._cancel(key, current, live, epoch)
                results[key] = ReassignmentResult(ErrorCode.NONE)
                continue
            invalid = reassignment.invalid_target(target, epochs)
            if invalid is not None:
                results[key] = ReassignmentResult(ErrorCode.INVALID_REPLICA_ASSIGNMENT, invalid)
                continue
            if not allow_replication_factor_change and len(target) != len(current.origin):
                results[key] = ReassignmentResult(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    "The replication factor is changed from"
                    f" {len(current.origin)} to {len(target)}",
                )
                continue
            wanted = current.reassign_to(target)
            if wanted != current:
                self._write_replicas(key, wanted)
                self._write(
                    key,
                    lambda state: reassignment.started_state(state, epoch),
                    f"reassigning to {list(target)}",
                )
                log.info(
                    "%s-%d: reassigning from %s to %s",
                    topic,
                    partition,
                    list(current.origin),
                    list(target),
                )
            results[key] = ReassignmentResult(ErrorCode.NONE)
        return results

    def _cancel(self, key: Key, current: ReplicaAssignment, live: set[int], epoch: int) -> None:
        """Back to the original replicas: state first, so that no replica leaving leads."""
        written = self._write(
            key,
            lambda state: reassignment.cancelled(current, state, live, epoch),
            "reassignment cancelled",
        )
        if isinstance(written, election.Offline):
            log.warning("%s-%d: cancelled with no leader: %s", *key, written.reason)
        self._write_replicas(key, current.revert())
        log.info("%s-%d: reassignment cancelled, back to %s", *key, list(current.origin))

    def _write_replicas(self, key: Key, replicas: ReplicaAssignment) -> None:
        """Write one partition's replicas into its topic's assignment."""
        assert self.election is not None
        topic, partition = key
        for _ in range(WRITE_ATTEMPTS):
            found = self._store.topic(topic)
            if found is None:
                return
            try:
                self._store.set_partitions(
                    reassignment.with_partition(found.value, partition, replicas),
                    found.version,
                    controller_epoch_version=self.election.epoch_version,
                )
                return
            except StateVersionConflict:
                continue
        raise StateVersionConflict(f"the assignment of {topic} kept changing")

    def _list_reassignments(self, keys: list[Key] | None) -> dict[Key, ReplicaAssignment]:
        listed = {}
        for key, _ in self._partitions(keys):
            found = self._store.topic(key[0])
            if found is None or key[1] not in found.value.replicas:
                continue
            replicas = reassignment.of(found.value, key[1])
            if replicas.reassigning:
                listed[key] = replicas
        return listed

    def _progress_reassignments(
        self, assignment: TopicAssignment, live: set[int], election_: ControllerElection
    ) -> None:
        """Complete each reassignment of the topic whose target replicas are all in sync
        (steps 3 on of Kafka's onPartitionReassignment); stop watching the partitions of
        the topic that are no longer reassigned."""
        name = assignment.name
        electable = live - set(self._shutting_down)
        for partition in sorted({*assignment.adding, *assignment.removing}):
            key = (name, partition)
            if key not in self._reassigning:
                self._reassigning[key] = self._store.watch_partition_state(
                    name, partition, lambda _: self.mark_dirty()
                )
            replicas = reassignment.of(assignment, partition)
            written = self._write(
                key,
                lambda state, replicas=replicas: reassignment.completed(
                    replicas, state, electable, election_.epoch
                ),
                f"reassignment to {list(replicas.target)} complete",
            )
            if isinstance(written, election.Offline):
                log.warning("%s-%d: reassignment waits: %s", name, partition, written.reason)
                continue
            if written is None or not set(written.value.isr) >= set(replicas.target):
                continue  # target replicas still catching up
            self._write_replicas(key, ReplicaAssignment(replicas.target))
            log.info("%s-%d: reassigned to %s", name, partition, list(replicas.target))
        for key in [k for k in self._reassigning if k[0] == name]:
            if key[1] not in assignment.adding and key[1] not in assignment.removing:
                self._reassigning.pop(key).cancel()

    def _rebalance(self) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance."""
        assert self.election is not None
        epoch = self.election.epoch
        live = self._live(self._store.broker_epochs())
        electable = live - set(self._shutting_down)
        deleting = self._store.pending_deletions()
        partitions = []
        for key, replicas in self._partitions(None):
            if replicas is None or key[0] in deleting:
                continue
            current = self._store.get_partition_state(*key)
            if current is not None:
                partitions.append(PartitionLeadership(*key, replicas, current.value))
        chosen = partitions_to_rebalance(partitions, electable, self._balance.per_broker_percentage)
        for p in chosen:
            try:
                self._write(
                    (p.topic, p.partition),
                    lambda state, replicas=p.replicas: _preferred_or_none(
                        replicas, state, electable, epoch
                    ),
                    "preferred leader, imbalance check",
                )
            except ControllerMoved:
                raise
            except StateVersionConflict as exc:
                log.info("leader imbalance check: %s; trying at the next check", exc)

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
                electable = live - set(self._shutting_down)
                first = election.initial_state(replicas, electable, election_.epoch)
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
        # A broker in a controlled shutdown is not elected (Kafka's isReplicaOnline).
        electable = live - set(self._shutting_down)
        elected = election.elect_offline_leader(
            replicas, state, electable, controller_epoch, unclean=self._unclean_election(topic)
        )
        if isinstance(elected, election.Offline):
            if state.leader != -1:
                # Nobody may lead: record that the old leader is gone, keeping the ISR.
                return election.remove_replica_from_isr(state, state.leader, controller_epoch)
            return None
        return elected


def _elect_one(
    election_type: ElectionType,
    replicas: tuple[int, ...],
    electable: set[int],
    controller_epoch: int,
    state: PartitionState,
) -> PartitionState | election.Offline:
    if election_type is ElectionType.PREFERRED:
        return election.elect_preferred_leader(replicas, state, electable, controller_epoch)
    return election.elect_offline_leader(replicas, state, electable, controller_epoch, unclean=True)


def _preferred_or_none(
    replicas: tuple[int, ...], state: PartitionState, live: set[int], controller_epoch: int
) -> PartitionState | None:
    if state.leader == replicas[0]:
        return None
    elected = election.elect_preferred_leader(replicas, state, live, controller_epoch)
    return None if isinstance(elected, election.Offline) else elected
