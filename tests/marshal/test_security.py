"""Marshal over SASL_SSL: the coordination log, the consumers' fetches and `herdless
marshal status` log in, with client settings in the Java client's names or librdkafka's."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from herdless.marshal import Marshaler, MarshalError
from herdless.testing.broker import HerdlessBroker
from herdless.testing.security import Security
from tests.marshal.cluster import COORDINATION_PARTITIONS, wait_for
from tests.support.cli import herdless, succeeded, table_rows

PASSWORD = "marshal-Secret-9e2b"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HerdlessBroker]:
    security = Security(users={"invoicer": PASSWORD})
    with HerdlessBroker(tmp_path_factory.mktemp("marshal-sasl") / "data", security=security) as b:
        yield b


def test_consumers_coordinate_and_read_over_sasl_ssl(
    secured: HerdlessBroker, tmp_path: Path
) -> None:
    secured.create_topic("invoices", partitions=2)
    secured.produce("invoices", [f"invoice-{i}" for i in range(20)])
    java = secured.client_settings("invoicer").java()
    with Marshaler(
        secured.bootstrap, coordination_partitions=COORDINATION_PARTITIONS, config=java
    ) as marshaler:
        consumer = marshaler.consumer("billing", ["invoices"], "invoicer-1", heartbeat_interval=1.0)
        wait_for("both claims", lambda: len(consumer.held()) == 2, 30, every=0.1)
        read: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(read) < 20 and time.monotonic() < deadline:
            batch = consumer.poll(0.5)
            read += [record.value for record in batch.records] if batch else []
        assert sorted(read) == sorted(f"invoice-{i}".encode() for i in range(20))

        # What the consumers agree on, read by the command over the same listener.
        config = secured.client_settings("invoicer").write_properties(tmp_path / "i.properties")
        status = herdless(
            "marshal",
            "status",
            "-g",
            "billing",
            "-b",
            secured.bootstrap,
            "--command-config",
            str(config),
        )
        owners = {row[2] for row in table_rows(succeeded(status))}
        assert owners == {"invoicer-1"}


def test_librdkafka_names_work_too(secured: HerdlessBroker) -> None:
    settings = secured.client_settings("invoicer", mechanism="PLAIN").librdkafka()
    settings.pop("bootstrap.servers")
    with Marshaler(
        secured.bootstrap, coordination_partitions=COORDINATION_PARTITIONS, config=settings
    ) as marshaler:
        assert marshaler.state() is not None


def test_a_setting_that_cannot_be_honoured_is_named(secured: HerdlessBroker) -> None:
    with pytest.raises(MarshalError, match="ssl.truststore.location: a JKS trust store"):
        Marshaler(secured.bootstrap, config={"ssl.truststore.location": "/etc/ca.jks"})


def test_a_wrong_password_is_named_at_once(secured: HerdlessBroker) -> None:
    java = secured.client_settings("invoicer").java()
    java["sasl.jaas.config"] = java["sasl.jaas.config"].replace(PASSWORD, "wrong")
    started = time.monotonic()
    with pytest.raises(MarshalError, match="refused the client: authentication failed"):
        Marshaler(secured.bootstrap, config=java)
    assert time.monotonic() - started < 10  # not librdkafka's whole wait
