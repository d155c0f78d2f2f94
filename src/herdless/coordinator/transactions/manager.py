"""The transactions of one `__transaction_state` partition: every request's rules
(Kafka's TransactionCoordinator and TransactionStateManager), sans-IO.

Each operation checks the request against the transactional id's state, returning
Kafka's error code, or moves the id to its next state and returns that state's record
with the reply; replay applies the same records. Two steps are the broker's:
- WriteTxnMarkers: a Prepare* state is answered with the markers to write (EndTxn's
  reply carries them, released only once the Prepare* record is committed, as Kafka
  sends markers only after that append); `pending_markers` lists every transaction
  waiting for them (after a load, a timeout's abort, a fence), and `complete_markers`
  moves a transaction to Complete* once they are written.
- producer ids come from an injected allocator (the broker's block of ids).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, replace

from herdless.coordinator.internal_topics import OFFSETS_TOPIC
from herdless.coordinator.now import Now
from herdless.coordinator.placement import partition_for
from herdless.coordinator.result import Reply, Result
from herdless.coordinator.runtime.writer import TopicPartition
from herdless.coordinator.timers import CoordinatorTimer
from herdless.coordinator.transactions.config import TransactionConfig
from herdless.coordinator.transactions.end_txn import AlreadyEnded, Prepare, end_txn_decision
from herdless.coordinator.transactions.messages import EndTxnAnswer, ProducerIdAndEpoch, TxnMarkers
from herdless.coordinator.transactions.metadata import (
    MAX_PRODUCER_EPOCH,
    NO_TIMESTAMP,
    TransactionMetadata,
)
from herdless.coordinator.transactions.producer_epochs import bump_epoch, producer_id_matches
from herdless.coordinator.transactions.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    decode_transaction_key,
    decode_transaction_value,
    transaction_record,
)
from herdless.coordinator.transactions.state import TransactionState
from herdless.protocol.errors import ErrorCode

ProducerIdAllocator = Callable[[], int]
S = TransactionState
E = ErrorCode


@dataclass(frozen=True, slots=True)
class TxnTimerKey:
    # "timeout": an open transaction's end; "expiration": an idle transactional id's.
    kind: str
    transactional_id: str


class TransactionManager:
    def __init__(
        self,
        config: TransactionConfig,
        allocate_producer_id: ProducerIdAllocator,
        timer: CoordinatorTimer[TxnTimerKey],
    ) -> None:
        self.config = config
        self.allocate_producer_id = allocate_producer_id
        self.timer = timer
        # Every id's state; change it only through _put and _remove, which keep the
        # index below.
        self.transactions: dict[str, TransactionMetadata] = {}
        # The ids in PrepareCommit or PrepareAbort: those waiting for their markers. The
        # broker asks for them every second (a sweep for what no EndTxn carried), so
        # they are indexed: a shard of a million idle ids costs that sweep nothing.
        self._preparing: set[str] = set()

    # -- replay ----------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        transactional_id = decode_transaction_key(key)
        if value is None:
            self._remove(transactional_id)
        else:
            self._put(
                TransactionMetadata.from_value(transactional_id, decode_transaction_value(value))
            )

    def _put(self, meta: TransactionMetadata) -> None:
        self.transactions[meta.transactional_id] = meta
        if meta.state in _PREPARE_STATES:
            self._preparing.add(meta.transactional_id)
        else:
            self._preparing.discard(meta.transactional_id)

    def _remove(self, transactional_id: str) -> None:
        self.transactions.pop(transactional_id, None)
        self._preparing.discard(transactional_id)

    # -- InitProducerId ----------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        token: Hashable,
        now: Now,
    ) -> Result:
        """`expected`: the producer id and epoch a producer recovering from an error
        sends (KIP-360), None from a new producer."""
        if not transactional_id:
            return _answer(token, ProducerIdAndEpoch(E.INVALID_REQUEST))
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return _answer(token, ProducerIdAndEpoch(E.INVALID_TRANSACTION_TIMEOUT))
        meta = self.transactions.get(transactional_id)
        if meta is None:
            meta = TransactionMetadata(
                transactional_id,
                self.allocate_producer_id(),
                NO_PRODUCER_EPOCH,
                timeout_ms,
                S.EMPTY,
                frozenset(),
                NO_TIMESTAMP,
                now.wall_ms,
            )
        if expected is not None and not producer_id_matches(meta, *expected):
            return _answer(token, ProducerIdAndEpoch(E.PRODUCER_FENCED))
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return _answer(token, ProducerIdAndEpoch(E.CONCURRENT_TRANSACTIONS))
        if meta.state is S.ONGOING:
            # A new producer fences the open transaction: abort it at a bumped epoch and
            # have the producer retry, which bumps the epoch once more (or rotates the
            # producer id if this bump used up its epochs).
            out = self._fence_and_abort(meta, now)
            out.replies.append(Reply(token, ProducerIdAndEpoch(E.CONCURRENT_TRANSACTIONS)))
            return out
        if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
            last = meta.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
            producer_id, epoch = self.allocate_producer_id(), 0
        else:
            bumped = bump_epoch(meta, None if expected is None else expected[1])
            if bumped is None:
                return _answer(token, ProducerIdAndEpoch(E.PRODUCER_FENCED))
            producer_id, (epoch, last) = meta.producer_id, bumped
        new = meta.transition(
            S.EMPTY,
            now.wall_ms,
            producer_id=producer_id,
            producer_epoch=epoch,
            last_producer_epoch=last,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_timestamp_ms=NO_TIMESTAMP,
            next_producer_id=NO_PRODUCER_ID,
        )
        out = self._write(new, now)
        out.replies.append(
            Reply(token, ProducerIdAndEpoch(E.NONE, new.producer_id, new.producer_epoch))
        )
        return out

    # -- AddPartitionsToTxn and AddOffsetsToTxn ------------------------------------------

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        token: Hashable,
        now: Now,
        client_transaction_version: int = 0,
    ) -> Result:
        """AddPartitionsToTxn as a client sends it (v0-v3): one error for every partition,
        answered as {partition: error}."""
        wanted = frozenset(partitions)
        error, out = self._add(
            transactional_id, producer_id, producer_epoch, wanted, now, client_transaction_version
        )
        out.replies.append(Reply(token, dict.fromkeys(wanted, error)))
        return out

    def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        token: Hashable,
        now: Now,
    ) -> Result:
        """AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the
        transaction, so that its TxnOffsetCommit gets a marker too."""
        offsets = TopicPartition(
            OFFSETS_TOPIC, partition_for(group_id, self.config.offsets_topic_num_partitions)
        )
        error, out = self._add(
            transactional_id, producer_id, producer_epoch, frozenset({offsets}), now, 0
        )
        out.replies.append(Reply(token, error))
        return out

    def _add(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
        now: Now,
        client_transaction_version: int,
    ) -> tuple[ErrorCode, Result]:
        if not transactional_id:
            return E.INVALID_REQUEST, Result()
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING, Result()
        if meta.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED, Result()
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return E.CONCURRENT_TRANSACTIONS, Result()
        if meta.state is S.ONGOING and partitions <= meta.partitions:
            return E.NONE, Result()
        starts = meta.state is not S.ONGOING
        new = meta.transition(
            S.ONGOING,
            now.wall_ms,
            partitions=meta.partitions | partitions,
            start_timestamp_ms=now.wall_ms if starts else meta.start_timestamp_ms,
            client_transaction_version=max(
                meta.client_transaction_version, client_transaction_version
            ),
        )
        return E.NONE, self._write(new, now)

    # -- EndTxn ------------------------------------------------------------------------

    def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        token: Hashable,
        now: Now,
        client_transaction_version: int = 0,
    ) -> Result:
        """EndTxn from the producer: answered once the Prepare* record is committed, with
        the markers the broker then writes (EndTxnAnswer)."""
        if not transactional_id:
            return _answer(token, EndTxnAnswer(ProducerIdAndEpoch(E.INVALID_REQUEST)))
        meta = self.transactions.get(transactional_id)
        if meta is None:
            return _answer(token, EndTxnAnswer(ProducerIdAndEpoch(E.INVALID_PRODUCER_ID_MAPPING)))
        epoch_bump = client_transaction_version >= 2
        decision = end_txn_decision(meta, producer_id, producer_epoch, committed, epoch_bump)
        if isinstance(decision, ErrorCode):
            return _answer(token, EndTxnAnswer(ProducerIdAndEpoch(decision)))
        if isinstance(decision, AlreadyEnded):
            # Version 2 tells the producer its epoch again; version 1 has no field for it.
            answer = ProducerIdAndEpoch(E.NONE, meta.producer_id, meta.producer_epoch)
            return _answer(
                token, EndTxnAnswer(answer if epoch_bump else ProducerIdAndEpoch(E.NONE))
            )
        out = self._prepare_end(meta, decision, client_transaction_version, now)
        new = self.transactions[transactional_id]
        answer = ProducerIdAndEpoch(E.NONE, new.producer_id, new.producer_epoch)
        out.replies.append(
            Reply(
                token,
                EndTxnAnswer(answer if epoch_bump else ProducerIdAndEpoch(E.NONE), _markers(new)),
            )
        )
        return out

    def _prepare_end(
        self,
        meta: TransactionMetadata,
        prepare: Prepare,
        client_transaction_version: int,
        now: Now,
        *,
        fenced: bool = False,
    ) -> Result:
        epoch, last, next_producer_id = (
            meta.producer_epoch,
            meta.last_producer_epoch,
            NO_PRODUCER_ID,
        )
        if client_transaction_version >= 2:
            # KIP-890 part 2: every transaction ends at a new epoch, so a late write of
            # the old one can never join the next transaction. Running out of epochs,
            # the producer moves to a new id once the markers are written.
            if meta.epoch_exhausted and not fenced:
                next_producer_id = self.allocate_producer_id()
            if meta.producer_epoch < MAX_PRODUCER_EPOCH:
                epoch = meta.producer_epoch + 1
            last = meta.producer_epoch
        new = meta.transition(
            S.PREPARE_COMMIT if prepare.committed else S.PREPARE_ABORT,
            now.wall_ms,
            producer_epoch=epoch,
            last_producer_epoch=last,
            next_producer_id=next_producer_id,
            client_transaction_version=client_transaction_version,
            start_timestamp_ms=now.wall_ms
            if prepare.no_partition_added
            else meta.start_timestamp_ms,
        )
        return self._write(new, now)

    def _fence_and_abort(self, meta: TransactionMetadata, now: Now) -> Result:
        """Kafka's PrepareEpochFence then PrepareAbort, written as the one PrepareAbort
        record Kafka writes: at a bumped epoch the old producer cannot use (bumped once
        more by the abort itself when the cluster's transaction version is 2)."""
        fence = meta.transition(
            S.PREPARE_EPOCH_FENCE,
            now.wall_ms,
            producer_epoch=meta.producer_epoch + 1,
            last_producer_epoch=NO_PRODUCER_EPOCH,
        )
        return self._prepare_end(
            fence, Prepare(False), self.config.transaction_version, now, fenced=True
        )

    # -- markers -----------------------------------------------------------------------

    def pending_markers(self) -> list[TxnMarkers]:
        """Every transaction whose markers are still to be written."""
        found = (_markers(self.transactions[txn_id]) for txn_id in sorted(self._preparing))
        return [markers for markers in found if markers is not None]

    def complete_markers(self, markers: TxnMarkers, token: Hashable, now: Now) -> Result:
        """Every marker of `markers` is written: the transaction completes. Markers of a
        transaction that moved on since (completed by an earlier call, or a reloaded
        shard's) complete nothing and are answered so."""
        meta = self.transactions.get(markers.transactional_id)
        if meta is None or _markers(meta) != markers:
            return _answer(token, E.INVALID_TXN_STATE)
        producer_id, epoch = meta.producer_id, meta.producer_epoch
        if meta.next_producer_id != NO_PRODUCER_ID:
            # The epoch overflowed at EndTxn: the producer continues under its next id.
            producer_id, epoch = meta.next_producer_id, 0
        new = meta.transition(
            S.COMPLETE_COMMIT if markers.committed else S.COMPLETE_ABORT,
            now.wall_ms,
            producer_id=producer_id,
            producer_epoch=epoch,
            last_producer_epoch=meta.producer_epoch,
            next_producer_id=NO_PRODUCER_ID,
            partitions=frozenset(),
        )
        out = self._write(new, now)
        out.replies.append(Reply(token, E.NONE))
        return out

    # -- timers ------------------------------------------------------------------------

    def start_timers(self, now: Now) -> Result:
        out = Result()
        for meta in self.transactions.values():
            self._schedule(meta, now, out)
        return out

    def _schedule(self, meta: TransactionMetadata, now: Now, out: Result) -> None:
        """The id's one timer for its state: an open transaction's timeout, or an idle
        id's expiration. Deadlines come from written wall-clock times, so a coordinator
        that took over keeps the time already spent."""
        txn_id = meta.transactional_id
        timeout_key, expiration_key = (
            TxnTimerKey("timeout", txn_id),
            TxnTimerKey("expiration", txn_id),
        )
        if meta.state is S.ONGOING:
            self.timer.cancel(out, expiration_key)
            due_wall = meta.start_timestamp_ms + meta.timeout_ms
            key, callback = (
                timeout_key,
                self._on_timeout(txn_id, meta.producer_id, meta.producer_epoch),
            )
        elif meta.state.expiration_allowed:
            self.timer.cancel(out, timeout_key)
            due_wall = meta.last_update_timestamp_ms + self.config.transactional_id_expiration_ms
            key, callback = expiration_key, self._on_expiration(txn_id)
        else:
            self.timer.cancel(out, timeout_key)
            self.timer.cancel(out, expiration_key)
            return
        deadline = now.monotonic_ms + max(0, due_wall - now.wall_ms)
        self.timer.schedule(out, key, deadline, callback)

    def _on_timeout(
        self, txn_id: str, producer_id: int, producer_epoch: int
    ) -> Callable[[Result, Now], None]:
        def abort(out: Result, now: Now) -> None:
            meta = self.transactions.get(txn_id)
            if (
                meta is not None
                and meta.state is S.ONGOING
                and (meta.producer_id, meta.producer_epoch) == (producer_id, producer_epoch)
            ):
                # The timer runs on the monotonic clock. Written as of the wall clock
                # alone, with that clock behind (a millisecond of rounding, or stepped
                # back), the abort would read as one before the timeout: counted and
                # logged as a fence. It is written as of its deadline at the earliest.
                due_wall = meta.start_timestamp_ms + meta.timeout_ms
                at = now if now.wall_ms >= due_wall else replace(now, wall_ms=due_wall)
                out.extend(self._fence_and_abort(meta, at))

        return abort

    def _on_expiration(self, txn_id: str) -> Callable[[Result, Now], None]:
        def expire(out: Result, now: Now) -> None:
            meta = self.transactions.get(txn_id)
            if meta is None or not meta.state.expiration_allowed:
                return
            # Dead, then gone: the tombstone is what the log keeps of it.
            meta.transition(S.DEAD, now.wall_ms)
            self._remove(txn_id)
            out.records.append(transaction_record(txn_id, None, self.config.log_value_version))

        return expire

    def _write(self, new: TransactionMetadata, now: Now) -> Result:
        self._put(new)
        record = transaction_record(
            new.transactional_id, new.to_value(), self.config.log_value_version
        )
        out = Result(records=[record])
        self._schedule(new, now, out)
        return out


_PREPARE_STATES = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT})


def _answer(token: Hashable, response: object) -> Result:
    return Result(replies=[Reply(token, response)])


def _markers(meta: TransactionMetadata) -> TxnMarkers | None:
    if meta.state not in _PREPARE_STATES:
        return None
    return TxnMarkers(
        meta.transactional_id,
        meta.producer_id,
        meta.producer_epoch,
        meta.state is S.PREPARE_COMMIT,
        meta.partitions,
        meta.client_transaction_version,
    )
