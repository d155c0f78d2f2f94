"""Offsets committed inside transactions not yet ended (Kafka's OffsetMetadataManager:
pendingTransactionalOffsets and openTransactionsByGroup).

A TxnOffsetCommit's records wait here, by producer id, until the marker that ends the
producer's transaction reaches the partition: a COMMIT makes them the group's committed
offsets, an ABORT drops them. Meanwhile OffsetFetch with require_stable answers
UNSTABLE_OFFSET_COMMIT for their partitions, expiry leaves those partitions and their
group alone, and a tombstone for a partition (OffsetDelete, DeleteGroups) drops what is
pending for it too.

Which commit wins where a transaction's meets a plain OffsetCommit's on one partition:
the later record in the log, as Kafka decides by comparing the two records' offsets (so
that compacting the partition cannot change the outcome). Replay does not hand the
shard record offsets, so the order is kept here: every pending offset, and every plain
commit to a group while it has a transaction open, is stamped from one counter as it is
replayed. Live writes and loading replay the same records in the same order, so they
stamp alike; a plain commit made while its group had no transaction open is older than
every offset now pending for that group, and needs no stamp.
"""

from __future__ import annotations

from collections.abc import Iterable

# (group, topic, partition)
PartitionKey = tuple[str, str, int]


class PendingOffsets:
    def __init__(self) -> None:
        # producer id -> partition -> (stamp, encoded OffsetCommitValue)
        self._by_producer: dict[int, dict[PartitionKey, tuple[int, bytes]]] = {}
        # group -> producers with a transaction open that wrote to the group. A producer
        # stays here until its marker, even if tombstones emptied what it had pending:
        # the group's offsets are not stable before then.
        self._open_by_group: dict[str, set[int]] = {}
        self._groups_by_producer: dict[int, set[str]] = {}
        # group -> (topic, partition) -> stamp of the last value put into the committed
        # table while the group had a transaction open.
        self._written_at: dict[str, dict[tuple[str, int], int]] = {}
        self._stamp = 0

    # -- replay ----------------------------------------------------------------------

    def add(
        self, producer_id: int, group_id: str, topic: str, partition: int, value: bytes
    ) -> None:
        """A record of `producer_id`'s open transaction."""
        self._stamp += 1
        pending = self._by_producer.setdefault(producer_id, {})
        pending[(group_id, topic, partition)] = (self._stamp, value)
        self._open_by_group.setdefault(group_id, set()).add(producer_id)
        self._groups_by_producer.setdefault(producer_id, set()).add(group_id)

    def has_open_transactions(self, group_id: str) -> bool:
        return group_id in self._open_by_group

    def committed(self, group_id: str, topic: str, partitions: Iterable[int]) -> None:
        """Plain commits of `group_id`, which has a transaction open, were replayed: a
        transaction's offset written before them loses to them."""
        written_at = self._written_at.setdefault(group_id, {})
        for partition in partitions:
            self._stamp += 1
            written_at[(topic, partition)] = self._stamp

    def removed(self, group_id: str, topic: str, partitions: Iterable[int]) -> None:
        """Tombstones for the partitions: whatever a transaction has pending for them goes
        too, as in Kafka."""
        producers = self._open_by_group.get(group_id)
        if producers is None:
            return
        written_at = self._written_at.get(group_id, {})
        for partition in partitions:
            written_at.pop((topic, partition), None)
            for producer_id in producers:
                self._by_producer.get(producer_id, {}).pop((group_id, topic, partition), None)

    def end(self, producer_id: int, committed: bool) -> list[tuple[PartitionKey, bytes]]:
        """`producer_id`'s transaction ended: what now becomes committed, in the order it
        was written (nothing for an abort, or where a later plain commit wins)."""
        pending = self._by_producer.pop(producer_id, {})
        winners = []
        if committed:
            for key, (stamp, value) in pending.items():
                group_id, topic, partition = key
                if self._written_at.get(group_id, {}).get((topic, partition), 0) < stamp:
                    winners.append((key, value, stamp))
        for group_id in self._groups_by_producer.pop(producer_id, ()):
            producers = self._open_by_group[group_id]
            producers.discard(producer_id)
            if not producers:
                # Every offset pending for the group from now on is newer than its
                # committed ones: their stamps are no longer needed.
                del self._open_by_group[group_id]
                self._written_at.pop(group_id, None)
        for (group_id, topic, partition), _, stamp in winners:
            if group_id in self._open_by_group:
                # Another transaction of the group is open: it must lose to this offset
                # if it wrote before it.
                self._written_at.setdefault(group_id, {})[(topic, partition)] = stamp
        return [(key, value) for key, value, _ in winners]

    def clear(self) -> None:
        self._by_producer.clear()
        self._open_by_group.clear()
        self._groups_by_producer.clear()
        self._written_at.clear()

    # -- reads -----------------------------------------------------------------------

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether an open transaction has an offset pending for the partition."""
        producers = self._open_by_group.get(group_id)
        if producers is None:
            return False
        key = (group_id, topic, partition)
        return any(key in self._by_producer.get(p, {}) for p in producers)

    def partitions(self, group_id: str) -> list[tuple[str, int]]:
        """(topic, partition) of every offset pending for the group, each once (a list:
        callers write tombstones for them, which change what is pending)."""
        found: dict[tuple[str, int], None] = {}
        for producer_id in self._open_by_group.get(group_id, ()):
            for group, topic, partition in self._by_producer.get(producer_id, {}):
                if group == group_id:
                    found[(topic, partition)] = None
        return list(found)

    def snapshot(self) -> dict[int, dict[PartitionKey, bytes]]:
        """producer id -> partition -> value of everything pending: for tests comparing a
        live shard with its replay."""
        return {
            producer_id: {key: value for key, (_, value) in pending.items()}
            for producer_id, pending in self._by_producer.items()
        }
