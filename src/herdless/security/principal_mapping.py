"""The principal of a TLS client: its certificate's subject through `ssl.principal.mapping.rules`.

Kafka's SslPrincipalMapper, rule for rule. The setting is a comma-separated list of
`RULE:pattern/replacement/` (optionally ending `/L` or `/U` to lower- or upper-case the
result) and `DEFAULT` (the distinguished name unchanged); the first rule whose pattern
matches the whole name gives the principal's name. The rules are split and read with
Kafka's own two regular expressions, so its quirks come along: a pattern may hold commas,
`\\/` escapes a slash, empty entries are ignored, anything else is an invalid rule.

A pattern is a regular expression as Python's `re` reads it, with ASCII classes as Java's
defaults (`\\w`, `\\s`, case-insensitivity); the forms rules use (groups, classes, anchors,
greedy and lazy quantifiers) read the same in both. The replacement is in Java's syntax:
`$1` a group, `${name}` a named one, `\\` escapes the next character; a `$n` beyond the
pattern's groups is literal text, as Kafka makes it.

The name the rules see is the subject as Java's X500Principal.getName() writes it, which
herdless.security.distinguished_name reproduces: `CN=Duke,OU=ServiceUsers,O=Org,C=US`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from herdless.security.java_regex import ReplacementError, replace, replacement_parts
from herdless.security.principal import ANONYMOUS, KafkaPrincipal, user

DEFAULT_RULES = "DEFAULT"

# Kafka's RULE_PATTERN; groups: 1 DEFAULT, 2 the pattern, 4 the replacement, 6 the case
# flag, 7 whatever else the entry holds (empty for an empty entry, else an invalid rule).
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)", re.ASCII)
_PARSER = re.compile(_RULE, re.ASCII)


class PrincipalMappingError(ValueError):
    """An `ssl.principal.mapping.rules` that cannot be used, or a name no rule maps."""


@dataclass(frozen=True, slots=True)
class MappingRule:
    # None for DEFAULT: the distinguished name as it is.
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    to_lower: bool = False
    to_upper: bool = False

    def apply(self, distinguished_name: str) -> str | None:
        """The name this rule gives, or None when its pattern does not match the whole DN."""
        if self.pattern is None:
            return distinguished_name
        if self.pattern.fullmatch(distinguished_name) is None:
            return None
        result = replace(self.pattern, distinguished_name, self.replacement)
        # Kafka cases with Locale.ENGLISH, which Python's str methods agree with.
        if self.to_lower:
            return result.lower()
        if self.to_upper:
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        flag = "/L" if self.to_lower else "/U" if self.to_upper else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{flag}"


@dataclass(frozen=True, slots=True)
class SslPrincipalMapper:
    rules: tuple[MappingRule, ...]

    @classmethod
    def from_rules(cls, rules: str | None) -> SslPrincipalMapper:
        """The mapper for an `ssl.principal.mapping.rules` value; None is Kafka's default,
        DEFAULT. PrincipalMappingError names an invalid rule."""
        text = DEFAULT_RULES if rules is None else rules
        return cls(tuple(_parse(entry) for entry in _split(text) if entry))

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        raise PrincipalMappingError(
            f"no rule of ssl.principal.mapping.rules applies to {distinguished_name!r}"
            f" (rules: {', '.join(map(str, self.rules)) or 'none'})"
        )

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(map(str, self.rules))}])"


def principal_from_certificate(
    certificate_der: bytes | None, mapper: SslPrincipalMapper
) -> KafkaPrincipal:
    """The principal of a client that presented this certificate (DER, as
    `SSLObject.getpeercert(binary_form=True)` gives it): User and the mapped subject.
    No certificate is User:ANONYMOUS, as Kafka has it. PrincipalMappingError when no
    rule maps the subject (Kafka fails that client's authentication)."""
    from herdless.security.distinguished_name import subject_name

    if not certificate_der:
        return ANONYMOUS
    return user(mapper.name(subject_name(certificate_der)))


def _split(text: str) -> list[str]:
    """The entries of the setting as Kafka's splitter finds them."""
    text = _java_trim(text)
    entries = []
    position = 0
    # Java's Matcher.find(): after an empty match the next search starts one further on.
    while position <= len(text):
        match = _SPLITTER.search(text, position)
        if match is None:
            break
        entries.append(match.group(1))
        position = match.end() + (1 if match.end() == match.start() else 0)
    return entries


def _parse(entry: str) -> MappingRule:
    match = _PARSER.match(entry)
    if match is None or match.end() != len(entry):
        raise PrincipalMappingError(f"invalid rule in ssl.principal.mapping.rules: {entry!r}")
    if match.group(1) is not None:
        return MappingRule()
    pattern_text, replacement, flag = match.group(2), match.group(4), match.group(6)
    try:
        pattern = re.compile(pattern_text, re.ASCII)
    except re.error as exc:
        raise PrincipalMappingError(
            f"ssl.principal.mapping.rules: the pattern of {entry!r} is not a regular"
            f" expression: {exc}"
        ) from None
    replacement = _escape_literal_back_references(replacement, pattern.groups)
    try:
        replacement_parts(replacement, pattern)
    except ReplacementError as exc:
        raise PrincipalMappingError(f"ssl.principal.mapping.rules: {entry!r}: {exc}") from None
    return MappingRule(pattern, replacement, flag == "L", flag == "U")


def _escape_literal_back_references(replacement: str, group_count: int) -> str:
    """A `$n` naming a group the pattern lacks becomes literal text (Kafka took this from
    Apache NiFi). Kafka finds the references in the original text but inserts each
    backslash into the text it is editing, at the original position: with two such
    references the second backslash lands one character early. Kept, so that rules map
    names exactly as Kafka does."""
    if group_count == 0:
        return replacement
    value = replacement
    for match in re.finditer(r"\$(\d+)", replacement, re.ASCII):
        digits = match.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > group_count and index >= 10:
            index //= 10
        if index > group_count:
            start = match.start(1)
            value = value[: start - 1] + "\\" + value[start - 1 :]
    return value


def _java_trim(text: str) -> str:
    # String.trim(): every character up to U+0020 counts as space.
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]
