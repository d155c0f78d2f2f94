"""The share coordinator's state APIs (KIP-932), which share partition leaders send to
the share coordinator: InitializeShareGroupState (83), ReadShareGroupState (84),
WriteShareGroupState (85), DeleteShareGroupState (86), ReadShareGroupStateSummary (87).

kafka-python 3 has no classes for them, so they are built here with its machinery
from schemas herdless ships (protocol/schemas/), and served through the same codec as
every other API.
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from herdless.protocol import schemas


class InitializeShareGroupStateRequest(ApiMessage, load_json=schemas):
    pass


class InitializeShareGroupStateResponse(ApiMessage, load_json=schemas):
    pass


class ReadShareGroupStateRequest(ApiMessage, load_json=schemas):
    pass


class ReadShareGroupStateResponse(ApiMessage, load_json=schemas):
    pass


class WriteShareGroupStateRequest(ApiMessage, load_json=schemas):
    pass


class WriteShareGroupStateResponse(ApiMessage, load_json=schemas):
    pass


class DeleteShareGroupStateRequest(ApiMessage, load_json=schemas):
    pass


class DeleteShareGroupStateResponse(ApiMessage, load_json=schemas):
    pass


class ReadShareGroupStateSummaryRequest(ApiMessage, load_json=schemas):
    pass


class ReadShareGroupStateSummaryResponse(ApiMessage, load_json=schemas):
    pass
