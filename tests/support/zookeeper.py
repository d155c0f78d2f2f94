"""A real Apache ZooKeeper server (Debian's zookeeper package) on 127.0.0.1, for tests."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from herdless.cli.zookeeper import ZooKeeperMissing
from herdless.cli.zookeeper import require_zookeeper as _require_zookeeper
from herdless.testing import zookeeper


def require_zookeeper() -> str:
    """The java command that runs ZooKeeper, or a loud failure saying what to install."""
    try:
        return _require_zookeeper()
    except ZooKeeperMissing as exc:
        raise RuntimeError(str(exc)) from None


class ZooKeeperProcess(zookeeper.ZooKeeperProcess):
    """The plugin's test ZooKeeper (herdless.testing), failing with RuntimeError when absent."""

    def __init__(
        self,
        data_dir: Path,
        *,
        host: str = "127.0.0.1",
        prefix: tuple[str, ...] = (),
        sasl_users: Mapping[str, str] | None = None,
    ) -> None:
        require_zookeeper()
        super().__init__(data_dir, host=host, prefix=prefix, sasl_users=sasl_users)
