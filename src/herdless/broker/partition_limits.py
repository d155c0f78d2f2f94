"""How many partitions one request may add and one broker may host.

Each partition holds its active segment open: the .log, .index and .timeindex
files, three descriptors. A broker asked to host more partitions than its file
limit allows fails half-way with `Too many open files`, so the broker-wide limit
is lowered at start to what the limit can hold, keeping a share for sockets.
Requests over a limit are refused whole, before anything is created.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

from herdless.broker.admin_errors import TopicAdminError
from herdless.protocol.errors import ErrorCode

DESCRIPTORS_PER_PARTITION = 3
# Kept for client connections, replica fetchers, ZooKeeper and the odd file.
MIN_RESERVED_DESCRIPTORS = 256


@dataclass(frozen=True, slots=True)
class PartitionLimits:
    per_request: int
    per_broker: int

    def check_request(self, adding: int) -> None:
        """CreateTopics or CreatePartitions adding `adding` partitions in all."""
        if adding > self.per_request:
            raise TopicAdminError(
                ErrorCode.INVALID_PARTITIONS,
                f"the request adds {adding} partitions, more than"
                f" max.partitions.per.request ({self.per_request})",
            )

    def check_broker(self, node_id: int, hosted: int, adding: int) -> None:
        if hosted + adding > self.per_broker:
            raise TopicAdminError(
                ErrorCode.POLICY_VIOLATION,
                f"broker {node_id} hosts {hosted} partitions; {adding} more would exceed"
                f" max.broker.partitions ({self.per_broker})",
            )


def within_file_limit(max_broker_partitions: int) -> tuple[int, str | None]:
    """The broker-wide partition limit this process's file limit allows (the soft limit
    is first raised to the hard one, as far as the system lets us), and a note for the
    log if the configured limit was lowered."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        wanted = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    reserved = max(MIN_RESERVED_DESCRIPTORS, soft // 4)
    allowed = max(1, (soft - reserved) // DESCRIPTORS_PER_PARTITION)
    if max_broker_partitions <= allowed:
        return max_broker_partitions, None
    configured = "" if max_broker_partitions == 2**31 - 1 else f" {max_broker_partitions}"
    return allowed, (
        f"file limit {soft}: max.broker.partitions{configured} lowered to {allowed}"
        f" ({DESCRIPTORS_PER_PARTITION} descriptors per partition: .log, .index, .timeindex;"
        f" {reserved} kept for sockets)"
    )
