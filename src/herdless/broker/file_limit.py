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

import os
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


# Listing /proc/self/fd costs about a millisecond per 10,000 descriptors: counted once
# every so many accepted connections, not at each.
COUNT_EVERY_CONNECTIONS = 64
# The share of the limit in use from which each count warns.
NEAR_LIMIT = 0.9


class DescriptorWatch:
    """Warns as accepted connections bring the process near its file limit.

    Past the limit the event loop accepts each new connection and closes it at once
    (libuv's way out of EMFILE): clients see a broker that hangs up, and nothing else
    in the broker would say why.
    """

    def __init__(self, fd_dir: str = "/proc/self/fd") -> None:
        self._fd_dir = fd_dir
        self._accepted = 0

    def connection_accepted(self, open_connections: int) -> str | None:
        """A warning to log, or None while there is room (or nothing to count with)."""
        self._accepted += 1
        if self._accepted % COUNT_EVERY_CONNECTIONS:
            return None
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        try:
            in_use = len(os.listdir(self._fd_dir))
        except OSError:  # no /proc: not Linux
            return None
        if soft == resource.RLIM_INFINITY or in_use < soft * NEAR_LIMIT:
            return None
        return (
            f"{in_use} of {soft} file descriptors in use ({open_connections} client"
            " connections): connections past the file limit are closed as soon as they"
            " are accepted; raise the limit (ulimit -n, or LimitNOFILE under systemd)"
        )
