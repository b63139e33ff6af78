"""Generate kafkasim's protocol message classes from Kafka's own JSON message definitions.

    python -m kafkasim.protocol.codegen [--lib-dir real/maven/lib] [--out kafkasim/protocol/messages]

Reads ``common/message/*.json`` straight out of ``kafka-clients-<v>.jar`` (every request,
response and header, plus ConsumerProtocolSubscription/Assignment) and the ``__consumer_offsets``
records out of ``kafka-group-coordinator-<v>.jar`` (the ``__transaction_state`` ones out of
``kafka-transaction-coordinator-<v>.jar``, which Maven fetches with kafka_2.13), and writes one
Python module per API pair
(``produce.py`` holds ``ProduceRequest`` and ``ProduceResponse``), ``headers.py``,
``consumer_protocol.py``, ``consumer_offsets.py`` and ``__init__.py`` (the index ``api.py``
builds its registry from).

For every struct and every version the generator writes straight-line encode/decode functions:
runs of fixed-width fields become one precompiled ``struct.Struct`` pack/unpack_from, variable
fields call the small readers/writers of ``primitives.py``. Identical per-version bodies are
emitted once and shared. The output is deterministic (files and versions sorted, JSON field order
kept), so a regenerate-and-diff test can pin the committed modules to the jars.

This is a build tool: it is the only module of ``kafkasim.protocol`` that does I/O.
"""

from __future__ import annotations

import argparse
import json
import keyword
import re
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KAFKA_VERSION = "3.9.1"
MAX_VERSION = 0x7FFF  # open-ended "N+" ranges; Kafka versions are int16

CLIENTS_JAR = "kafka-clients-{v}.jar"
GROUP_COORDINATOR_JAR = "kafka-group-coordinator-{v}.jar"
TRANSACTION_COORDINATOR_JAR = "kafka-transaction-coordinator-{v}.jar"  # __transaction_state records
CONSUMER_PROTOCOL = ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment")
CONSUMER_OFFSETS = ("OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue")
TRANSACTION_LOG = ("TransactionLogKey", "TransactionLogValue")

FIXED = {  # type -> (struct format char, size)
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint16": ("H", 2),
    "uint32": ("I", 4),
    "float64": ("d", 8),
    "bool": ("?", 1),
}
PRIMITIVES = set(FIXED) | {"string", "bytes", "records", "uuid"}


# --------------------------------------------------------------------------- schema model


@dataclass(frozen=True)
class Versions:
    lo: int
    hi: int  # inclusive; lo > hi is the empty range

    @staticmethod
    def parse(s: str | None) -> Versions:
        if s is None or s == "none" or s == "":
            return Versions(1, 0)
        s = s.strip()
        if s.endswith("+"):
            return Versions(int(s[:-1]), MAX_VERSION)
        if "-" in s:
            lo, hi = s.split("-")
            return Versions(int(lo), int(hi))
        return Versions(int(s), int(s))

    def __contains__(self, v: int) -> bool:
        return self.lo <= v <= self.hi

    def empty(self) -> bool:
        return self.lo > self.hi

    def astuple(self) -> tuple[int, int]:
        return (1, 0) if self.empty() else (self.lo, self.hi)


@dataclass
class FieldDef:
    name: str
    attr: str
    type: str
    versions: Versions
    nullable: Versions
    tag: int | None
    tagged: Versions
    ignorable: bool
    default: str | None
    flex_override: Versions | None
    struct: StructDef | None = None

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.elem not in PRIMITIVES


@dataclass
class StructDef:
    name: str
    qual: str  # e.g. "ProduceRequest.TopicProduceData"
    fields: list[FieldDef]
    children: list[StructDef] = field(default_factory=list)  # classes nested in this one

    @property
    def alias(self) -> str:
        return "_" + self.qual.replace(".", "_")


@dataclass
class MessageDef:
    name: str
    kind: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    listeners: list[str]
    latest_unstable: bool
    deprecated: Versions
    root: StructDef
    source: str  # "kafka-clients-3.9.1.jar!common/message/ProduceRequest.json"


def strip_comments(text: str) -> str:
    """Drop // comments outside JSON strings."""
    out = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
        elif c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    return s + "_" if keyword.iskeyword(s) else s


