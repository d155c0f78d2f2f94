from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from herdless.storage import LogConfig, PartitionLog

OpenLog = Callable[..., PartitionLog]


@pytest.fixture
def open_log(tmp_path: Path) -> Iterator[OpenLog]:
    """Open (or reopen) a partition log under tmp_path (t-0 unless `name` says otherwise)
    with topic configs given as keywords (segment_bytes="100"); every log is closed at the end."""
    opened: list[PartitionLog] = []

    def opener(
        now_ms: int = 0, *, name: str = "t-0", follows_log_end: bool = True, **configs: str
    ) -> PartitionLog:
        names = {key.replace("_", "."): value for key, value in configs.items()}
        config = LogConfig.from_topic_configs(names)
        partition_log = PartitionLog.open(
            tmp_path / name, "t", 0, config, now_ms, high_watermark_follows_log_end=follows_log_end
        )
        opened.append(partition_log)
        return partition_log

    yield opener
    for partition_log in opened:
        partition_log.close()
