"""Real herdless brokers for tests: a pytest plugin, and the classes under it.

`herdless.testing.plugin` is the pytest plugin (loaded by pytest through an
entry point; it is the only module here that imports pytest). The classes work
without pytest too, e.g. in unittest or a script:

    with HerdlessBroker(Path(tmp) / "data") as broker:
        broker.create_topic("orders")

Above cli/ in the layers: nothing else in herdless imports this package.
"""

from herdless.testing.broker import HerdlessBroker
from herdless.testing.clients import Brokers, Record
from herdless.testing.cluster import HerdlessCluster
from herdless.testing.kerberos import KerberosMissing, MitKdc
from herdless.testing.process import BrokerProcess, BrokerStartError, free_port

__all__ = [
    "BrokerProcess",
    "BrokerStartError",
    "HerdlessBroker",
    "HerdlessCluster",
    "KerberosMissing",
    "MitKdc",
    "Brokers",
    "Record",
    "free_port",
]
