"""How a broker or tool logs in to ZooKeeper, from Kafka's settings and JAAS file: the
rules of Kafka 3.x's JaasUtils.isZkSaslEnabled and KafkaZkClient.createZkClient."""

from __future__ import annotations

from pathlib import Path

import pytest

from herdless.cluster.zookeeper.login import read_zookeeper_security
from herdless.security.jaas import JaasConfigError, parse_jaas_file, quote
from herdless.security.zookeeper import (
    ZooKeeperLogin,
    ZooKeeperSecurity,
    ZooKeeperSecurityError,
    kafka_opts_properties,
    zookeeper_security,
)

SECRET = "zk-secret-value"
JAAS = f"""
/* One file for the broker's listeners and its ZooKeeper login, as Kafka's docs write it */
KafkaServer {{
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin"
    password="admin-secret";
}};
// The ZooKeeper client's section
Client {{
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="kafka"
    password={quote(SECRET)};
}};
"""
FILE = {"java.security.auth.login.config": "/etc/kafka/jaas.conf"}


def test_a_jaas_file_is_read_section_by_section_comments_left_out() -> None:
    sections = parse_jaas_file(JAAS)
    assert list(sections) == ["KafkaServer", "Client"]
    (client,) = sections["Client"]
    assert client.login_module == "org.apache.zookeeper.server.auth.DigestLoginModule"
    assert client.options == {"username": "kafka", "password": SECRET}


def test_a_section_may_hold_several_login_modules() -> None:
    text = 'Client { a.B required x=1; c.D optional y="2"; };'
    assert [e.login_module for e in parse_jaas_file(text)["Client"]] == ["a.B", "c.D"]


@pytest.mark.parametrize(
    "text",
    [
        f'Client {{ a.B required password="{SECRET}"; }}',  # no ; after }
        f'Client {{ a.B required password="{SECRET}";',  # no }
        f'Client a.B required password="{SECRET}"; }};',  # no {
        "Client { };",
        f'Client {{ a.B required password="{SECRET}"; }}; Client {{ a.B required; }};',
        f'Client {{ a.B required password "{SECRET}"; }};',
    ],
)
def test_unreadable_jaas_files_say_so_without_their_values(text: str) -> None:
    with pytest.raises(JaasConfigError) as info:
        parse_jaas_file(text, "jaas.conf")
    assert "jaas.conf" in str(info.value)
    assert SECRET not in str(info.value)


def test_the_client_section_logs_in_with_digest_md5() -> None:
    security = zookeeper_security({**FILE, "zookeeper.set.acl": "true"}, JAAS)
    assert security == ZooKeeperSecurity(ZooKeeperLogin("kafka", SECRET), set_acl=True)
    assert security.login is not None
    assert security.login.sasl_options() == {
        "mechanism": "DIGEST-MD5",
        "username": "kafka",
        "password": SECRET,
    }
    assert SECRET not in repr(security)


def test_no_file_or_no_client_section_is_no_login() -> None:
    assert zookeeper_security({}, None) == ZooKeeperSecurity()
    only_server = JAAS[: JAAS.index("// The ZooKeeper")]
    assert zookeeper_security(FILE, only_server) == ZooKeeperSecurity()


def test_another_section_is_chosen_by_zookeeper_sasl_clientconfig() -> None:
    text = JAAS.replace("Client {", "ZkBroker {")
    chosen = zookeeper_security({**FILE, "zookeeper.sasl.clientconfig": "ZkBroker"}, text)
    assert chosen.login == ZooKeeperLogin("kafka", SECRET)
    with pytest.raises(ZooKeeperSecurityError, match="has no section Missing"):
        zookeeper_security({**FILE, "zookeeper.sasl.clientconfig": "Missing"}, text)


@pytest.mark.parametrize(
    ("settings", "text", "words"),
    [
        # Kafka: "zookeeper.set.acl is true, but ... the verification of the JAAS login
        # file failed".
        ({"zookeeper.set.acl": "true"}, None, "zookeeper.set.acl=true needs a SASL login"),
        ({**FILE, "zookeeper.set.acl": "true"}, "Other { a.B required; };", "has none"),
        # Kafka refuses a Client section with SASL turned off.
        ({**FILE, "zookeeper.sasl.client": "false"}, JAAS, "zookeeper.sasl.client=false"),
        ({**FILE, "zookeeper.set.acl": "yes"}, JAAS, "yes for configuration zookeeper.set.acl"),
        (
            FILE,
            "Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };",
            "DIGEST-MD5 only, not Kerberos",
        ),
        (FILE, 'Client { a.B required username="kafka"; };', "needs password"),
        (FILE, f'Client {{ a.B required password="{SECRET}" }};', "/etc/kafka/jaas.conf"),
        # Not served, and never ignored: the broker would reach ZooKeeper in the clear.
        ({"zookeeper.ssl.client.enable": "true"}, None, "does not reach ZooKeeper over TLS"),
    ],
)
def test_settings_that_will_not_do_are_named(
    settings: dict[str, str], text: str | None, words: str
) -> None:
    with pytest.raises(ZooKeeperSecurityError, match=words) as info:
        zookeeper_security(settings, text)
    assert SECRET not in str(info.value)


def test_tools_set_acls_whenever_they_log_in() -> None:
    login = ZooKeeperLogin("kafka", SECRET)
    assert ZooKeeperSecurity(login).for_tools() == ZooKeeperSecurity(login, set_acl=True)
    assert ZooKeeperSecurity().for_tools() == ZooKeeperSecurity()


def test_kafka_opts_passes_the_system_properties() -> None:
    opts = (
        "-Xmx1G -Djava.security.auth.login.config=/etc/kafka/jaas.conf"
        " '-Dzookeeper.sasl.clientconfig=ZkBroker' -Dother.property=x"
    )
    assert kafka_opts_properties(opts) == {
        "java.security.auth.login.config": "/etc/kafka/jaas.conf",
        "zookeeper.sasl.clientconfig": "ZkBroker",
    }
    with pytest.raises(ZooKeeperSecurityError, match="KAFKA_OPTS"):
        kafka_opts_properties("-Dx='unterminated")


def test_the_file_comes_from_the_settings_first_then_kafka_opts(tmp_path: Path) -> None:
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    other = tmp_path / "other.conf"
    other.write_text(JAAS.replace('username="kafka"', 'username="other"'))
    environ = {"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"}
    from_opts = read_zookeeper_security({}, environ)
    assert from_opts.login == ZooKeeperLogin("kafka", SECRET)
    from_settings = read_zookeeper_security(
        {"java.security.auth.login.config": str(other)}, environ
    )
    assert from_settings.login == ZooKeeperLogin("other", SECRET)
    with pytest.raises(ZooKeeperSecurityError, match=f"cannot read {tmp_path / 'absent'}"):
        read_zookeeper_security({"java.security.auth.login.config": str(tmp_path / "absent")}, {})
