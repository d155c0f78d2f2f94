"""For a console in a process of its own: a login is a SASL login to the brokers.

The console cannot read the brokers' credentials, so it asks the brokers
themselves: a user is signed in once a client with their name and password
(over the SASL listener the console's own client settings name) has
bootstrapped, which the broker allows only for a good password. What the user
is shown is what that client, acting as them, may list: the brokers' authorizer
leaves out of Metadata and ListGroups what the user may not describe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from herdless.admin.errors import AdminError
from herdless.admin.group_state import list_group_ids
from herdless.admin.transaction_state import list_transactions
from herdless.console.login import Login, LoginUnavailable

if TYPE_CHECKING:
    from kafka import KafkaAdminClient

CLIENT_ID = "herdless-console-login"
SASL_PROTOCOLS = ("SASL_SSL", "SASL_PLAINTEXT")
# What a user's client listed is kept this long: pages refresh every interval.
LISTED_FOR_S = 2.0


class SaslLogin(Login):
    def __init__(self, bootstrap: str, client_settings: Mapping[str, str]) -> None:
        """`client_settings` (librdkafka's names) must name a SASL security protocol."""
        super().__init__()
        protocol = client_settings.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in SASL_PROTOCOLS:
            raise ValueError(
                "a login is checked by logging in to the brokers over SASL: give the"
                f" console SASL client settings (security.protocol is {protocol})"
            )
        self._bootstrap = bootstrap
        self._settings = dict(client_settings)
        self._lock = threading.Lock()
        # Each signed-in user's own client and its settings (their records are read
        # with a client of these), and what it listed when.
        self._clients: dict[str, KafkaAdminClient] = {}
        self._user_settings: dict[str, dict[str, str]] = {}
        self._listed: dict[tuple[str, str], tuple[float, set[str]]] = {}

    def check(self, user: str, password: str) -> bool:
        from herdless.admin.client import open_admin

        if not user:
            return False
        settings = {**self._settings, "sasl.username": user, "sasl.password": password}
        try:
            client = open_admin(self._bootstrap, CLIENT_ID, settings)
        except AdminError as exc:
            if "authentication failed" in str(exc):
                return False
            raise LoginUnavailable(str(exc)) from None
        with self._lock:
            previous = self._clients.pop(user, None)
            self._clients[user] = client
            self._user_settings[user] = settings
            self._listed = {key: value for key, value in self._listed.items() if key[0] != user}
        if previous is not None:
            previous.close()
        return True

    def describable(self, user: str, host: str, kind: str, names: Iterable[str]) -> list[str]:
        allowed = self._list(user, kind)
        return [name for name in names if name in allowed]

    def reading_settings(
        self, user: str, host: str, topic: str, own: Mapping[str, str]
    ) -> Mapping[str, str] | None:
        # Read with the user's own login: the brokers' authorizer decides, as for any
        # client of theirs. None for a user signed in before this console restarted.
        with self._lock:
            return self._user_settings.get(user)

    def _list(self, user: str, kind: str) -> set[str]:
        now = time.monotonic()
        with self._lock:
            listed = self._listed.get((user, kind))
            if listed is not None and now - listed[0] < LISTED_FOR_S:
                return listed[1]
            client = self._clients.get(user)
            if client is None:  # signed in before this console restarted: nothing
                return set()
            try:
                if kind == "topic":
                    found = set(client.list_topics())
                elif kind == "transactional_id":
                    # ListTransactions leaves out ids the user may not describe.
                    found = {row["transactional_id"] for row in list_transactions(client)}
                else:
                    found = set(list_group_ids(client))
            except Exception:
                # The brokers do not answer now: show nothing rather than too much.
                found = set()
            self._listed[(user, kind)] = (now, found)
            return found

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
            self._user_settings = {}
        for client in clients:
            client.close()
