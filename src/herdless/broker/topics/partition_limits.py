"""How many partitions one request may add and one broker may host.

Requests over a limit are refused whole, before anything is created. The file
limit does not bound the partitions a broker hosts: their segment files are
closed when unused and others need the descriptors (file_limit.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from herdless.broker.topics.admin_errors import TopicAdminError
from herdless.protocol.errors import ErrorCode


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
