"""Generate the Kafka protocol codec, common/kafka_protocol/generated/, from Kafka's own message
definitions (proto/kafka/message/*.json, see proto/kafka/README.md): ``make codecs``.

One module per JSON file (``ProduceRequest.json`` -> ``produce_request.py``) holding
- a class per struct, as Kafka's generator makes one Java class per message with its nested
  structs: every field of every version, snake_case, at its JSON default; ``__slots__``,
  keyword construction, equality, ``to_dict``/``from_dict`` (Kafka's generated JsonConverter);
- the field metadata (common/kafka_protocol/schema.py) for the code that walks messages
  generically: the hostile-frame harness, the tests' value generators;
- straight-line read and write functions per distinct wire layout (versions whose fields,
  nullability and flexibility are the same share one), with each array's minimal element size
  computed here, so a length that cannot fit is refused before any element is read (issue 42
  defect 2, as Kafka's generated readers do);
- ``CODEC``, the message's codec (common/kafka_protocol/codec.py).

``generated/__init__.py`` lists every codec and Kafka's API keys by name. The output is
committed; tests/kafka/test_codec_generated.py checks that regenerating gives the same bytes.

Usage: ``python tools/gen_kafka_messages.py [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys
import textwrap
from dataclasses import dataclass, field

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "proto" / "kafka" / "message"
OUT = ROOT / "common" / "kafka_protocol" / "generated"
MAX_VERSION = 0x7FFF

PRIMITIVES = ("int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "bool",
              "string", "bytes", "records", "uuid")
_FIXED = {"int8": ("b", 1), "int16": ("h", 2), "uint16": ("H", 2), "int32": ("i", 4),
          "uint32": ("I", 4), "int64": ("q", 8), "float64": ("d", 8), "bool": ("?", 1)}


# ------------------------------------------------------------------------------ the model

def strip_comments(text: str) -> str:
    """Kafka's JSON files have ``//`` comments (its parser allows them); outside strings only."""
    out, i, n, in_str = [], 0, len(text), False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def vrange(text: str | None) -> tuple[int, int]:
    """"3+", "0-9", "5" or "none" as (lo, hi) inclusive; "none" is (1, 0), empty."""
    if text is None or text == "none":
        return (1, 0)
    if text.endswith("+"):
        return (int(text[:-1]), MAX_VERSION)
    lo, _, hi = text.partition("-")
    return (int(lo), int(hi or lo))


def within(v: int, r: tuple[int, int]) -> bool:
    return r[0] <= v <= r[1]


@dataclass
class Field:
    name: str
    about: str
    type: str            # a primitive name, or a struct's class name
    array: bool
    struct: Struct | None
    versions: tuple[int, int]
    nullable: tuple[int, int]
    tag: int | None
    tagged: tuple[int, int]
    default: object      # the Python value; for a struct, None (its defaults)

    def present(self, v: int) -> bool:
        return within(v, self.versions)


@dataclass
class Struct:
    name: str
    fields: list[Field] = field(default_factory=list)
    about: str = ""


@dataclass
class MessageSpec:
    name: str
    api_key: int
    kind: str
    valid: tuple[int, int]
    flexible: tuple[int, int]
    root: Struct
    structs: list[Struct]   # every struct, the root last
    source: str


def _default(spec: dict, type_: str, array: bool, nullable: tuple[int, int]) -> object:
    d = spec.get("default")
    if isinstance(d, bool):  # some files write defaults unquoted
        d = "true" if d else "false"
    elif isinstance(d, int):
        d = str(d)
    if array:
        if d == "null":
            return None
        return []
    if type_ not in PRIMITIVES:
        return None
    if d == "null":
        if nullable == (1, 0):
            raise ValueError(f"field {spec['name']} defaults to null but is never nullable")
        return None
    if type_ in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return int(d, 0) if d else 0
    if type_ == "float64":
        return float(d) if d else 0.0
    if type_ == "bool":
        return d == "true" if d else False
    if type_ == "string":
        return d or ""
    if type_ == "bytes":
        return b""
    if type_ == "records":
        return None  # Kafka's generated classes: records are null until set
    if type_ == "uuid":
        return bytes(16)
    raise ValueError(type_)


