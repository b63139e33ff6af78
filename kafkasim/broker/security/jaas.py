"""JAAS configuration text as Kafka's `sasl.jaas.config` takes it (JaasConfig's parser):

  <LoginModule class> <flag> [key=value ...];     flag: required | requisite | sufficient | optional

values quoted ("...", with \\" escapes) or bare tokens. PlainLoginModule's `user_<name>="<password>"`
entries are the users a broker's PLAIN mechanism accepts (PlainServerCallbackHandler).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kafkasim.config.types import ConfigValueError

_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))')
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ConfigValueError(f"Value not specified for key 'sasl.jaas.config' in JAAS config: unexpected "
                                   f"{text[pos:pos + 20]!r}")
        quoted, word, eq, semi = m.groups()
        if quoted is not None:
            out.append(("str", re.sub(r"\\(.)", r"\1", quoted)))
        elif word is not None:
            out.append(("str", word))
        else:
            out.append(("=" if eq else ";", eq or semi))
        pos = m.end()
    return out


def parse_jaas(text: str) -> list[LoginModule]:
    """The login modules of a JAAS config; ConfigValueError for a malformed one (Kafka's message
    where it has one)."""
    toks = _tokens(text)
    modules, i = [], 0
    while i < len(toks):
        if i + 1 >= len(toks) or toks[i][0] != "str" or toks[i + 1][1].lower() not in _FLAGS:
            raise ConfigValueError("Invalid JAAS config: login module name and control flag expected")
        name, flag = toks[i][1], toks[i + 1][1].lower()
        i += 2
        options: dict[str, str] = {}
        while i < len(toks) and toks[i][0] != ";":
            if i + 2 >= len(toks) or toks[i + 1][0] != "=" or toks[i + 2][0] != "str":
                raise ConfigValueError(f"Invalid JAAS config: option of {name} is not key=value")
            options[toks[i][1]] = toks[i + 2][1]
            i += 3
        if i >= len(toks):
            raise ConfigValueError("Invalid JAAS config: login module entry must end with ';'")
        modules.append(LoginModule(name, flag, options))
        i += 1
    if not modules:
        raise ConfigValueError("JAAS config entry not terminated by semi-colon")
    if len(modules) > 1:
        raise ConfigValueError(f"JAAS config property contains {len(modules)} login modules, should be 1 module")
    return modules


def plain_users(text: str) -> dict[str, str]:
    """user_<name>="<password>" entries of a PlainLoginModule config."""
    module = parse_jaas(text)[0]
    return {k[len("user_"):]: v for k, v in module.options.items() if k.startswith("user_")}
