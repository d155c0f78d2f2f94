"""Putting a cleaned segment in place of the segments it was made from, safe against a crash.

The log cleaner writes a group's cleaned copy beside the originals as
`<base>.log.cleaned` (+ `.index.cleaned`, `.timeindex.cleaned`, and `.txnindex.cleaned`
holding the aborted transactions of every segment of the group), synced, where
`<base>` is the base offset of the group's first segment. Then, under the log's
lock:

1. commit: rename the cleaned files to `.swap`, the .log last, and sync the
   directory. From here on the swap happens even if the broker dies.
2. delete the group's other segments; rename the `.swap` files over the first
   segment's files, indexes before the .log, and sync the directory.

At open (Kafka's LogLoader does the same), before segments are read:

- a `<base>.log.swap` is a committed swap: every segment whose base offset lies
  in (base, next offset after the swap's last batch) is one it replaces and is
  deleted, then the swap files are renamed into place. A replaced segment whose
  base lies past the swap's last batch can survive this; it is then one whose
  records the cleaner dropped entirely, and it comes back whole: dirty again,
  but no offset twice and nothing lost. A transaction index cannot tell
  "already renamed" from "the replaced segment's", so the caller rebuilds the
  transaction indexes from the log after any swap completed here.
- a `.log.swap` that is not whole valid batches cannot have been committed
  (it was synced before the rename) and is dropped, as are `.cleaned` files and
  index `.swap` files without their .log: a clean that never committed.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from herdless.protocol.records import crc_matches
from herdless.storage.checkpoint import fsync_dir
from herdless.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    TIME_INDEX_SUFFIX,
    Segment,
    parse_base_offset,
    read_file,
    scan_file,
    segment_file,
)
from herdless.storage.transaction_index import TXN_INDEX_SUFFIX

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# The .log goes last both ways: its rename is what commits, and what completes.
_RENAME_ORDER = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX)


def install(directory: Path, cleaned: Segment, replaced: list[Segment]) -> None:
    """Swap `cleaned` (its files named *.cleaned and synced) in for `replaced`.

    The caller holds the log's lock and owns the segment objects: `replaced`
    are closed (their files gone or overwritten), `cleaned` takes final names.
    """
    base = cleaned.base_offset
    assert replaced and replaced[0].base_offset == base, "a cleaned segment keeps its first base"
    renamed: list[str] = []
    # As in Kafka the transaction index exists only once a transaction aborted.
    has_txn_index = segment_file(directory, base, TXN_INDEX_SUFFIX + CLEANED_SUFFIX).exists()
    order = (TXN_INDEX_SUFFIX, *_RENAME_ORDER) if has_txn_index else _RENAME_ORDER
    try:
        for suffix in order:
            os.rename(
                segment_file(directory, base, suffix + CLEANED_SUFFIX),
                segment_file(directory, base, suffix + SWAP_SUFFIX),
            )
            renamed.append(suffix)
    except OSError:
        # Not committed: put the indexes back with their .log, for the caller to delete.
        for suffix in renamed:
            with contextlib.suppress(OSError):
                os.rename(
                    segment_file(directory, base, suffix + SWAP_SUFFIX),
                    segment_file(directory, base, suffix + CLEANED_SUFFIX),
                )
        raise
    cleaned.set_file_suffix(SWAP_SUFFIX)
    fsync_dir(directory)
    for segment in replaced[1:]:
        segment.delete()
    # Its files are about to be renamed over; delete() would remove the new ones.
    replaced[0].close()
    if not has_txn_index:
        segment_file(directory, base, TXN_INDEX_SUFFIX).unlink(missing_ok=True)
    for suffix in order:
        os.replace(
            segment_file(directory, base, suffix + SWAP_SUFFIX),
            segment_file(directory, base, suffix),
        )
    cleaned.set_file_suffix("")
    fsync_dir(directory)


def complete_interrupted_swaps(directory: Path) -> bool:
    """Finish every committed swap in `directory` (see the module docstring); returns
    whether one was, and the transaction indexes need rebuilding."""
    finished = False
    swap_log_suffix = LOG_SUFFIX + SWAP_SUFFIX
    for path in sorted(directory.glob("*" + swap_log_suffix)):
        base = parse_base_offset(path.name, swap_log_suffix)
        if base is None:
            continue
        end = _next_offset_if_whole(path, base)
        if end is None:
            log.warning(
                "%s: %s holds damaged batches; it was never committed", directory, path.name
            )
            path.unlink()
            continue
        log.info("%s: completing the interrupted swap of %s", directory, path.name)
        for other in directory.glob("*" + LOG_SUFFIX):
            other_base = parse_base_offset(other.name)
            if other_base is not None and base < other_base < end:
                for suffix in SEGMENT_SUFFIXES:
                    segment_file(directory, other_base, suffix).unlink(missing_ok=True)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            swap_index = segment_file(directory, base, suffix + SWAP_SUFFIX)
            if swap_index.exists():
                os.replace(swap_index, segment_file(directory, base, suffix))
            else:
                # Either already renamed, or the replaced segment's: rebuilt from the log if absent.
                segment_file(directory, base, suffix).unlink(missing_ok=True)
        os.replace(path, segment_file(directory, base, LOG_SUFFIX))
        finished = True
    if finished:
        fsync_dir(directory)
    return finished


def _next_offset_if_whole(path: Path, base: int) -> int | None:
    """The offset after the last batch of a cleaned .log, or None unless it is all valid batches."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        end = position = 0
        next_offset = base
        for position, header in scan_file(fd, size):
            if header.magic != 2 or header.base_offset < next_offset:
                return None
            if not crc_matches(read_file(fd, header.size, position), header):
                return None
            next_offset = header.last_offset + 1
            end = position + header.size
        return next_offset if end == size else None
    finally:
        os.close(fd)
