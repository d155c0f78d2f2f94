"""CreateDelegationToken (38), RenewDelegationToken (39), ExpireDelegationToken (40) and
DescribeDelegationToken (41), KIP-48's delegation tokens.

kafka-python 3 has no classes for them, so they are built here with its machinery from
the schemas herdless ships (protocol/schemas/), Kafka 3.9's.
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from herdless.protocol import schemas


class CreateDelegationTokenRequest(ApiMessage, load_json=schemas):
    pass


class CreateDelegationTokenResponse(ApiMessage, load_json=schemas):
    pass


class RenewDelegationTokenRequest(ApiMessage, load_json=schemas):
    pass


class RenewDelegationTokenResponse(ApiMessage, load_json=schemas):
    pass


class ExpireDelegationTokenRequest(ApiMessage, load_json=schemas):
    pass


class ExpireDelegationTokenResponse(ApiMessage, load_json=schemas):
    pass


class DescribeDelegationTokenRequest(ApiMessage, load_json=schemas):
    pass


class DescribeDelegationTokenResponse(ApiMessage, load_json=schemas):
    pass
