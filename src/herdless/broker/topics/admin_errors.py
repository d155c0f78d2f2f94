"""The error a topic administration request is refused with."""

from __future__ import annotations

from herdless.protocol.errors import ErrorCode


class TopicAdminError(Exception):
    def __init__(self, error_code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code
        self.message = message
