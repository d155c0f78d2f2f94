"""ShareFetch (78) and ShareAcknowledge (79), the share-group data APIs (KIP-932), at v1,
the first stable version (Kafka 4.1), which librdkafka's ShareConsumer sends.

kafka-python 3 has no classes for them, so they are built here with its machinery
from schemas herdless ships (protocol/schemas/), and served through the same codec
as every other API.
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from herdless.protocol import schemas


class ShareFetchRequest(ApiMessage, load_json=schemas):
    pass


class ShareFetchResponse(ApiMessage, load_json=schemas):
    pass


class ShareAcknowledgeRequest(ApiMessage, load_json=schemas):
    pass


class ShareAcknowledgeResponse(ApiMessage, load_json=schemas):
    pass
