"""`sasl.jaas.config` as Kafka reads it: one login module, its control flag, and its
options, e.g.

    org.apache.kafka.common.security.scram.ScramLoginModule required
        username="broker" password="broker-secret";

herdless reads it where Kafka does: for the broker's own login between brokers (the
username and password it authenticates with), and for options of the OAUTHBEARER
module. Values are quoted strings or bare words; the entry ends with a semicolon.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))')
FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasConfigError(ValueError):
    """sasl.jaas.config that cannot be read; the message says where (never a value)."""


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        # Options hold passwords: only their names are shown.
        return f"JaasEntry({self.login_module} {self.flag}, options={sorted(self.options)})"


def parse_jaas_config(text: str) -> JaasEntry:
    tokens = _tokens(text)
    if len(tokens) < 3 or tokens[-1] != (";", False):
        raise JaasConfigError(
            "sasl.jaas.config must be `LoginModule flag key=\"value\" ...;` ending with ';'"
        )
    (module, quoted_module), (flag, _) = tokens[0], tokens[1]
    if quoted_module or not re.fullmatch(r"[\w.$]+", module):
        raise JaasConfigError("sasl.jaas.config must begin with a login module's class name")
    if flag.lower() not in FLAGS:
        raise JaasConfigError(
            f"sasl.jaas.config: the control flag must be one of {', '.join(FLAGS)}"
        )
    options: dict[str, str] = {}
    body = tokens[2:-1]
    if len(body) % 3:
        raise JaasConfigError("sasl.jaas.config: options are key=value pairs")
    for index in range(0, len(body), 3):
        (key, quoted_key), (equals, _), (value, _) = body[index : index + 3]
        if quoted_key or equals != "=" or key in ("=", ";"):
            raise JaasConfigError("sasl.jaas.config: options are key=value pairs")
        options[key] = value
    return JaasEntry(module, flag.lower(), options)


def _tokens(text: str) -> list[tuple[str, bool]]:
    """(token, was it quoted) for each token of `text`."""
    tokens: list[tuple[str, bool]] = []
    position, text = 0, text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise JaasConfigError(f"sasl.jaas.config: cannot read it at character {position}")
        quoted, word, equals, semicolon = match.groups()
        if quoted is not None:
            tokens.append((re.sub(r"\\(.)", r"\1", quoted), True))
        else:
            tokens.append((word or equals or semicolon, False))
        position = match.end()
        while position < len(text) and text[position].isspace():
            position += 1
    return tokens