def parse_message(doc: dict[str, Any], source: str) -> MessageDef:
    name = doc["name"]
    common: dict[str, dict[str, Any]] = {c["name"]: c for c in doc.get("commonStructs", [])}
    built: dict[str, StructDef] = {}
    root = StructDef(name, name, [])

    def build_fields(raw_fields: list[dict[str, Any]], owner: StructDef) -> list[FieldDef]:
        out = []
        for rf in raw_fields:
            f = FieldDef(
                name=rf["name"],
                attr=snake(rf["name"]),
                type=rf["type"],
                versions=Versions.parse(rf.get("versions")),
                nullable=Versions.parse(rf.get("nullableVersions")),
                tag=None if rf.get("tag") is None else int(rf["tag"]),  # BrokerHeartbeat writes "0"
                tagged=Versions.parse(rf.get("taggedVersions")),
                ignorable=bool(rf.get("ignorable", False)),
                default=None if "default" not in rf else str(rf["default"]),
                flex_override=Versions.parse(rf["flexibleVersions"]) if "flexibleVersions" in rf else None,
            )
            if f.is_struct:
                sname = f.elem
                if "fields" in rf:
                    sd = StructDef(sname, owner.qual + "." + sname, [])
                    owner.children.append(sd)
                    built[sname] = sd
                    sd.fields = build_fields(rf["fields"], sd)
                elif sname in built:
                    sd = built[sname]
                elif sname in common:
                    sd = StructDef(sname, name + "." + sname, [])
                    root.children.append(sd)
                    built[sname] = sd
                    sd.fields = build_fields(common[sname]["fields"], sd)
                else:
                    raise ValueError(f"{name}: unknown struct type {sname}")
                f.struct = sd
            out.append(f)
        return out

    root.fields = build_fields(doc["fields"], root)
    # Common structs nobody references are still generated, as Kafka's generator does.
    for cname in common:
        if cname not in built:
            sd = StructDef(cname, name + "." + cname, [])
            root.children.append(sd)
            built[cname] = sd
            sd.fields = build_fields(common[cname]["fields"], sd)
    return MessageDef(
        name=name,
        kind=doc["type"],
        api_key=doc.get("apiKey"),
        valid=Versions.parse(doc["validVersions"]),
        flexible=Versions.parse(doc.get("flexibleVersions")),
        listeners=list(doc.get("listeners", [])),
        latest_unstable=bool(doc.get("latestVersionUnstable", False)),
        deprecated=Versions.parse(doc.get("deprecatedVersions")),
        root=root,
        source=source,
    )


# --------------------------------------------------------------------------- defaults


def default_expr(f: FieldDef) -> str:
    """Python expression of Kafka's default for a field; "DEFAULT" marks fresh mutable values."""
    d = f.default
    t = f.type
    if f.is_array:
        if d == "null":
            return "None"
        return "DEFAULT"
    if f.is_struct:
        return "None" if d == "null" else "DEFAULT"
    if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return str(int(d, 0)) if d not in (None, "") else "0"
    if t == "float64":
        return repr(float(d)) if d not in (None, "") else "0.0"
    if t == "bool":
        return "True" if d == "true" else "False"
    if t == "string":
        if d == "null":
            return "None"
        return repr(d if d is not None else "")
    if t == "bytes":
        return "None" if d == "null" else "b''"
    if t == "records":
        return "None"
    if t == "uuid":
        return "ZERO_UUID"
    raise ValueError(t)


def fresh_default(f: FieldDef) -> str:
    """Expression producing a new default value (for decoders and absent fields)."""
    d = default_expr(f)
    if d != "DEFAULT":
        return d
    if f.is_array:
        return "[]"
    assert f.struct is not None
    return f.struct.alias + "()"


def is_default_test(f: FieldDef, expr: str) -> str:
    """Expression true when `expr` differs from the field's default (Kafka's write rule)."""
    d = default_expr(f)
    if d == "None":
        return f"{expr} is not None"
    if f.is_array:
        return f"{expr} is None or len({expr}) != 0" if True else ""
    if d == "DEFAULT":
        # `expr != _D<alias>` spelled out: what the struct's __eq__ compares, inline (a Python
        # __eq__ call per tagged struct field per encode otherwise: three per Fetch partition).
        sd = f.struct
        assert sd is not None
        tests = [f"type(_x := {expr}) is not {sd.alias}"]
        tests += [f"_x.{g.attr} != _D{sd.alias}.{g.attr}" for g in sd.fields]
        tests.append("_x._unknown_tagged_fields")
        return " or ".join(tests)
    return f"{expr} != {d}"


# --------------------------------------------------------------------------- code generation


