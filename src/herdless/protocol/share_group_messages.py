"""The share group APIs the group coordinator answers (KIP-932): ShareGroupHeartbeat (76),
ShareGroupDescribe (77), and the admin APIs on a share group's start offsets,
DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92).

As for the consumer group APIs (consumer_group_messages.py): kafka-python has no
classes for them, so they are built with its machinery from the schemas herdless
ships (protocol/schemas/), at the one version Kafka 4.2 serves, v1 (v0 was Kafka
4.0's early access, removed in 4.1); the offsets APIs at v0, and DescribeShareGroupOffsets
v1 as well, which adds each partition's lag (KIP-1226, Kafka 4.2).
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from herdless.protocol import schemas


class ShareGroupHeartbeatRequest(ApiMessage, load_json=schemas):
    pass


class ShareGroupHeartbeatResponse(ApiMessage, load_json=schemas):
    pass


class ShareGroupDescribeRequest(ApiMessage, load_json=schemas):
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=schemas):
    pass


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=schemas):
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=schemas):
    pass


class AlterShareGroupOffsetsRequest(ApiMessage, load_json=schemas):
    pass


class AlterShareGroupOffsetsResponse(ApiMessage, load_json=schemas):
    pass


class DeleteShareGroupOffsetsRequest(ApiMessage, load_json=schemas):
    pass


class DeleteShareGroupOffsetsResponse(ApiMessage, load_json=schemas):
    pass