def parse(path: pathlib.Path) -> MessageSpec:
    spec = json.loads(strip_comments(path.read_text()))
    structs: dict[str, Struct] = {}
    common = {c["name"]: c for c in spec.get("commonStructs", [])}

    def build(name: str, fields_spec: list[dict], about: str = "") -> Struct:
        if name in structs:
            raise ValueError(f"{path.name}: struct {name} defined twice")
        s = Struct(name, about=about)
        structs[name] = s
        for fs in fields_spec:
            s.fields.append(make_field(fs))
        return s

    def make_field(fs: dict) -> Field:
        t = fs["type"]
        array = t.startswith("[]")
        el = t[2:] if array else t
        vers = vrange(fs["versions"])
        nullable = vrange(fs.get("nullableVersions"))
        st = None
        if el not in PRIMITIVES:
            if "fields" in fs:
                st = build(el, fs["fields"], fs.get("about", ""))
            elif el in structs:
                st = structs[el]
            elif el in common:
                st = build(el, common[el]["fields"])
            else:
                raise ValueError(f"{path.name}: unknown type {t}")
        tag = fs.get("tag")
        tagged = vrange(fs.get("taggedVersions")) if tag is not None else (1, 0)
        return Field(snake(fs["name"]), fs.get("about", ""), el, array, st, vers, nullable, tag,
                     tagged, _default(fs, el, array, nullable))

    root = build(spec["name"], spec["fields"])
    ordered: list[Struct] = []  # nested structs before the structs that hold them

    def visit(s: Struct) -> None:
        if s in ordered:
            return
        for f in s.fields:
            if f.struct is not None:
                visit(f.struct)
        ordered.append(s)

    visit(root)
    return MessageSpec(spec["name"], spec.get("apiKey", -1), spec["type"],
                       vrange(spec["validVersions"]), vrange(spec["flexibleVersions"]), root,
                       ordered, path.name)


# ------------------------------------------------------------------------------ layouts

def _sig(s: Struct, v: int, flexible: bool, memo: dict) -> tuple:
    """What decides a struct's bytes at version ``v``: equal signatures share code."""
    key = (s.name, v, flexible)
    if key in memo:
        return memo[key]
    parts = []
    for f in s.fields:
        tagged = f.tag is not None and flexible and within(v, f.tagged)
        if not f.present(v) or (f.tag is not None and not tagged):
            continue
        sub = _sig(f.struct, v, flexible, memo) if f.struct else None
        parts.append((f.name, tagged, within(v, f.nullable), sub))
    out = (s.name, flexible, tuple(parts))
    memo[key] = out
    return out


def min_size(f: Field, v: int, flexible: bool, layouts: Layouts) -> int:
    """The fewest bytes a value of ``f`` takes (a null or empty one)."""
    if f.array:
        return 1 if flexible else 4
    return _type_min(f.type, f.struct, v, flexible, layouts)


def _type_min(t: str, st: Struct | None, v: int, flexible: bool, layouts: Layouts) -> int:
    if st is not None:
        return layouts.struct_min(st, v, flexible)
    if t in _FIXED:
        return _FIXED[t][1]
    if t == "uuid":
        return 16
    if t == "string":
        return 1 if flexible else 2
    return 1 if flexible else 4  # bytes, records


class Layouts:
    """Numbers the distinct layouts of every struct of one message."""

    def __init__(self, msg: MessageSpec):
        self.msg = msg
        self.memo: dict = {}
        self.ids: dict[tuple, int] = {}
        self.by_struct: dict[str, list[tuple]] = {}
        self.first_version: dict[tuple, int] = {}

    def layout(self, s: Struct, v: int, flexible: bool) -> str:
        sig = _sig(s, v, flexible, self.memo)
        if sig not in self.ids:
            n = len(self.by_struct.setdefault(s.name, []))
            self.ids[sig] = n
            self.by_struct[s.name].append(sig)
            self.first_version[sig] = v
        return f"{s.name}_{self.ids[sig]}"

    def struct_min(self, s: Struct, v: int, flexible: bool) -> int:
        return sum(min_size(f, v, flexible, self) for f in s.fields
                   if f.present(v) and f.tag is None) + (1 if flexible else 0)


# ------------------------------------------------------------------------------ emitting

