"""Opening a log (Kafka's LogLoader): its segments recovered from wherever a
crash left them, the damage found, and the state kept beside them (log start
offset, recovery point, producer state, leader epochs, high watermark).
"""

from __future__ import annotations

import logging
import sys
import threading
from bisect import bisect_right
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from herdless.protocol.control_records import EndTransactionMarker, InvalidControlRecord, marker_of
from herdless.protocol.records import BatchHeader
from herdless.storage import checkpoint, swap
from herdless.storage.config import LogConfig
from herdless.storage.damage import DAMAGED_OFFSETS_FILE, Damage, DamageKind, DamageMap
from herdless.storage.descriptors import DescriptorBudget
from herdless.storage.errors import LogFileError, StorageIOError, file_problem
from herdless.storage.leader_epochs import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochCache
from herdless.storage.log.local_log import (
    CLEANER_CHECKPOINT_FILE,
    HIGH_WATERMARK_FILE,
    LOG_START_OFFSET_FILE,
    OFFSET_GAPS_FILE,
    PRODUCER_SNAPSHOT_FILE,
    RECOVERY_POINT_FILE,
    new_segment,
)
from herdless.storage.producer_state import (
    ProducerStateManager,
    aborted_txn,
    read_producer_snapshot,
)
from herdless.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    OFFSET_DIGITS,
    SEGMENT_SUFFIXES,
    TIME_INDEX_SUFFIX,
    Segment,
    parse_base_offset,
    segment_file,
)
from herdless.storage.transaction_index import TXN_INDEX_SUFFIX

log = logging.getLogger(__name__)


# Left behind by an interrupted compaction, deletion or checkpoint once swap.py has
# completed the committed swaps: never complete data.
_STRAY_SUFFIXES = (swap.CLEANED_SUFFIX, swap.SWAP_SUFFIX, ".deleted", checkpoint.TMP_SUFFIX)


@dataclass(slots=True)
class LoadedLog:
    """A log's state as its files left it."""

    segments: list[Segment]
    log_start_offset: int
    recovery_point: int
    producers: ProducerStateManager
    epochs: LeaderEpochCache
    high_watermark: int
    damage: DamageMap


def load(
    directory: Path,
    config: LogConfig,
    now_ms: int,
    *,
    producer_id_expiration_ms: int,
    clean_shutdown: bool,
    budget: DescriptorBudget | None,
    lock: threading.Lock,
) -> LoadedLog:
    """The log in `directory`, created if absent, recovered if it was cut short (see
    PartitionLog.open). The caller holds `lock`, the new log's."""
    directory.mkdir(parents=True, exist_ok=True)
    swapped = swap.complete_interrupted_swaps(directory)
    _remove_strays(directory)
    checkpointed_start = checkpoint.read_offset(directory / LOG_START_OFFSET_FILE)
    # Absent, every segment gets checked: slow but safe.
    recovery_point = checkpoint.read_offset(directory / RECOVERY_POINT_FILE) or 0
    bases = _segment_bases(directory, checkpointed_start or 0)
    synced_below = sys.maxsize if clean_shutdown else recovery_point
    segments = _open_segments(directory, config, bases, synced_below, recovery_point, budget, lock)
    damage = DamageMap.load(directory / DAMAGED_OFFSETS_FILE)
    try:
        if not segments:
            start = checkpointed_start or 0
            segments.append(new_segment(directory, start, config, budget, lock))
        found = _damage_found(directory, config, segments, recovery_point)
        if segments[-1].sealed:
            # Damaged, or short of what was synced: new records go after the damage.
            assert segments[-1].next_offset is not None
            base = segments[-1].next_offset
            segments.append(new_segment(directory, base, config, budget, lock))
        active_segment = segments[-1]
        assert active_segment.next_offset is not None
        log_end = active_segment.next_offset
        log_start = max(checkpointed_start or 0, segments[0].base_offset)
        if log_start > log_end:
            # The tail below the checkpointed start was lost: start empty at the log
            # start offset rather than hand out offsets consumers have already seen.
            log.warning(
                "%s: log end %d is below log start %d; starting empty",
                directory,
                log_end,
                log_start,
            )
            for segment in segments:
                segment.delete()
            segments = [new_segment(directory, log_start, config, budget, lock)]
            active_segment = segments[0]
            log_end = log_start
        if any([damage.add(d) for d in found]) | damage.keep_within(log_start, log_end):
            damage.save()
        if active_segment.size > 0:
            active_segment.first_append_ms = estimate_first_append(active_segment, now_ms)
        producers = _load_producers(
            directory, segments, log_start, now_ms, producer_id_expiration_ms, swapped
        )
        epochs = _open_leader_epochs(directory, segments, log_start, log_end)
    except BaseException:
        for segment in segments:
            segment.close()
        raise
    checkpointed_high_watermark = checkpoint.read_offset(directory / HIGH_WATERMARK_FILE)
    if checkpointed_high_watermark is None:
        high_watermark = log_start
    else:
        high_watermark = min(max(checkpointed_high_watermark, log_start), log_end)
    return LoadedLog(segments, log_start, recovery_point, producers, epochs, high_watermark, damage)