class ModuleGen:
    def __init__(self) -> None:
        self.structs: dict[str, str] = {}  # format -> Struct constant name
        self.funcs: list[str] = []
        self.bodies: dict[str, str] = {}  # body text -> function name
        self.memo: dict[tuple[str, str, int, bool], str] = {}
        self.needs_default_instance: set[str] = set()

    def st(self, fmt: str) -> str:
        name = self.structs.get(fmt)
        if name is None:
            name = "_S_" + fmt.replace("?", "o").replace("16s", "U")
            self.structs[fmt] = name
        return name

    def emit(self, prefix: str, body: list[str], sig: str) -> str:
        text = "\n".join(body)
        key = sig + "\n" + text
        name = self.bodies.get(key)
        if name is None:
            name = f"{prefix}_{len(self.bodies)}"
            self.bodies[key] = name
            self.funcs.append(f"def {name}({sig}):\n{text}\n")
        return name

    # ---- encoders

    def encoder(self, sd: StructDef, msg: MessageDef, v: int) -> str:
        key = ("e", sd.qual, v, False)
        if key in self.memo:
            return self.memo[key]
        flexible = v in msg.flexible
        lines: list[str] = []
        run: list[tuple[str, str]] = []

        def flush() -> None:
            if run:
                fmt = "".join(c for c, _ in run)
                lines.append(f"    a({self.st(fmt)}.pack({', '.join(e for _, e in run)}))")
                run.clear()

        tagged: list[FieldDef] = []
        for f in sd.fields:
            expr = f"o.{f.attr}"
            if v not in f.versions:
                if not f.ignorable:
                    lines.append(f"    if {is_default_test(f, expr)}:")
                    lines.append(f"        not_in_version({sd.qual!r}, {f.name!r})")
                continue
            if f.tag is not None and v in f.tagged:
                tagged.append(f)
                continue
            if f.type in FIXED and not f.is_array:
                run.append((FIXED[f.type][0], expr))
                continue
            flush()
            lines.extend(self.enc_value(f, msg, v, expr, "a", "    ", compact=flexible and self.field_flexible(f, v)))
        flush()
        if flexible:
            if not tagged:
                lines.append("    w_unknown_tags(a, o._unknown_tagged_fields)")
            else:
                lines.append("    t = []")
                for f in sorted(tagged, key=lambda x: x.tag or 0):  # tagged: tag is set
                    expr = f"o.{f.attr}"
                    lines.append(f"    if {is_default_test(f, expr)}:")
                    lines.append("        s = []")
                    lines.extend(self.enc_value(f, msg, v, expr, "s.append", "        ", compact=True))
                    lines.append(f"        t.append(({f.tag}, b''.join(s)))")
                lines.append("    w_tags(a, t, o._unknown_tagged_fields)")
        if not lines:
            lines.append("    pass")
        name = self.emit("_e", lines, "o, a")
        self.memo[key] = name
        return name

    @staticmethod
    def field_flexible(f: FieldDef, v: int) -> bool:
        return f.flex_override is None or v in f.flex_override

    def enc_value(self, f: FieldDef, msg: MessageDef, v: int, expr: str, a: str, ind: str, compact: bool) -> list[str]:
        nullable = v in f.nullable
        t = f.elem
        out: list[str] = []
        if f.is_array:
            out.append(f"{ind}x = {expr}")
            out.append(f"{ind}if x is None:")
            if nullable:
                out.append(f"{ind}    {a}({'NULL_COMPACT' if compact else 'NULL_I32'})")
            else:
                out.append(f"{ind}    nonnull_error({f.name!r})")
            out.append(f"{ind}else:")
            out.append(f"{ind}    {'w_calen' if compact else 'w_alen'}({a}, len(x))")
            if t in FIXED:
                c = FIXED[t][0]
                out.append(f"{ind}    {a}(_pack('>%d{c}' % len(x), *x))")
            elif t == "string":
                out.append(f"{ind}    for y in x:")
                out.append(f"{ind}        {'w_cstr' if compact else 'w_str'}({a}, y)")
            elif t == "uuid":
                out.append(f"{ind}    for y in x:")
                out.append(f"{ind}        w_uuid({a}, y)")
            elif t in ("bytes", "records"):
                out.append(f"{ind}    for y in x:")
                out.append(f"{ind}        {'w_cbytes' if compact else 'w_bytes'}({a}, y)")
            else:
                assert f.struct is not None
                fn = self.encoder(f.struct, msg, v)
                out.append(f"{ind}    for y in x:")
                out.append(f"{ind}        {fn}(y, {a})")
            return out
        if t in FIXED:
            out.append(f"{ind}{a}({self.st(FIXED[t][0])}.pack({expr}))")
        elif t == "string":
            fn = ("w_cstr" if compact else "w_str") + ("_n" if nullable else "")
            out.append(f"{ind}{fn}({a}, {expr})")
        elif t in ("bytes", "records"):
            fn = ("w_cbytes" if compact else "w_bytes") + ("_n" if nullable else "")
            out.append(f"{ind}{fn}({a}, {expr})")
        elif t == "uuid":
            out.append(f"{ind}w_uuid({a}, {expr})")
        else:
            assert f.struct is not None
            fn = self.encoder(f.struct, msg, v)
            if nullable:
                out.append(f"{ind}x = {expr}")
                out.append(f"{ind}if x is None:")
                out.append(f"{ind}    {a}(b'\\xff')")
                out.append(f"{ind}else:")
                out.append(f"{ind}    {a}(b'\\x01')")
                out.append(f"{ind}    {fn}(x, {a})")
            else:
                out.append(f"{ind}{fn}({expr}, {a})")
        return out

    # ---- decoders

    def decoder(self, sd: StructDef, msg: MessageDef, v: int) -> str:
        key = ("d", sd.qual, v, False)
        if key in self.memo:
            return self.memo[key]
        flexible = v in msg.flexible
        lines = [f"    o = _new({sd.alias})"]
        run: list[tuple[str, str, int]] = []

        def flush() -> None:
            if run:
                fmt = "".join(c for c, _, _ in run)
                size = sum(s for _, _, s in run)
                targets = ", ".join(e for _, e, _ in run)
                if len(run) == 1:
                    targets += ","
                lines.append(f"    {targets} = {self.st(fmt)}.unpack_from(b, p)")
                lines.append(f"    p += {size}")
                run.clear()

        tagged: list[FieldDef] = []
        absent: list[FieldDef] = []
        for f in sd.fields:
            target = f"o.{f.attr}"
            if v not in f.versions:
                absent.append(f)
                continue
            if f.tag is not None and v in f.tagged:
                tagged.append(f)
                continue
            if f.type in FIXED and not f.is_array:
                run.append((FIXED[f.type][0], target, FIXED[f.type][1]))
                continue
            if f.type == "uuid":
                run.append(("16s", target, 16))
                continue
            flush()
            lines.extend(self.dec_value(f, msg, v, target, "    ", compact=flexible and self.field_flexible(f, v)))
        flush()
        for f in absent + tagged:
            lines.append(f"    o.{f.attr} = {fresh_default(f)}")
        lines.append("    o._unknown_tagged_fields = None")
        if flexible:
            lines.append("    if b[p]:")
            if tagged:
                tl = [
                    "    n, p = read_uvarint(b, p)",
                    "    u = None",
                    "    for _ in range(n):",
                    "        tag, p, e = tag_end(b, p)",
                ]
                first = True
                for f in sorted(tagged, key=lambda x: x.tag or 0):  # tagged: tag is set
                    tl.append(f"        {'if' if first else 'elif'} tag == {f.tag}:")
                    first = False
                    tl.extend(self.dec_value(f, msg, v, f"o.{f.attr}", "            ", compact=True))
                    tl.append("            if p != e:")
                    tl.append(f"                tag_size_mismatch({f.tag}, e, p)")
                tl.append("        else:")
                tl.append("            if u is None:")
                tl.append("                u = []")
                tl.append("            u.append((tag, bytes(b[p:e])))")
                tl.append("        p = e")
                tl.append("    o._unknown_tagged_fields = u")
                tl.append("    return p")
                tfn = self.emit("_t", tl, "o, b, p")
                lines.append(f"        p = {tfn}(o, b, p)")
            else:
                lines.append("        p = r_unknown_tags(o, b, p)")
            lines.append("    else:")
            lines.append("        p += 1")
        lines.append("    return o, p")
        name = self.emit("_d", lines, "b, p")
        self.memo[key] = name
        return name

    def dec_value(self, f: FieldDef, msg: MessageDef, v: int, target: str, ind: str, compact: bool) -> list[str]:
        nullable = v in f.nullable
        t = f.elem
        out: list[str] = []
        if f.is_array:
            out.append(f"{ind}n, p = {'r_calen' if compact else 'r_alen'}(b, p)")
            out.append(f"{ind}if n < 0:")
            if nullable:
                out.append(f"{ind}    {target} = None")
            else:
                out.append(f"{ind}    null_error({f.name!r})")
            out.append(f"{ind}else:")
            if t in FIXED:
                c, size = FIXED[t]
                out.append(f"{ind}    {target} = list(_unpack_from('>%d{c}' % n, b, p))")
                out.append(f"{ind}    p += {size} * n")
                return out
            if t == "string":
                call = f"{'r_cstr' if compact else 'r_str'}(b, p)"
            elif t == "uuid":
                call = "r_uuid(b, p)"
            elif t == "bytes":
                call = f"{'r_cbytes' if compact else 'r_bytes'}(b, p)"
            elif t == "records":
                call = f"{'r_crec' if compact else 'r_rec'}(b, p)"
            else:
                assert f.struct is not None
                call = f"{self.decoder(f.struct, msg, v)}(b, p)"
            out.append(f"{ind}    l = []")
            out.append(f"{ind}    for _ in range(n):")
            out.append(f"{ind}        y, p = {call}")
            out.append(f"{ind}        l.append(y)")
            out.append(f"{ind}    {target} = l")
            return out
        if t in FIXED:
            c, size = FIXED[t]
            out.append(f"{ind}{target}, = {self.st(c)}.unpack_from(b, p)")
            out.append(f"{ind}p += {size}")
        elif t == "string":
            fn = ("r_cstr" if compact else "r_str") + ("_n" if nullable else "")
            out.append(f"{ind}{target}, p = {fn}(b, p)")
        elif t == "bytes":
            fn = ("r_cbytes" if compact else "r_bytes") + ("_n" if nullable else "")
            out.append(f"{ind}{target}, p = {fn}(b, p)")
        elif t == "records":
            fn = ("r_crec" if compact else "r_rec") + ("_n" if nullable else "")
            out.append(f"{ind}{target}, p = {fn}(b, p)")
        elif t == "uuid":
            out.append(f"{ind}{target}, p = r_uuid(b, p)")
        else:
            assert f.struct is not None
            fn = self.decoder(f.struct, msg, v)
            if nullable:
                out.append(f"{ind}if b[p] >= 0x80:")
                out.append(f"{ind}    {target} = None")
                out.append(f"{ind}    p += 1")
                out.append(f"{ind}else:")
                out.append(f"{ind}    {target}, p = {fn}(b, p + 1)")
            else:
                out.append(f"{ind}{target}, p = {fn}(b, p)")
        return out


