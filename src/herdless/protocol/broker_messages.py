"""ControlledShutdown (7), which a broker sends the controller before it stops.

kafka-python 3 has no classes for it (clients never send it), so they are built here
with its machinery from the schema herdless ships (protocol/schemas/), Kafka 3.9's.
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from herdless.protocol import schemas


class ControlledShutdownRequest(ApiMessage, load_json=schemas):
    pass


class ControlledShutdownResponse(ApiMessage, load_json=schemas):
    pass
