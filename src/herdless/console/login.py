"""Who may look: the console's login, and what a signed-in user is shown.

A console with a login asks for a user name and password, checks them as the
brokers check a SASL login, and shows the user only the topics, groups and
transactional ids their ACLs let them describe (Kafka's DESCRIBE, which READ, WRITE,
DELETE and ALTER imply). Signed-in browsers hold a random session token in a cookie; the token is
forgotten after a while without a request, and at logout.

No sockets and no clock of its own here: server.py asks, with the time.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from herdless.security.authorizer import Authorizer

# A session not used for this long is forgotten: the next request asks to log in.
IDLE_TIMEOUT_S = 8 * 3600.0
# Sessions kept at once: logins beyond it push out the least recently used.
MAX_SESSIONS = 10_000
COOKIE = "herdless_console_session"


@dataclass(frozen=True)
class Viewer:
    """A signed-in user, as the pages filter for them: `user`, from the browser at `host`."""

    user: str
    host: str
    login: Login

    def topics(self, names: Iterable[str]) -> list[str]:
        return self.login.describable(self.user, self.host, "topic", names)

    def groups(self, names: Iterable[str]) -> list[str]:
        return self.login.describable(self.user, self.host, "group", names)

    def transactional_ids(self, names: Iterable[str]) -> list[str]:
        return self.login.describable(self.user, self.host, "transactional_id", names)

    def reading_settings(self, topic: str, own: Mapping[str, str]) -> Mapping[str, str] | None:
        return self.login.reading_settings(self.user, self.host, topic, own)


class LoginUnavailable(RuntimeError):
    """The brokers cannot check a login now; the message says why."""


class Login:
    """How the console checks a login, and what a user may describe."""

    def __init__(self) -> None:
        self.sessions = Sessions()

    def check(self, user: str, password: str) -> bool:
        raise NotImplementedError

    def describable(self, user: str, host: str, kind: str, names: Iterable[str]) -> list[str]:
        """The names (of topics, groups or transactional ids: `kind`) the user may
        describe, in order."""
        raise NotImplementedError

    def reading_settings(
        self, user: str, host: str, topic: str, own: Mapping[str, str]
    ) -> Mapping[str, str] | None:
        """The client settings that read `topic`'s records as `user`: `own` (the
        console's client's) once the console has checked that the user may READ it, or
        the user's own; None when the user may not."""
        raise NotImplementedError

    def close(self) -> None:
        """Let go of what the login holds (clients of the brokers)."""


class BrokerLogin(Login):
    """For a console in the broker's process: logins checked against the broker's SCRAM
    credentials (as its SASL PLAIN login checks a password), and what a user may
    describe by the broker's authorizer (everything, when it runs without one)."""

    def __init__(
        self, check_password: Callable[[str, str], bool], authorizer: Authorizer | None
    ) -> None:
        super().__init__()
        self._check_password = check_password
        self._authorizer = authorizer

    def check(self, user: str, password: str) -> bool:
        return bool(user) and self._check_password(user, password)

    def describable(self, user: str, host: str, kind: str, names: Iterable[str]) -> list[str]:
        if self._authorizer is None:
            return list(names)
        from herdless.security.acls import AclOperation, ResourceType
        from herdless.security.principal import KafkaPrincipal

        resource = {
            "topic": ResourceType.TOPIC,
            "group": ResourceType.GROUP,
            "transactional_id": ResourceType.TRANSACTIONAL_ID,
        }[kind]
        principal = KafkaPrincipal("User", user)
        return self._authorizer.authorized_names(
            principal, host, AclOperation.DESCRIBE, resource, names
        )

    def reading_settings(
        self, user: str, host: str, topic: str, own: Mapping[str, str]
    ) -> Mapping[str, str] | None:
        if self._authorizer is None:
            return own
        from herdless.security.acls import AclOperation, ResourceType
        from herdless.security.principal import KafkaPrincipal

        # Fetch asks READ on the topic, as the broker's authorizer decides it.
        principal = KafkaPrincipal("User", user)
        allowed = self._authorizer.authorize(
            principal, host, AclOperation.READ, ResourceType.TOPIC, topic
        )
        return own if allowed else None


class Sessions:
    """Session tokens of signed-in browsers, each with its user and when last used."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, tuple[str, float]] = {}

    def open(self, user: str, now: float) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._forget_idle(now)
            if len(self._sessions) >= MAX_SESSIONS:
                oldest = min(self._sessions, key=lambda t: self._sessions[t][1])
                del self._sessions[oldest]
            self._sessions[token] = (user, now)
        return token

    def user(self, token: str | None, now: float) -> str | None:
        """The user of a session still open, which this request keeps alive."""
        if not token:
            return None
        with self._lock:
            found = self._sessions.get(token)
            if found is None or now - found[1] > IDLE_TIMEOUT_S:
                self._sessions.pop(token, None)
                return None
            self._sessions[token] = (found[0], now)
            return found[0]

    def close(self, token: str | None) -> None:
        with self._lock:
            self._sessions.pop(token or "", None)

    def _forget_idle(self, now: float) -> None:
        idle = [t for t, (_, used) in self._sessions.items() if now - used > IDLE_TIMEOUT_S]
        for token in idle:
            del self._sessions[token]
