"""How a `herdless` command connects: admin/'s client with the command's own settings,
and every failure as one line naming it.

An AdminError (no broker answers, a refused login) is left to main.run(), which
prints every one the same way; what the client raises itself (a timeout, an
answer it cannot read) is put in words here, where the broker's address is known.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import typer

from herdless.admin.bootstrap import reachable
from herdless.admin.client import explain, open_admin
from herdless.admin.errors import AdminError
from herdless.cli.errors import fail
from herdless.cli.options import client_settings

if TYPE_CHECKING:
    from kafka import KafkaAdminClient


def require_reachable(bootstrap: str, timeout_s: float = 5.0) -> None:
    """Fail fast, naming the address, when no bootstrap server accepts a connection.

    Kafka clients retry an absent broker for tens of seconds before giving up.
    """
    if not reachable(bootstrap, timeout_s):
        raise fail(f"no broker answers at {bootstrap}")


@contextmanager
def connect(bootstrap: str) -> Iterator[KafkaAdminClient]:
    """An admin client with the command's client settings; any failure becomes one line
    naming it, and exit code 1."""
    admin = open_admin(bootstrap, settings=client_settings())
    from kafka.errors import KafkaError

    try:
        yield admin
    except (typer.Exit, AdminError):
        raise
    except KafkaError as exc:
        raise fail(explain(exc, bootstrap)) from None
    except Exception as exc:
        # An answer the client could not make sense of: still one clear line, since
        # a traceback tells an operator less than the exception's own words.
        raise fail(f"cannot make sense of the answer from {bootstrap}: {exc}") from None
    finally:
        admin.close()
