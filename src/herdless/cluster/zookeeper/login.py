"""The ZooKeeper login and ACL choice of a broker or tool, from its settings, KAFKA_OPTS
and the JAAS file they name (the rules are herdless.security.zookeeper's).

Kafka reads `java.security.auth.login.config`, `zookeeper.sasl.client` and
`zookeeper.sasl.clientconfig` as Java system properties, which its scripts take from
KAFKA_OPTS (`-Djava.security.auth.login.config=/etc/kafka/jaas.conf`); herdless reads
them there too, so an environment set up for Kafka works unchanged, and as broker
settings, which win.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from herdless.security.zookeeper import (
    LOGIN_CONFIG,
    SET_ACL,
    SYSTEM_PROPERTIES,
    ZooKeeperSecurity,
    ZooKeeperSecurityError,
    kafka_opts_properties,
    login_config_path,
    zookeeper_security,
)


def read_zookeeper_security(
    settings: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> ZooKeeperSecurity:
    """ZooKeeperSecurityError names the setting or file that will not do."""
    environ = os.environ if environ is None else environ
    given = {key: value for key, value in settings.items() if key in (*SYSTEM_PROPERTIES, SET_ACL)}
    merged = {**kafka_opts_properties(environ.get("KAFKA_OPTS")), **given}
    path = login_config_path(merged)
    text = None
    if path is not None:
        try:
            text = Path(path).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not text"
            raise ZooKeeperSecurityError(f"{LOGIN_CONFIG}: cannot read {path}: {reason}") from None
    return zookeeper_security(merged, text)
