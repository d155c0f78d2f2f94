"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77), the share group APIs (KIP-932).

As for the consumer group APIs (consumer_group_messages.py): kafka-python has no
classes for them, so they are built with its machinery from the schemas herdless
ships (protocol/schemas/), at the one version Kafka 4.2 serves, v1 (v0 was Kafka
4.0's early access, removed in 4.1).
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
