from __future__ import annotations

import itertools

import pytest

from herdless.testing import HerdlessBroker

_topics = itertools.count()


@pytest.fixture
def orders(herdless_broker: HerdlessBroker) -> str:
    """A new topic of three partitions on the session's broker, for this test alone."""
    name = f"orders-{next(_topics)}"
    herdless_broker.create_topic(name, partitions=3)
    return name
