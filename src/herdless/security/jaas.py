"""`sasl.jaas.config` as Kafka reads it: one login module, its control flag, and its
options, e.g.

    org.apache.kafka.common.security.scram.ScramLoginModule required
        username="broker" password="broker-secret";

herdless reads it where Kafka does: for the broker's own login between brokers (the
username and password it authenticates with), and for options of the OAUTHBEARER
module. Values are quoted strings or bare words; the entry ends with a semicolon.

A JAAS file (`java.security.auth.login.config`) holds named sections of such entries,
as Java reads them, `//` and `/* */` comments allowed:

    Client {
        org.apache.zookeeper.server.auth.DigestLoginModule required
        username="kafka" password="kafka-secret";
    };
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"{}]+)|([=;{}]))')
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
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


def quote(value: str) -> str:
    """`value` as a quoted JAAS option value, which the parsers here read back as is."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_jaas_config(text: str) -> JaasEntry:
    return _entry(_tokens(text, "sasl.jaas.config"), "sasl.jaas.config")


def parse_jaas_file(text: str, what: str = "the JAAS file") -> dict[str, list[JaasEntry]]:
    """A JAAS file's sections by name, each with its login module entries, in order.
    JaasConfigError says where it cannot be read (naming `what`, never a value)."""
    tokens = _tokens(text, what)
    sections: dict[str, list[JaasEntry]] = {}
    index = 0
    while index < len(tokens):
        name, quoted = tokens[index]
        if quoted or name in _PUNCTUATION or tokens[index + 1 : index + 2] != [("{", False)]:
            raise JaasConfigError(f"{what}: expected `Name {{ ... }};`, section by section")
        try:
            close = tokens.index(("}", False), index + 2)
        except ValueError:
            raise JaasConfigError(f"{what}: section {name} has no closing '}}'") from None
        if tokens[close + 1 : close + 2] != [(";", False)]:
            raise JaasConfigError(f"{what}: section {name} must end with '}};'")
        if name in sections:
            raise JaasConfigError(f"{what}: section {name} is given twice")
        body = tokens[index + 2 : close]
        entries: list[JaasEntry] = []
        while body:
            end = body.index((";", False)) + 1 if (";", False) in body else len(body)
            entries.append(_entry(body[:end], f"{what}, section {name}"))
            body = body[end:]
        if not entries:
            raise JaasConfigError(f"{what}: section {name} has no login module")
        sections[name] = entries
        index = close + 2
    return sections


_PUNCTUATION = frozenset("=;{}")


def _entry(tokens: list[tuple[str, bool]], what: str) -> JaasEntry:
    if len(tokens) < 3 or tokens[-1] != (";", False):
        raise JaasConfigError(
            f"{what} must be `LoginModule flag key=\"value\" ...;` ending with ';'"
        )
    (module, quoted_module), (flag, _) = tokens[0], tokens[1]
    if quoted_module or not re.fullmatch(r"[\w.$]+", module):
        raise JaasConfigError(f"{what} must begin with a login module's class name")
    if flag.lower() not in FLAGS:
        raise JaasConfigError(f"{what}: the control flag must be one of {', '.join(FLAGS)}")
    options: dict[str, str] = {}
    body = tokens[2:-1]
    if len(body) % 3:
        raise JaasConfigError(f"{what}: options are key=value pairs")
    for index in range(0, len(body), 3):
        (key, quoted_key), (equals, quoted_equals), (value, quoted_value) = body[index : index + 3]
        if (
            quoted_key
            or key in _PUNCTUATION
            or (equals, quoted_equals) != ("=", False)
            or (value in _PUNCTUATION and not quoted_value)
        ):
            raise JaasConfigError(f"{what}: options are key=value pairs")
        options[key] = value
    return JaasEntry(module, flag.lower(), options)


def _tokens(text: str, what: str) -> list[tuple[str, bool]]:
    """(token, was it quoted) for each token of `text`, comments left out."""
    tokens: list[tuple[str, bool]] = []
    position, text = 0, text.strip()
    while position < len(text):
        comment = _COMMENT.match(text, position)
        if comment is not None:
            position = comment.end()
        else:
            match = _TOKEN.match(text, position)
            if match is None or match.end() == position:
                raise JaasConfigError(f"{what}: cannot read it at character {position}")
            quoted, word, punctuation = match.groups()
            if quoted is not None:
                tokens.append((re.sub(r"\\(.)", r"\1", quoted), True))
            else:
                tokens.append((word or punctuation, False))
            position = match.end()
        while position < len(text) and text[position].isspace():
            position += 1
    return tokens