def py_type(f: FieldDef) -> str:
    t = f.elem
    if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        base = "int"
    elif t == "float64":
        base = "float"
    elif t == "bool":
        base = "bool"
    elif t == "string":
        base = "str"
    elif t == "bytes":
        base = "bytes"
    elif t == "records":
        base = "Buffer"
    elif t == "uuid":
        base = "bytes"
    else:
        assert f.struct is not None
        base = f.struct.qual
    if f.is_array:
        base = f"list[{base}]"
    if not f.nullable.empty() or default_expr(f) == "None":
        base += " | None"
    return base


def class_source(sd: StructDef, msg: MessageDef, ind: str, top: bool) -> list[str]:
    out = [f"{ind}class {sd.name}({'Message' if top else 'Struct'}):"]
    i2 = ind + "    "
    attrs = [f.attr for f in sd.fields]
    out.append(f"{i2}__slots__ = {tuple(attrs + ['_unknown_tagged_fields'])!r}")
    out.append(f"{i2}_FIELD_NAMES = {tuple(attrs)!r}")
    if top:
        out.append(f"{i2}SCHEMA_NAME = {msg.name!r}")
        out.append(f"{i2}KIND = {msg.kind!r}")
        out.append(f"{i2}API_KEY = {msg.api_key!r}")
        out.append(f"{i2}MIN_VERSION = {msg.valid.lo}")
        out.append(f"{i2}MAX_VERSION = {msg.valid.hi}")
        flex = None if msg.flexible.empty() else msg.flexible.lo
        out.append(f"{i2}FLEXIBLE_FROM = {flex!r}")
    for child in sd.children:
        out.append("")
        out.extend(class_source(child, msg, i2, False))
    out.append("")
    params = []
    body = []
    for f in sd.fields:
        d = default_expr(f)
        params.append(f"{f.attr}: {py_type(f)} = {d}")
        if d == "DEFAULT":
            body.append(f"self.{f.attr} = {fresh_default_in_init(f, sd)} if {f.attr} is DEFAULT else {f.attr}")
        else:
            body.append(f"self.{f.attr} = {f.attr}")
    params.append("_unknown_tagged_fields: list[tuple[int, bytes]] | None = None")
    body.append("self._unknown_tagged_fields = _unknown_tagged_fields")
    # Straight-line equality (tagged-field defaults are checked with it on the encode path).
    cmp = " and ".join([f"self.{a} == other.{a}" for a in attrs]
                       + ["(self._unknown_tagged_fields or None) == (other._unknown_tagged_fields or None)"])
    out.append(f"{i2}def __eq__(self, other: object) -> bool:")
    out.append(f"{i2}    if type(other) is not type(self):")
    out.append(f"{i2}        return NotImplemented")
    out.append(f"{i2}    return {cmp}  # type: ignore[attr-defined]")
    out.append("")
    out.append(f"{i2}__hash__ = None  # type: ignore[assignment]")
    out.append("")
    out.append(f"{i2}def __init__(")
    out.append(f"{i2}    self,")
    out.append(f"{i2}    *,")
    for p_ in params:
        out.append(f"{i2}    {p_},")
    out.append(f"{i2}) -> None:")
    for line in body:
        out.append(f"{i2}    {line}")
    return out