def _remove_strays(directory: Path) -> None:
    logs = {p.name.removesuffix(LOG_SUFFIX) for p in directory.glob("*" + LOG_SUFFIX)}
    for path in directory.iterdir():
        name = path.name
        orphan_index = name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)) and (
            name.rsplit(".", 1)[0] not in logs
        )
        if path.is_file() and (name.endswith(_STRAY_SUFFIXES) or orphan_index):
            log.info("%s: removing stray file %s", directory, name)
            path.unlink()


def _segment_bases(directory: Path, log_start: int) -> list[int]:
    """Base offsets of the segments worth opening, after dropping the ones that hold nothing.

    An empty segment other than the first and the last adds no offsets, and a
    segment wholly below the log start offset is one that retention was
    deleting at the crash. The first stays even if empty (the cleaner can empty
    it): its base offset is where the log starts.
    """
    bases = []
    for path in directory.glob("*" + LOG_SUFFIX):
        base = parse_base_offset(path.name)
        if base is None:
            # As Kafka: a log file whose offset cannot be told stops the log from opening.
            raise LogFileError(
                f"cannot open the log of {directory.name}: {path} is not named as a segment"
                f" is (its base offset in {OFFSET_DIGITS} digits, then {LOG_SUFFIX})"
            )
        bases.append(base)
    bases.sort()
    kept = []
    for i, base in enumerate(bases):
        last = i == len(bases) - 1
        empty = segment_file(directory, base, LOG_SUFFIX).stat().st_size == 0
        below_start = not last and bases[i + 1] <= log_start
        if not last and ((empty and kept) or below_start):
            _unlink_segment(directory, base)
            continue
        kept.append(base)
    return kept


def _open_segments(
    directory: Path,
    config: LogConfig,
    bases: list[int],
    synced_below: int,
    recovery_point: int,
    budget: DescriptorBudget | None,
    lock: threading.Lock,
) -> list[Segment]:
    segments: list[Segment] = []
    try:
        for i, base in enumerate(bases):
            active = i == len(bases) - 1
            offset_limit = None if active else bases[i + 1]
            try:
                segment = Segment.open(
                    directory,
                    base,
                    config.segment_index_bytes,
                    index_interval_bytes=config.index_interval_bytes,
                    offset_limit=offset_limit,
                    recover=offset_limit is None or offset_limit > synced_below,
                    active=active,
                    synced_below=synced_below,
                    known_end=recovery_point,
                )
            except (OSError, StorageIOError) as exc:
                path = segment_file(directory, base, LOG_SUFFIX)
                problem = file_problem(path, exc) if isinstance(exc, OSError) else f"{path}: {exc}"
                raise LogFileError(f"cannot open the log of {directory.name}: {problem}") from exc
            if budget is not None:
                segment.manage(budget, lock)
            segments.append(segment)
            if not active and segment.cut_bytes:
                # Kafka's rule: what follows a corrupt batch cannot be trusted either.
                _drop_segments_after(directory, bases[i + 1 :])
                segment.open_indexes_for_append()
                break
    except BaseException:
        for segment in segments:
            segment.close()
        raise
    return segments


def _damage_found(
    directory: Path, config: LogConfig, segments: list[Segment], recovery_point: int
) -> list[Damage]:
    """The damage that opening the segments found, offsets between two segments that
    neither holds (unless compaction may have left the gap), and offsets from the log
    end to the recovery point, which were synced and are gone: new records then go
    after them, and the last segment is sealed for that."""
    found: list[Damage] = []
    # Compaction leaves gaps, which stay if the topic stops compacting later.
    compacted = config.compacts or any(
        (directory / name).exists() for name in (CLEANER_CHECKPOINT_FILE, OFFSET_GAPS_FILE)
    )
    if not compacted:
        for segment, following in pairwise(segments):
            end = segment.next_offset
            if end is not None and end < following.base_offset:
                found.append(Damage(end, following.base_offset, DamageKind.MISSING))
    last = segments[-1]
    assert last.next_offset is not None
    if recovery_point > last.next_offset:
        found.append(Damage(last.next_offset, recovery_point, DamageKind.MISSING))
        last.seal()
        last.next_offset = recovery_point
    for damage in found:
        log.error("%s: %s; they are not served", directory, damage.describe(directory.name))
    return [d for segment in segments for d in segment.damage] + found


def _drop_segments_after(directory: Path, bases: list[int]) -> None:
    for base in bases:
        log.warning("%s: deleting segment %d, which follows a corrupt one", directory, base)
        _unlink_segment(directory, base)


def _unlink_segment(directory: Path, base: int) -> None:
    for suffix in SEGMENT_SUFFIXES:
        segment_file(directory, base, suffix).unlink(missing_ok=True)


def estimate_first_append(segment: Segment, now_ms: int) -> int:
    # The wall-clock time of the first append is not on disk; the first batch's
    # timestamp is the best estimate, capped at now against producers' clocks
    # running ahead. Kafka itself rolls by record timestamps.
    first = next(segment.scan(), None)
    if first is None or first[1].max_timestamp < 0:
        return now_ms
    return min(now_ms, first[1].max_timestamp)


