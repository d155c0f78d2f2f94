"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), the KIP-848 consumer group APIs.

kafka-python 3 has no classes for them, so they are built here with its
machinery from schemas herdless ships (protocol/schemas/), and served through
the same codec as every other API.
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from herdless.protocol import schemas


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=schemas):
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=schemas):
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=schemas):
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=schemas):
    pass