def fresh_default_in_init(f: FieldDef, owner: StructDef) -> str:
    if f.is_array:
        return "[]"
    assert f.struct is not None
    return f.struct.alias + "()"


def all_structs(sd: StructDef) -> list[StructDef]:
    out = [sd]
    for c in sd.children:
        out.extend(all_structs(c))
    return out


def spec_source(sd: StructDef) -> list[str]:
    out = [f"{sd.alias}.SPEC = ("]
    for f in sd.fields:
        d = default_expr(f)
        out.append(
            f"    FieldSpec({f.attr!r}, {f.name!r}, {f.type!r}, {f.struct.alias if f.struct else None}, "
            f"{f.versions.astuple()!r}, {f.nullable.astuple()!r}, {f.tag!r}, {f.tagged.astuple()!r}, "
            f"{f.ignorable!r}, {f.flex_override.astuple() if f.flex_override else None!r}, {d}),"
        )
    out.append(")")
    return out


def module_source(msgs: list[MessageDef], jar_note: str) -> str:
    gen = ModuleGen()
    class_lines: list[str] = []
    alias_lines: list[str] = []
    table_lines: list[str] = []
    for msg in msgs:
        class_lines.extend(class_source(msg.root, msg, "", True))
        class_lines.append("")
        class_lines.append("")
        for sd in all_structs(msg.root):
            alias_lines.append(f"{sd.alias} = {sd.qual}")
        # Every struct is also reachable directly on its message class (struct names are unique
        # within a Kafka message): FetchResponse.PartitionData, ProduceResponse.LeaderIdAndEpoch.
        for sd in all_structs(msg.root)[1:]:
            if sd.qual.count(".") > 1:
                alias_lines.append(f"{msg.name}.{sd.name} = {sd.qual}")
    for msg in msgs:
        versions = range(msg.valid.lo, msg.valid.hi + 1)
        enc = {v: gen.encoder(msg.root, msg, v) for v in versions}
        dec = {v: gen.decoder(msg.root, msg, v) for v in versions}
        table_lines.append(f"{msg.root.alias}._ENCODERS = {{{', '.join(f'{v}: {n}' for v, n in enc.items())}}}")
        table_lines.append(f"{msg.root.alias}._DECODERS = {{{', '.join(f'{v}: {n}' for v, n in dec.items())}}}")
        # Nested structs get the versions their encoders were generated for (tagged values and
        # tests can then encode them alone).
        for sd in all_structs(msg.root)[1:]:
            e = {k[2]: n for k, n in gen.memo.items() if k[0] == "e" and k[1] == sd.qual}
            d = {k[2]: n for k, n in gen.memo.items() if k[0] == "d" and k[1] == sd.qual}
            table_lines.append(f"{sd.alias}._ENCODERS = {{{', '.join(f'{v}: {n}' for v, n in sorted(e.items()))}}}")
            table_lines.append(f"{sd.alias}._DECODERS = {{{', '.join(f'{v}: {n}' for v, n in sorted(d.items()))}}}")
            if e:
                table_lines.append(f"{sd.alias}.MIN_VERSION = {min(e)}")
                table_lines.append(f"{sd.alias}.MAX_VERSION = {max(e)}")
    spec_lines: list[str] = []
    default_lines: list[str] = []
    for msg in msgs:
        for sd in all_structs(msg.root):
            spec_lines.extend(spec_source(sd))
            default_lines.append(f"_D{sd.alias} = {sd.alias}()")
    names = [m.name for m in msgs]
    parts = [
        f"# Generated by kafkasim.protocol.codegen from Kafka {KAFKA_VERSION} ({jar_note}).",
        "# DO NOT EDIT: regenerate with `python -m kafkasim.protocol.codegen`.",
        "# Sources: " + ", ".join(m.source for m in msgs),
        "# fmt: off",
        "# ruff: noqa",
        "# mypy: ignore-errors",
        "from __future__ import annotations",
        "",
        "import struct as _struct",
        "",
        "from kafkasim.protocol.primitives import (",
        "    DEFAULT, EMPTY_TAGS, NULL_COMPACT, NULL_I16, NULL_I32, ZERO_UUID, FieldSpec, Message, Struct,",
        "    nonnull_error, not_in_version, null_error, r_alen, r_bytes, r_bytes_n, r_calen, r_cbytes,",
        "    r_cbytes_n, r_crec, r_crec_n, r_cstr, r_cstr_n, r_rec, r_rec_n, r_str, r_str_n, r_unknown_tags,",
        "    r_uuid, read_uvarint, tag_end, tag_size_mismatch, w_alen, w_bytes, w_bytes_n, w_calen, w_cbytes,",
        "    w_cbytes_n, w_cstr, w_cstr_n, w_str, w_str_n, w_tags, w_unknown_tags, w_uuid,",
        ")",
        "",
        "Buffer = bytes | bytearray | memoryview",
        f"__all__ = {names!r}",
        "",
        "_new = object.__new__",
        "_pack = _struct.pack",
        "_unpack_from = _struct.unpack_from",
        "",
    ]
    # The struct constants are known only after generating the functions.
    funcs_text = "\n\n".join(gen.funcs)
    for fmt, name in sorted(gen.structs.items(), key=lambda kv: kv[1]):
        parts.append(f"{name} = _struct.Struct({'>' + fmt!r})")
    parts.append("")
    parts.append("")
    parts.extend(class_lines)
    parts.extend(alias_lines)
    parts.append("")
    parts.extend(default_lines)
    parts.append("")
    parts.append("")
    parts.append(funcs_text)
    parts.append("")
    parts.extend(table_lines)
    parts.append("")
    parts.extend(spec_lines)
    parts.append("")
    return "\n".join(parts)


