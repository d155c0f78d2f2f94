"""The process's file limit, shared between sockets and the segment files of partitions.

The soft limit is raised to the hard one, as far as the system lets us. A share is
kept for client connections, replica fetchers, ZooKeeper, the records of Fetch answers
on their way to sendfile (each region holds a descriptor until sent; one that cannot
get one is copied instead) and the odd file; the rest
bounds how many descriptors segment files may hold at once (storage/descriptors.py):
the segments used least recently are closed to stay within it, so the number of
partitions a broker hosts is not bounded by the file limit.
"""

from __future__ import annotations

import resource

# Kept for client connections, replica fetchers, ZooKeeper and the odd file.
MIN_RESERVED_DESCRIPTORS = 256


def segment_file_budget() -> tuple[int, str]:
    """Descriptors segment files may hold at once, and a line for the log saying so."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        wanted = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    reserved = max(MIN_RESERVED_DESCRIPTORS, soft // 4)
    budget = max(soft - reserved, 0)
    return budget, (
        f"file limit {soft}: segment files hold at most {budget} descriptors at once, the"
        f" least recently used closed to make room ({reserved} kept for sockets)"
    )
