"""SaslHandshake and SaslAuthenticate where no SASL exchange is under way: on a listener
without SASL, or on a connection already authenticated that is not re-authenticating.
A SASL listener's connection answers them itself (broker/network/sasl_authentication.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext


async def handle_sasl_handshake(context: BrokerContext, request: Request) -> Any:
    return response_class(ApiKey.SASL_HANDSHAKE)(
        error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[]
    )


async def handle_sasl_authenticate(context: BrokerContext, request: Request) -> Any:
    return response_class(ApiKey.SASL_AUTHENTICATE)(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate on a connection that is not authenticating with SASL",
        auth_bytes=b"",
        session_lifetime_ms=0,
    )