# --------------------------------------------------------------------------- driver


def module_name(msg_name: str) -> str:
    base = re.sub(r"(Request|Response)$", "", msg_name)
    return snake(base)


def load_jar_messages(jar: Path, names: set[str] | None = None) -> dict[str, tuple[dict[str, Any], str]]:
    out: dict[str, tuple[dict[str, Any], str]] = {}
    with zipfile.ZipFile(jar) as z:
        for info in sorted(z.infolist(), key=lambda i: i.filename):
            fn = info.filename
            if not (fn.startswith("common/message/") and fn.endswith(".json")):
                continue
            name = fn[len("common/message/") : -len(".json")]
            if names is not None and name not in names:
                continue
            doc = json.loads(strip_comments(z.read(info).decode("utf-8")))
            out[name] = (doc, f"{jar.name}!{fn}")
    return out


def generate(lib_dir: Path, version: str = KAFKA_VERSION) -> dict[str, str]:
    """Return {module file name: source} for everything the jars define."""
    clients = lib_dir / CLIENTS_JAR.format(v=version)
    gc = lib_dir / GROUP_COORDINATOR_JAR.format(v=version)
    tc = lib_dir / TRANSACTION_COORDINATOR_JAR.format(v=version)
    for jar in (clients, gc, tc):
        if not jar.exists():
            raise FileNotFoundError(
                f"{jar} not found; run: mvn -q -f real/maven/pom.xml dependency:copy-dependencies -DoutputDirectory=lib"
            )
    docs = load_jar_messages(clients)
    gc_docs = load_jar_messages(gc, set(CONSUMER_OFFSETS))
    modules: dict[str, list[MessageDef]] = {}
    jar_of: dict[str, str] = {}
    api_index: list[tuple[int, str, str, MessageDef, MessageDef]] = []
    pairs: dict[str, dict[str, MessageDef]] = {}
    for name, (doc, src) in docs.items():
        kind = doc["type"]
        if kind in ("request", "response"):
            m = parse_message(doc, src)
            mod = module_name(name)
            pairs.setdefault(mod, {})[kind] = m
            jar_of[mod] = clients.name
        elif kind == "header":
            modules.setdefault("headers", []).append(parse_message(doc, src))
            jar_of["headers"] = clients.name
        elif name in CONSUMER_PROTOCOL:
            modules.setdefault("consumer_protocol", []).append(parse_message(doc, src))
            jar_of["consumer_protocol"] = clients.name
    for mod, pr in sorted(pairs.items()):
        req, resp = pr["request"], pr["response"]
        assert req.api_key is not None  # every request has one
        modules[mod] = [req, resp]
        api_index.append((int(req.api_key), re.sub("Request$", "", req.name), mod, req, resp))
    for name in CONSUMER_OFFSETS:
        doc, src = gc_docs[name]
        modules.setdefault("consumer_offsets", []).append(parse_message(doc, src))
    jar_of["consumer_offsets"] = gc.name
    tc_docs = load_jar_messages(tc, set(TRANSACTION_LOG))
    for name in TRANSACTION_LOG:
        doc, src = tc_docs[name]
        modules.setdefault("transaction_log", []).append(parse_message(doc, src))
    jar_of["transaction_log"] = tc.name
    # RequestHeader before ResponseHeader; consumer protocol in the order of the constant.
    modules["headers"].sort(key=lambda m: m.name != "RequestHeader")
    modules["consumer_protocol"].sort(key=lambda m: CONSUMER_PROTOCOL.index(m.name))
    files: dict[str, str] = {}
    for mod in sorted(modules):
        files[f"{mod}.py"] = module_source(modules[mod], jar_of[mod])
    files["__init__.py"] = index_source(sorted(api_index), version, modules)
    return files


