"""This broker's Kerberos login as a client of the other brokers, for SASL GSSAPI between
brokers, as Kafka's KerberosLogin keeps a broker's ticket-granting ticket from its keytab.

The tickets live in a credential cache of the login's own (MIT's MEMORY cache, so that
no other program's tickets are used or overwritten), and MIT Kerberos takes them from
the keytab itself (gss_acquire_cred_from with `client_keytab`): once the ticket held is
halfway to its end, or within 30 s of it, the next login asks the KDC for a new one
first. Every connection to a peer logs in, so none uses a ticket about to expire and no
renewal thread is needed; a connection already logged in stays up past its ticket's end,
as Kafka's do.

A failed login (a keytab with stale keys, an unreachable KDC) is remembered: for
`sasl.kerberos.min.time.before.relogin` (Kafka's, 60 s) every login fails at once with
the same reason rather than asking the KDC again, so followers retrying every 200 ms
neither flood the KDC nor log a different line each time.

The calls are blocking (the KDC is asked over the network): PeerConnection makes them
off the event loop, and a lock keeps two threads from logging in at once.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable

from herdless.security.sasl import SaslAuthenticationFailed
from herdless.security.sasl_gssapi import gss_message, load_gssapi
from herdless.security.sasl_gssapi_client import GssapiClient

# Kafka's sasl.kerberos.min.time.before.relogin.
DEFAULT_MIN_TIME_BEFORE_RELOGIN_MS = 60_000

_caches = itertools.count(1)


class KerberosLogin:
    def __init__(
        self,
        principal: str,
        keytab: str | None,
        service_name: str,
        min_time_before_relogin_ms: int = DEFAULT_MIN_TIME_BEFORE_RELOGIN_MS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`keytab` None: MIT's default client keytab (KRB5_CLIENT_KTNAME)."""
        self._gssapi = load_gssapi()
        self.principal = principal
        self.service_name = service_name
        self._name = self._gssapi.Name(principal, self._gssapi.NameType.kerberos_principal)
        self._store = {"ccache": f"MEMORY:herdless-{os.getpid()}-{next(_caches)}"}
        if keytab is not None:
            self._store["client_keytab"] = keytab
        self._where = "the default client keytab" if keytab is None else f"keytab {keytab}"
        self._retry_after_s = min_time_before_relogin_ms / 1000
        self._clock = clock
        self._lock = threading.Lock()
        # (when, why) of the last failed login, until one succeeds.
        self._failed: tuple[float, str] | None = None

    def credentials(self) -> object:
        """gssapi.Credentials to initiate with, holding a ticket-granting ticket good for
        a while yet; SaslAuthenticationFailed says why there is none."""
        with self._lock:
            if self._failed is not None:
                failed_at, why = self._failed
                if self._clock() - failed_at < self._retry_after_s:
                    raise SaslAuthenticationFailed(why)
            try:
                credentials = self._gssapi.Credentials(
                    name=self._name, usage="initiate", store=self._store
                )
            except self._gssapi.exceptions.GSSError as exc:
                why = f"cannot log in as {self.principal} with {self._where}: {gss_message(exc)}"
                self._failed = (self._clock(), why)
                raise SaslAuthenticationFailed(why) from None
            self._failed = None
            return credentials

    def client(self, host: str) -> GssapiClient:
        """A SASL client logging in to the broker at `host` as this broker."""
        return GssapiClient(self.credentials(), self.service_name, host, self.principal)
