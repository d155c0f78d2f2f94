from __future__ import annotations

from pathlib import Path

import pytest

from herdless.cli import zookeeper as product_zookeeper
from tests.support import zookeeper


def test_missing_zookeeper_fails_loudly_with_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(product_zookeeper, "ZOOKEEPER_JAR", tmp_path / "absent.jar")
    with pytest.raises(RuntimeError, match=r"apt-get install -y zookeeper"):
        zookeeper.ZooKeeperProcess(tmp_path / "zk")