class Emitter:
    def __init__(self, msg: MessageSpec):
        self.msg = msg
        self.lay = Layouts(msg)
        self.fns: list[str] = []
        self.done: set[str] = set()
        self.structs_fmt: dict[str, str] = {}  # format -> module-level name

    def packer(self, fmt: str) -> str:
        name = "_S_" + fmt.replace("?", "o")
        self.structs_fmt[fmt] = name
        return name

    def flexible(self, v: int) -> bool:
        return within(v, self.msg.flexible)

    # -- reading ----------------------------------------------------------------

    def reader(self, s: Struct, v: int, flexible: bool) -> str:
        name = self.lay.layout(s, v, flexible)
        fn = f"_r_{name}"
        if fn in self.done:
            return fn
        self.done.add(fn)
        body: list[str] = [f"    o = {s.name}.__new__({s.name})"]
        run: list[Field] = []

        def flush():
            if not run:
                return
            fmt = "".join(_FIXED[f.type][0] for f in run)
            size = sum(_FIXED[f.type][1] for f in run)
            targets = ", ".join(f"o.{f.name}" for f in run)
            if len(run) == 1:
                targets += ","
            body.append(f"    {targets} = {self.packer(fmt)}.unpack_from(buf, pos)")
            body.append(f"    pos += {size}")
            run.clear()

        absent: list[Field] = []
        tagged: list[Field] = []
        for f in s.fields:
            if not f.present(v) or (f.tag is not None and not (flexible and within(v, f.tagged))):
                absent.append(f)
                continue
            if f.tag is not None:
                tagged.append(f)
                continue
            if not f.array and f.type in _FIXED:
                run.append(f)
                continue
            flush()
            body += self.read_value(f, v, flexible, f"o.{f.name}", "    ")
        flush()
        for f in absent + tagged:
            body.append(f"    o.{f.name} = {self.default_src(f)}")
        if flexible and tagged:
            body.append(f"    pos = {self.tag_reader(s, v, tagged)}(o, buf, pos, ctx)")
        elif flexible:
            body.append("    pos = skip_tagged_fields(buf, pos)")
        body.append("    return o, pos")
        self.fns.append(f"def {fn}(buf, pos, ctx):\n" + "\n".join(body) + "\n")
        return fn

    def tag_reader(self, s: Struct, v: int, tagged: list[Field]) -> str:
        fn = f"_rt_{self.lay.layout(s, v, True)}"
        body = ["    n, pos = read_uvarint(buf, pos)", "    last = -1", "    for _ in range(n):",
                "        tag, pos = read_uvarint(buf, pos)",
                "        size, pos = read_uvarint(buf, pos)",
                "        last, end = check_tag(buf, pos, tag, size, last)"]
        for i, f in enumerate(sorted(tagged, key=lambda x: x.tag)):
            body.append(f"        {'if' if i == 0 else 'elif'} tag == {f.tag}:")
            body.append("            sub, p = buf[:end], pos")
            body += self.read_value(f, v, True, f"o.{f.name}", "            ", buf="sub", pos="p")
            body.append(f"            check_tag_end(p, end, {f.name!r})")
        body.append("        pos = end")
        body.append("    return pos")
        self.fns.append(f"def {fn}(o, buf, pos, ctx):\n" + "\n".join(body) + "\n")
        return fn

    def read_value(self, f: Field, v: int, flexible: bool, target: str, ind: str,
                   buf: str = "buf", pos: str = "pos") -> list[str]:
        nullable = within(v, f.nullable)
        c = "compact_" if flexible else ""
        if f.array:
            el_min = _type_min(f.type, f.struct, v, flexible, self.lay)
            out = [f"{ind}n, {pos} = read_{c}array_length({buf}, {pos}, {el_min}, ctx)"]
            out.append(f"{ind}if n is None:")
            out.append(f"{ind}    {target} = None" if nullable
                       else f"{ind}    raise null_error({f.name!r})")
            out.append(f"{ind}else:")
            if f.struct is not None:
                rd = self.reader(f.struct, v, flexible)
                out += [f"{ind}    lst = []", f"{ind}    append = lst.append",
                        f"{ind}    for _ in range(n):",
                        f"{ind}        x, {pos} = {rd}({buf}, {pos}, ctx)",
                        f"{ind}        append(x)", f"{ind}    {target} = lst"]
            elif f.type in _FIXED:
                fmt, size = _FIXED[f.type]
                out += [f"{ind}    {target} = list(unpack_array({fmt!r}, {size}, {buf}, {pos}, n))",
                        f"{ind}    {pos} += n * {size}"]
            else:
                out += [f"{ind}    lst = []", f"{ind}    for _ in range(n):",
                        f"{ind}        x, {pos} = {self.prim_reader(f.type, flexible)}"
                        f"({buf}, {pos})",
                        f"{ind}        if x is None:",
                        f"{ind}            raise null_error({f.name!r})",
                        f"{ind}        lst.append(x)", f"{ind}    {target} = lst"]
            return out
        if f.struct is not None:
            rd = self.reader(f.struct, v, flexible)
            return [f"{ind}{target}, {pos} = {rd}({buf}, {pos}, ctx)"]
        if f.type in _FIXED:
            fmt, size = _FIXED[f.type]
            return [f"{ind}{target}, = {self.packer(fmt)}.unpack_from({buf}, {pos})",
                    f"{ind}{pos} += {size}"]
        if f.type == "uuid":
            return [f"{ind}{target}, {pos} = read_uuid({buf}, {pos})"]
        out = [f"{ind}{target}, {pos} = {self.prim_reader(f.type, flexible)}({buf}, {pos})"]
        if not nullable:
            out += [f"{ind}if {target} is None:", f"{ind}    raise null_error({f.name!r})"]
        return out

    @staticmethod
    def prim_reader(t: str, flexible: bool) -> str:
        kind = "string" if t == "string" else "bytes"
        return f"read_{'compact_' if flexible else ''}{kind}"

    # -- writing ----------------------------------------------------------------

    def writer(self, s: Struct, v: int, flexible: bool) -> str:
        name = self.lay.layout(s, v, flexible)
        fn = f"_w_{name}"
        if fn in self.done:
            return fn
        self.done.add(fn)
        body: list[str] = []
        run: list[Field] = []

        def flush():
            if not run:
                return
            fmt = "".join(_FIXED[f.type][0] for f in run)
            args = ", ".join(f"o.{f.name}" for f in run)
            body.append(f"    out({self.packer(fmt)}.pack({args}))")
            run.clear()

        tagged: list[Field] = []
        for f in s.fields:
            if not f.present(v):
                continue
            if f.tag is not None:
                if flexible and within(v, f.tagged):
                    tagged.append(f)
                continue
            if not f.array and f.type in _FIXED:
                run.append(f)
                continue
            flush()
            body += self.write_value(f, v, flexible, f"o.{f.name}", "    ")
        flush()
        if flexible:
            if not tagged:
                body.append("    out(b'\\x00')")
            else:
                body.append("    tagged = []")
                for f in sorted(tagged, key=lambda x: x.tag):
                    body.append(f"    x = o.{f.name}")
                    body.append(f"    if {self.non_default(f, 'x')}:")
                    body.append("        sub = []")
                    body += self.write_value(f, v, True, "x", "        ", out="sub.append")
                    body.append(f"        tagged.append(({f.tag}, sub))")
                body.append("    write_tagged_fields(parts, tagged)")
        text = "\n".join(body) if body else "    pass"
        if re.search(r"\bout\b", text):
            text = "    out = parts.append\n" + text
        self.fns.append(f"def {fn}(o, parts):\n{text}\n")
        return fn

    def non_default(self, f: Field, x: str) -> str:
        if f.struct is not None and not f.array:
            return f"{x} is not None and {x} != {f.struct.name}()"
        d = self.default_src(f)
        if d == "None":
            return f"{x} is not None"
        if f.type == "bool" and not f.array:
            return f"{x} is not {d}"  # bool values: True, False
        return f"{x} != {d}"

    def write_value(self, f: Field, v: int, flexible: bool, src: str, ind: str,
                    out: str = "out") -> list[str]:
        c = "compact_" if flexible else ""
        nullable = within(v, f.nullable)
        if f.array:
            lines = [f"{ind}lst = {src}"]
            if nullable:
                lines += [f"{ind}if lst is None:",
                          f"{ind}    {out}({'b' + repr(chr(0)) if flexible else 'NULL_ARRAY'})",
                          f"{ind}else:"]
                ind2 = ind + "    "
            else:
                ind2 = ind
            lines.append(f"{ind2}{out}(encode_{c}array_length(len(lst)))")
            if f.struct is not None:
                w = self.writer(f.struct, v, flexible)
                target = "parts" if out == "out" else out.removesuffix(".append")
                lines += [f"{ind2}for x in lst:", f"{ind2}    {w}(x, {target})"]
            elif f.type in _FIXED:
                fmt = _FIXED[f.type][0]
                lines.append(f"{ind2}{out}(pack_array({fmt!r}, lst))")
            else:
                wr = self.prim_writer(f.type, flexible, False)
                lines += [f"{ind2}for x in lst:", f"{ind2}    {wr}({out}, x)"]
            return lines
        if f.struct is not None:
            w = self.writer(f.struct, v, flexible)
            target = "parts" if out == "out" else out.removesuffix(".append")
            return [f"{ind}{w}({src} if {src} is not None else {f.struct.name}(), {target})"]
        if f.type in _FIXED:
            return [f"{ind}{out}({self.packer(_FIXED[f.type][0])}.pack({src}))"]
        if f.type == "uuid":
            return [f"{ind}{out}(uuid_value({src}))"]
        return [f"{ind}{self.prim_writer(f.type, flexible, nullable)}({out}, {src})"]

    @staticmethod
    def prim_writer(t: str, flexible: bool, nullable: bool) -> str:
        kind = "string" if t == "string" else "bytes"
        return f"write_{'compact_' if flexible else ''}{kind}"

    def default_src(self, f: Field) -> str:
        if f.array:
            return "None" if f.default is None else "[]"
        if f.struct is not None:
            return "None" if f.tag is not None else f"{f.struct.name}()"
        return repr(f.default)

    # -- classes, metadata, module -------------------------------------------

    def class_src(self, s: Struct) -> str:
        names = [f.name for f in s.fields]
        doc = _wrap(s.about or f"{s.name}, from Kafka's {self.msg.source}.", "    ")
        slots = ", ".join(repr(n) for n in names) + ("," if len(names) == 1 else "")
        lines = [f"class {s.name}(Data):", f'    """{doc.strip()}"""', "",
                 f"    __slots__ = ({slots})"]
        lines.append("")
        if names:
            params = ", ".join(f"{f.name}={self.param_default(f)}" for f in s.fields)
            lines.append(f"    def __init__(self, *, {params}):" if len(params) < 60 else
                         "    def __init__(\n            self, *, "
                         + ",\n            ".join(f"{f.name}={self.param_default(f)}"
                                                  for f in s.fields) + "):")
            for f in s.fields:
                lines.append(f"        self.{f.name} = {self.init_value(f)}")
        else:
            lines.append("    def __init__(self):")
            lines.append("        pass")
        return "\n".join(lines) + "\n"

    def param_default(self, f: Field) -> str:
        if f.array and f.default is not None:
            return "_LIST"
        if f.struct is not None and not f.array and f.tag is None:
            return "_STRUCT"
        return self.default_src(f)

    def init_value(self, f: Field) -> str:
        if f.array and f.default is not None:
            return f"[] if {f.name} is _LIST else {f.name}"
        if f.struct is not None and not f.array and f.tag is None:
            return f"{f.struct.name}() if {f.name} is _STRUCT else {f.name}"
        return f.name

    def schema_src(self, s: Struct) -> str:
        out = []
        for f in s.fields:
            t = f.struct.name + ".SCHEMA" if f.struct is not None else repr(f.type)
            if f.array:
                t = f"Array({t})"
            args = [repr(f.name), t, f"Versions{f.versions}"]
            if f.nullable != (1, 0):
                args.append(f"nullable=Versions{f.nullable}")
            if f.tag is not None:
                args += [f"tag={f.tag}", f"tagged=Versions{f.tagged}"]
            if f.struct is None or f.array:
                args.append(f"default={self.default_src(f)}")
            out.append(f"    Field({', '.join(args)}),")
        return (f"{s.name}.SCHEMA = Struct((\n" + "\n".join(out)
                + ("\n" if out else "") + f"), {s.name!r}, {s.name})\n")

    def module(self) -> str:
        m = self.msg
        readers, writers = {}, {}
        lo, hi = m.valid
        for v in range(lo, hi + 1):
            fl = self.flexible(v)
            readers[v] = self.reader(m.root, v, fl)
            writers[v] = self.writer(m.root, v, fl)
        body = ["\n\n".join(self.class_src(s) for s in m.structs)]
        body.append("\n".join(self.schema_src(s) for s in m.structs))
        packers = "\n".join(f"{n} = _struct.Struct('>{fmt}')"
                            for fmt, n in sorted(self.structs_fmt.items(), key=lambda x: x[1]))
        tail = [f"CODEC = Codec({m.name!r}, {m.api_key}, Versions{m.valid}, "
                f"Versions{m.flexible}, {m.root.name},",
                "              {" + ", ".join(f"{v}: {r}" for v, r in readers.items()) + "},",
                "              {" + ", ".join(f"{v}: {w}" for v, w in writers.items()) + "})"]
        code = ("\n\n".join(body) + "\n\n" + "\n\n".join(self.fns) + "\n\n"
                + "\n".join(tail) + "\n")
        used = set(re.findall(r"\b\w+\b", code))
        # sorted as isort (ruff's I001) sorts: constants, then classes, then the rest
        names = sorted((n for n in CODEC_NAMES if n in used),
                       key=lambda n: (0 if n.lstrip("_").isupper() else
                                      1 if n[0].isupper() else 2, n.lower()))
        schema_names = [n for n in ("Array", "Field", "Struct", "Versions") if n in used]
        head = [f'"""{m.name}: generated by tools/gen_kafka_messages.py from Kafka\'s '
                f'{m.source}', "(proto/kafka/message/). Do not edit: run `make codecs`."
                '"""', "", "from __future__ import annotations", ""]
        if packers:
            head += ["import struct as _struct", ""]
        head += ["from common.kafka_protocol.codec import ("]
        head += [f"    {n}," for n in names]
        head += [")", "from common.kafka_protocol.schema import " + ", ".join(schema_names),
                 ""]
        return "\n".join(head) + "\n" + (packers + "\n\n\n" if packers else "\n") + code