def index_source(api_index: list[tuple[int, str, str, MessageDef, MessageDef]], version: str,
                 modules: dict[str, list[MessageDef]]) -> str:
    lines = [
        f"# Generated by kafkasim.protocol.codegen from Kafka {version} "
        f"(kafka-clients-{version}.jar, kafka-group-coordinator-{version}.jar).",
        "# DO NOT EDIT: regenerate with `python -m kafkasim.protocol.codegen`.",
        '"""Generated Kafka message classes: one module per API pair, plus headers,',
        'consumer_protocol (ConsumerProtocolSubscription/Assignment) and consumer_offsets',
        '(OffsetCommitKey/Value, GroupMetadataKey/Value). Use kafkasim.protocol.api for the registry."""',
        "# fmt: off",
        "# ruff: noqa",
        "from __future__ import annotations",
        "",
        f"KAFKA_VERSION = {version!r}",
        "",
    ]
    for mod in sorted(modules):
        names = ", ".join(m.name for m in modules[mod])
        lines.append(f"from kafkasim.protocol.messages.{mod} import {names}")
    lines.append("")
    lines.append("# (api_key, name, module, request class, response class, min, max, flexible_from,")
    lines.append("#  listeners, latest_version_unstable, deprecated (lo, hi) or None)")
    lines.append("API_TABLE = (")
    for key, name, mod, req, resp in api_index:
        flex = None if req.flexible.empty() else req.flexible.lo
        dep = None if req.deprecated.empty() else req.deprecated.astuple()
        lines.append(
            f"    ({key}, {name!r}, {mod!r}, {req.name}, {resp.name}, {req.valid.lo}, {req.valid.hi}, "
            f"{flex!r}, {tuple(req.listeners)!r}, {req.latest_unstable!r}, {dep!r}),"
        )
    lines.append(")")
    lines.append("")
    all_names = sorted(m.name for ms in modules.values() for m in ms)
    lines.append("ALL_MESSAGES = (")
    for n in all_names:
        lines.append(f"    {n},")
    lines.append(")")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib-dir", type=Path, default=Path("real/maven/lib"))
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "messages")
    ap.add_argument("--kafka-version", default=KAFKA_VERSION)
    args = ap.parse_args(argv)
    files = generate(args.lib_dir, args.kafka_version)
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.py"):
        if old.name not in files:
            old.unlink()
    for name, text in sorted(files.items()):
        (args.out / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(files)} modules to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
