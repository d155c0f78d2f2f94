"""Kerberos principals to Kafka user names: `sasl.kerberos.principal.to.local.rules`.

Kafka's KerberosName and KerberosShortNamer, rule for rule (they follow Hadoop's
auth_to_local). The setting is a list of rules, tried in order until one gives a name:

- `DEFAULT`: a name of the default realm (krb5.conf's default_realm) gives its first
  component: `alice@EXAMPLE.COM` and `alice/admin@EXAMPLE.COM` give `alice`.
- `RULE:[n:format](match)s/pattern/replacement/g/L`: applies to names of n components;
  `format` builds a string from them (`$0` the realm, `$1` the first component, `$2` the
  second), which must match `match` as a whole if given; then `pattern` is replaced by
  `replacement` (every match with `g`, else the first); `/L` or `/U` lower- or
  upper-cases the result. A result that still holds `/` or `@` is refused.

Patterns are regular expressions as Python's `re` reads them with ASCII classes (see
herdless.security.java_regex); replacements are in Java's syntax (`$1`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from herdless.security.java_regex import ReplacementError, replace, replacement_parts

DEFAULT_RULES = ("DEFAULT",)

# Kafka's NAME_PARSER: at most two components, then the realm.
_NAME = re.compile(r"([^/@]*)(/([^/@]*))?@([^/@]*)")
# Kafka's RULE_PARSER; groups: 2 DEFAULT, 5 the number of components, 6 the format,
# 8 the match, 10 the pattern, 11 the replacement, 12 g, 13 L or U.
_RULE = re.compile(
    r"((DEFAULT)|((RULE:\[(\d*):([^\]]*)](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?/?(L|U)?)))",
    re.ASCII,
)
# Kafka's PARAMETER_PATTERN: literal text, then at most one `$n`.
_PARAMETER = re.compile(r"([^$]*)(\$(\d*))?", re.ASCII)
_NON_SIMPLE = re.compile(r"[/@]")


class KerberosNameError(ValueError):
    """A malformed Kerberos name, or rules that cannot be read; the message says which."""


class NoMatchingRule(KerberosNameError):
    """No rule gives a simple name for this principal (the client is refused)."""


@dataclass(frozen=True, slots=True)
class KerberosName:
    service_name: str
    host_name: str | None = None
    realm: str | None = None

    @classmethod
    def parse(cls, principal: str) -> KerberosName:
        match = _NAME.fullmatch(principal)
        if match is None:
            if "@" in principal:
                raise KerberosNameError(f"Malformed Kerberos name: {principal}")
            return cls(principal)
        return cls(match.group(1), match.group(3), match.group(4))

    def __str__(self) -> str:
        text = self.service_name
        if self.host_name is not None:
            text += f"/{self.host_name}"
        if self.realm is not None:
            text += f"@{self.realm}"
        return text


@dataclass(frozen=True, slots=True)
class KerberosRule:
    default_realm: str
    # None: DEFAULT
    components: int | None = None
    format: str = ""
    match: re.Pattern[str] | None = None
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    repeat: bool = False
    to_lower: bool = False
    to_upper: bool = False

    def apply(self, params: list[str]) -> str | None:
        """The short name for `params` ([realm, component, ...]), or None when this rule
        does not apply. NoMatchingRule when it gives a name that is not simple."""
        result: str | None = None
        if self.components is None:
            if params[0] == self.default_realm:
                result = params[1]
        elif len(params) - 1 == self.components:
            base = replace_parameters(self.format, params)
            if self.match is None or self.match.fullmatch(base):
                if self.pattern is None:
                    result = base
                else:
                    result = replace(
                        self.pattern, base, self.replacement, first_only=not self.repeat
                    )
        if result is not None and _NON_SIMPLE.search(result):
            raise NoMatchingRule(f"Non-simple name {result} after auth_to_local rule {self}")
        if result is not None and self.to_lower:
            return result.lower()
        if result is not None and self.to_upper:
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.components is None:
            return "DEFAULT"
        text = f"RULE:[{self.components}:{self.format}]"
        if self.match is not None:
            text += f"({self.match.pattern})"
        if self.pattern is not None:
            text += f"s/{self.pattern.pattern}/{self.replacement}/{'g' if self.repeat else ''}"
        if self.to_lower:
            text += "/L"
        if self.to_upper:
            text += "/U"
        return text


def replace_parameters(format: str, params: list[str]) -> str:
    """`format` with each `$n` replaced by params[n] (no recursion into what is put in)."""
    out: list[str] = []
    start = 0
    while start < len(format):
        match = _PARAMETER.match(format, start)
        assert match is not None  # the pattern matches anywhere, and moves on
        out.append(match.group(1))
        number = match.group(3)
        if number is not None:
            if not number:
                raise KerberosNameError(f"bad format in username mapping in {format!r}")
            index = int(number)
            if index >= len(params):
                raise KerberosNameError(
                    f"index {index} from {format} is outside of the valid range 0 to"
                    f" {len(params) - 1}"
                )
            out.append(params[index])
        start = match.end()
    return "".join(out)


@dataclass(frozen=True, slots=True)
class KerberosShortNamer:
    rules: tuple[KerberosRule, ...]

    @classmethod
    def from_rules(cls, default_realm: str, rules: list[str] | None = None) -> KerberosShortNamer:
        """The short namer for these rules (None: DEFAULT alone); KerberosNameError names
        an invalid rule."""
        texts = DEFAULT_RULES if rules is None else rules
        return cls(tuple(_parse_rule(default_realm, text) for text in texts))

    def short_name(self, name: KerberosName) -> str:
        if name.host_name is None:
            if name.realm is None:
                return name.service_name  # already simple
            params = [name.realm, name.service_name]
        else:
            params = [name.realm or "", name.service_name, name.host_name]
        for rule in self.rules:
            result = rule.apply(params)
            if result is not None:
                return result
        raise NoMatchingRule(
            f"No rules apply to {name}, rules [{', '.join(str(r) for r in self.rules)}]"
        )

    def __str__(self) -> str:
        return f"KerberosShortNamer(principalToLocalRules = [{', '.join(map(str, self.rules))}])"


def split_rules(value: str | None) -> list[str] | None:
    """The setting's value as Kafka's list type splits it: commas with any spaces around
    them, an empty value no rule at all, an empty entry kept (and refused as a rule)."""
    if value is None:
        return None
    value = value.strip()
    return re.split(r"\s*,\s*", value) if value else []


def _parse_rule(default_realm: str, text: str) -> KerberosRule:
    match = _RULE.match(text)
    if match is None:
        raise KerberosNameError(f"Invalid rule: {text}")
    if match.end() != len(text):
        raise KerberosNameError(
            f"Invalid rule: `{text}`, unmatched substring: `{text[match.end() :]}`"
        )
    if match.group(2) is not None:
        return KerberosRule(default_realm)
    if not match.group(5):
        raise KerberosNameError(f"Invalid rule: `{text}`: it names no number of components")
    try:
        matching = None if match.group(8) is None else re.compile(match.group(8), re.ASCII)
        pattern = None if match.group(10) is None else re.compile(match.group(10), re.ASCII)
    except re.error as exc:
        raise KerberosNameError(f"Invalid rule: `{text}`: {exc}") from None
    replacement = match.group(11) or ""
    if pattern is not None:
        try:
            replacement_parts(replacement, pattern)
        except ReplacementError as exc:
            raise KerberosNameError(f"Invalid rule: `{text}`: {exc}") from None
    return KerberosRule(
        default_realm,
        int(match.group(5)),
        match.group(6),
        matching,
        pattern,
        replacement,
        match.group(12) == "g",
        match.group(13) == "L",
        match.group(13) == "U",
    )