def _open_leader_epochs(
    directory: Path, segments: list[Segment], log_start: int, log_end: int
) -> LeaderEpochCache:
    """The checkpointed cache cut to the log, or one rebuilt from the batches without it."""
    path = directory / LEADER_EPOCH_CHECKPOINT_FILE
    epochs = LeaderEpochCache.load(path)
    if epochs is None:
        epochs = LeaderEpochCache.from_batches(path, _epoch_changes(segments))
        if log_end > segments[0].base_offset:
            epochs.save()  # not to read the batches again at the next open
    else:
        # Written before the batches it names: a crash can leave it ahead of the log.
        epochs.truncate_from_end(log_end)
    epochs.truncate_from_start(log_start)
    return epochs


def _epoch_changes(segments: list[Segment]) -> Iterator[tuple[int, int]]:
    """(partition leader epoch, base offset) of every batch where the epoch may change.

    Epochs never decrease along a log, so a segment whose first and last
    batches have the same epoch holds no other, and only those two are read.
    Batches without an epoch (-1: the broker's own writes on a lone broker,
    or data from before epochs were stamped) may sit anywhere: a segment that
    starts or ends with one is read whole.
    """
    for segment in segments:
        first = next(segment.scan(), None)
        if first is None:
            continue
        tail = segment.scan(segment.offset_index.last_position or 0)
        last = deque(tail, maxlen=1)[0][1]
        if 0 <= first[1].partition_leader_epoch == last.partition_leader_epoch:
            yield first[1].partition_leader_epoch, first[1].base_offset
        else:
            for _, header in segment.scan():
                yield header.partition_leader_epoch, header.base_offset


def _load_producers(
    directory: Path,
    segments: list[Segment],
    log_start: int,
    now_ms: int,
    expiration_ms: int,
    swapped: bool,
) -> ProducerStateManager:
    """The producer state from its snapshot and the batches after it, else rebuilt whole.

    The transaction indexes are rebuilt with it over the batches replayed: past the
    snapshot, the entries a crash may have lost or left past a cut log; everywhere,
    when a segment's index was found damaged or a cleaning's swap was completed
    (swap.py).
    """
    snapshot = read_producer_snapshot(directory / PRODUCER_SNAPSHOT_FILE)
    log_end = segments[-1].next_offset
    assert log_end is not None
    damaged = [s.base_offset for s in segments if s.txn_index.damaged]
    if damaged:
        log.warning(
            "%s: transaction index of segments %s damaged; rebuilding from the log",
            directory,
            damaged,
        )
    if snapshot is None or snapshot[0] > log_end or damaged or swapped:
        return rebuild_producers(
            segments,
            log_start,
            now_ms,
            expiration_ms,
            txn_indexes=True,
            every_segment=bool(damaged) or swapped,
        )
    offset, producers = snapshot
    producers.truncate_head(log_start)
    first = max(bisect_right([s.base_offset for s in segments], offset) - 1, 0)
    _replay(producers, segments[first:], max(offset, log_start), txn_indexes=True)
    producers.remove_expired(now_ms, expiration_ms)
    return producers


def rebuild_producers(
    segments: list[Segment],
    log_start: int,
    now_ms: int,
    expiration_ms: int,
    *,
    txn_indexes: bool = False,
    every_segment: bool = False,
) -> ProducerStateManager:
    """Replay batch headers into producer state, O(batches), skipping what has expired,
    and with `txn_indexes` the transaction indexes of the segments read.

    A sealed segment whose newest batch is older than the expiration holds only
    producers that would be expired anyway, so it is not read (its transaction
    index kept as it is), unless `every_segment`.
    """
    producers = ProducerStateManager()
    horizon = now_ms - expiration_ms
    read = [
        segment
        for segment in segments
        if every_segment or not (segment.sealed and 0 <= segment.max_timestamp < horizon)
    ]
    _replay(producers, read, log_start, txn_indexes=txn_indexes)
    producers.remove_expired(now_ms, expiration_ms)
    return producers


def _replay(
    producers: ProducerStateManager, segments: list[Segment], start: int, *, txn_indexes: bool
) -> None:
    """Replay the batches of `segments` that end at or after `start` (the first segment
    read from the index entry before it); with `txn_indexes`, each segment's transaction
    index loses its entries from `start` on and gets them again from the markers."""
    for segment in segments:
        if txn_indexes:
            segment.txn_index.truncate_to(start)
        position = segment.offset_index.lookup(start) if start > segment.base_offset else 0
        for at, header in segment.scan(position):
            if header.last_offset < start:
                continue
            marker = _marker_at(segment, at, header) if header.is_control else None
            txn = producers.replay(header, header.max_timestamp, marker)
            if txn_indexes and txn is not None and txn.aborted:
                segment.txn_index.append(aborted_txn(txn, producers))


def _marker_at(segment: Segment, position: int, header: BatchHeader) -> EndTransactionMarker | None:
    try:
        return marker_of(segment.read(position, header.size), header)
    except InvalidControlRecord as exc:
        log.warning(
            "%s: control batch at offset %d: %s", segment.directory, header.base_offset, exc
        )
        return None