# what the generated code may call (common/kafka_protocol/codec.py)
CODEC_NAMES = (
    "_LIST", "_STRUCT", "NULL_ARRAY", "Codec", "Data", "check_tag", "check_tag_end",
    "encode_array_length", "encode_compact_array_length", "null_error", "pack_array",
    "read_array_length", "read_bytes", "read_compact_array_length", "read_compact_bytes",
    "read_compact_string", "read_string", "read_uuid", "read_uvarint", "skip_tagged_fields",
    "unpack_array", "uuid_value", "write_bytes", "write_compact_bytes", "write_compact_string",
    "write_string", "write_tagged_fields")


def _wrap(text: str, indent: str) -> str:
    text = " ".join(text.split()).replace('"""', "'''").replace("\\", "\\\\")
    return textwrap.fill(text, 92, subsequent_indent=indent)


def module_name(spec_name: str) -> str:
    return snake(spec_name)


def index_module(specs: list[MessageSpec]) -> str:
    apis = sorted({(s.api_key, s.name.removesuffix("Request").removesuffix("Response"))
                   for s in specs if s.api_key >= 0})
    lines = ['"""Every generated codec, by (api_key, "request" | "response"), and Kafka\'s API',
             "keys by name (ApiKeys.java). Generated by tools/gen_kafka_messages.py: do not edit."
             '"""', "", "from __future__ import annotations", ""]
    lines.append("from common.kafka_protocol.generated import (")
    lines += [f"    {m}," for m in sorted(module_name(s.name) for s in specs)]
    lines.append(")")
    lines += ["", "", "class ApiKey:"]
    lines += [f"    {snake(n).upper()} = {k}" for k, n in apis]
    lines += ["", "", "API_NAMES: dict[int, str] = {"]
    lines += [f"    {k}: {n!r}," for k, n in apis]
    lines += ["}", "", "CODECS = {"]
    for s in sorted(specs, key=lambda s: (s.api_key, s.kind)):
        if s.api_key >= 0:
            lines.append(f"    ({s.api_key}, {s.kind!r}): {module_name(s.name)}.CODEC,")
    lines.append("}")
    return "\n".join(lines) + "\n"


def generate(out: pathlib.Path) -> list[pathlib.Path]:
    out.mkdir(parents=True, exist_ok=True)
    specs = [parse(p) for p in sorted(SRC.glob("*.json"))
             if not p.stem.endswith("Header")]
    written = []
    for s in specs:
        path = out / f"{module_name(s.name)}.py"
        path.write_text(Emitter(s).module())
        written.append(path)
    idx = out / "__init__.py"
    idx.write_text(index_module(specs))
    written.append(idx)
    for stale in set(out.glob("*.py")) - set(written):
        stale.unlink()
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=pathlib.Path, default=OUT)
    opts = p.parse_args(argv)
    files = generate(opts.out)
    print(f"wrote {len(files)} modules to {opts.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
