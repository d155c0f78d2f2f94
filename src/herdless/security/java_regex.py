"""Java's regular-expression replacements, for the settings Kafka reads with Java's regex
classes (`ssl.principal.mapping.rules`, `sasl.kerberos.principal.to.local.rules`).

Patterns are compiled by Python's `re` with ASCII classes, as Java's defaults are; the
forms such rules use read the same in both. What differs is the replacement's syntax,
which is Java's Matcher.appendReplacement here: `$1` a group, `${name}` a named one,
`\\` escapes the next character. Errors are raised when a rule is read rather than when a
client connects.
"""

from __future__ import annotations

import re


class ReplacementError(ValueError):
    """A replacement Java would refuse: the message says why."""


# A replacement, read once: literal text, or a group by number.
_Part = str | int


def replacement_parts(replacement: str, pattern: re.Pattern[str]) -> list[_Part]:
    """`replacement` read as Java reads it for `pattern`; ReplacementError as Java raises."""
    parts: list[_Part] = []
    literal: list[str] = []
    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\":
            if i + 1 == len(replacement):
                raise ReplacementError("the replacement ends in a lone backslash")
            literal.append(replacement[i + 1])
            i += 2
            continue
        if char != "$":
            literal.append(char)
            i += 1
            continue
        i += 1
        if i == len(replacement):
            raise ReplacementError("the replacement ends in '$' without a group")
        if replacement[i] == "{":
            end = replacement.find("}", i)
            name = replacement[i + 1 : end] if end != -1 else ""
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", name):
                raise ReplacementError("a '${' in the replacement names no group")
            if name not in pattern.groupindex:
                raise ReplacementError(f"the pattern has no group named {name!r}")
            reference: _Part = pattern.groupindex[name]
            i = end + 1
        else:
            if not "0" <= replacement[i] <= "9":
                raise ReplacementError(f"'${replacement[i]}' in the replacement is no group")
            number = int(replacement[i])
            i += 1
            # Java takes more digits only while they still name a group.
            while i < len(replacement) and "0" <= replacement[i] <= "9":
                longer = number * 10 + int(replacement[i])
                if longer > pattern.groups:
                    break
                number = longer
                i += 1
            if number > pattern.groups:
                raise ReplacementError(f"the pattern has no group {number}")
            reference = number
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append(reference)
    if literal:
        parts.append("".join(literal))
    return parts


def replace(
    pattern: re.Pattern[str], text: str, replacement: str, *, first_only: bool = False
) -> str:
    """Java's String.replaceAll (or replaceFirst): each match found as Matcher.find()
    finds them, an empty match stepping one character on."""
    parts = replacement_parts(replacement, pattern)

    def expand(match: re.Match[str]) -> str:
        return "".join(p if isinstance(p, str) else (match.group(p) or "") for p in parts)

    out: list[str] = []
    copied = 0
    position = 0
    while position <= len(text):
        match = pattern.search(text, position)
        if match is None:
            break
        out += [text[copied : match.start()], expand(match)]
        copied = match.end()
        if first_only:
            break
        position = match.end() + (1 if match.end() == match.start() else 0)
    out.append(text[copied:])
    return "".join(out)
