"""Request decoders and response encoders written per API version from Kafka's message schemas.

kafka-python carries Kafka's JSON message schemas and reads every message through one
general path: the request header through a byte stream and a generic struct walk, the
body through per-version code that still checks, at run time, what the schema already
settles (is this array a list of tuples? is this field tagged?), and responses through a
growing buffer copied out twice. That path took a fifth of a busy broker's CPU each way.

This module does what Kafka's message generator does at build time: for one message and
one version it writes the Python that version's layout needs, header included, and
compiles it once. Fixed-size fields next to each other are read and written with one
precompiled struct; lengths are checked against the frame; strings are sliced straight
out of the frame; the null checks of validate.py are made where a length of -1 is read,
at no cost when there is none. The objects are kafka-python's own classes, filled slot
by slot as its decoder fills them, so handlers see what they saw before; the tests hold
both directions to kafka-python byte for byte and object for object.

Differences from kafka-python, all on the side of Kafka's own parser: a length that runs
past the frame is an error rather than a short string; a negative array length other
than -1 reads as null, as in Kafka, not as an empty array; and the records of a request
are a memoryview of the frame instead of a copy (storage copies them once, to rewrite
the base offset). A response's records may be a FileRegion (regions.py): the encoder
then returns the frame in chunks, the region between them, to be sent from its file.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.api_header import RequestHeader
from kafka.protocol.api_message import ApiMessage

from herdless.protocol.regions import Chunk, FileRegion

# struct format characters of the schema's fixed-size types.
_FIXED = {
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "int64": "q",
    "float64": "d",
    "bool": "?",
}
_INT32 = struct.Struct(">i")
_ZERO_UUID = bytes(16)
_UUID_SIZE = 16
_NO_TAGS = 0


class Underrun(ValueError):
    """A length or count that runs past the end of the frame."""

    def __init__(self) -> None:
        super().__init__("a length or count runs past the end of the frame")


def read_uvarint(data: bytes | bytearray, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 32 bits at `pos`, and the position after it."""
    value = 0
    shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ValueError("varint longer than 5 bytes")


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _bitfield(value: int) -> set[int] | None:
    """kafka-python's reading of an authorized-operations int32: a set of bit numbers,
    None for Kafka's 'not asked' (-2147483648)."""
    bits = {bit for bit in range(32) if value >> bit & 1}
    return None if bits == {31} else bits


def _bitfield_bytes(bits: set[int] | None) -> bytes:
    value = 0
    for bit in {31} if bits is None else bits:
        value |= 1 << bit
    return struct.pack(">I", value)


def _uuid_bytes(value: Any) -> bytes:
    if value is None:
        return _ZERO_UUID
    return value.bytes if hasattr(value, "bytes") else uuid.UUID(value).bytes


@dataclass
class _Source:
    """A function being written: its lines and the constants it refers to."""

    lines: list[str] = field(default_factory=list)
    names: dict[str, Any] = field(default_factory=dict)
    _constants: dict[tuple[str, Any], str] = field(default_factory=dict)
    _counter: int = 0

    def var(self, stem: str) -> str:
        self._counter += 1
        return f"_{stem}{self._counter}"

    def const(self, value: Any, stem: str, key: Any = None) -> str:
        """A global name bound to `value`: one per `key`, by default the value itself
        (the object, for one that is not a str, bytes or int)."""
        if key is None:
            key = value if isinstance(value, str | bytes | int) else id(value)
        name = self._constants.get((stem, key))
        if name is None:
            name = self._constants[stem, key] = self.var(stem)
            self.names[name] = value
        return name

    def packer(self, fmt: str) -> str:
        """The name of a function packing the big-endian struct format `fmt`."""
        return self.const(struct.Struct(">" + fmt).pack, "pack", key=fmt)

    def unpacker(self, fmt: str) -> str:
        """The name of a function unpacking `fmt` from (data, pos)."""
        return self.const(struct.Struct(">" + fmt).unpack_from, "unpack", key=fmt)

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def compile(self, function: str, filename: str) -> Callable[..., Any]:
        namespace = dict(self.names)
        exec(compile("\n".join(self.lines) + "\n", filename, "exec"), namespace)
        return namespace[function]  # type: ignore[no-any-return]


def _in_version(struct_field: Any, version: int) -> list[Any]:
    return list(struct_field.untagged_fields(version))


def _tagged(struct_field: Any, version: int) -> list[Any]:
    return [
        f for f in struct_field._fields if f.for_version_q(version) and f.tagged_field_q(version)
    ]


def _fixed(f: Any) -> str | None:
    if f.is_array() or f.is_struct():
        return None
    return _FIXED.get(f.type_str)


def _runs(fields: list[Any]) -> Iterator[tuple[str, list[Any]]]:
    """The fields in order, as runs of adjacent fixed-size ones, each read or written
    with one struct format ("" and the one field for any other)."""
    i = 0
    while i < len(fields):
        run = []
        while i < len(fields) and _fixed(fields[i]) is not None:
            run.append(fields[i])
            i += 1
        if run:
            yield "".join(_FIXED[f.type_str] for f in run), run
        else:
            yield "", [fields[i]]
            i += 1


def _min_size(struct_field: Any, version: int, compact: bool) -> int:
    """The fewest bytes one element of this struct can take."""
    size = 1 if compact else 0  # the tagged-field count
    for f in _in_version(struct_field, version):
        fixed = _fixed(f)
        if fixed is not None:
            size += struct.calcsize(">" + fixed)
        elif f.type_str == "bitfield":
            size += 4
        elif f.type_str == "uuid":
            size += _UUID_SIZE
        elif f.is_struct() and not f.is_struct_array():
            size += 1 if f.nullable_for_version_q(version) else _min_size(f, version, compact)
        elif compact:
            size += 1
        else:
            size += 2 if f.type_str == "string" else 4
    return size


@dataclass(frozen=True)
class _Path:
    """Where a field sits, rendered only when a null is found there."""

    text: str = ""
    indexes: tuple[str, ...] = ()

    def child(self, name: str) -> _Path:
        return _Path(f"{self.text}.{name}" if self.text else name, self.indexes)

    def element(self, index_var: str) -> _Path:
        return _Path(self.text + "[%d]", (*self.indexes, index_var))

    def expr(self) -> str:
        if not self.indexes:
            return repr(self.text)
        return f"{self.text!r} % ({', '.join(self.indexes)},)"


@dataclass(frozen=True)
class StandIn:
    """A named tuple a request's struct is decoded into in place of kafka-python's object:
    `names` maps the schema's field names to the tuple's. A field of the tuple that a
    version lacks takes the tuple's default; a schema field it does not name is read and
    left out, and so are tagged fields. Arrays in it are tuples."""

    cls: type
    names: dict[str, str]

    def __post_init__(self) -> None:
        fields = getattr(self.cls, "_fields", None)
        if not issubclass(self.cls, tuple) or fields is None:
            raise TypeError(f"{self.cls.__name__} is not a named tuple")
        unknown = set(self.names.values()) - set(fields)
        if unknown:
            raise TypeError(f"{self.cls.__name__} has no field {', '.join(sorted(unknown))}")


class _DecoderWriter:
    """Writes the body of `decode(data) -> (message, first forbidden null or None)`.

    Locals of the written function: data (the frame, bytes), _n (its length), pos,
    _view (a memoryview of data, when there are records), _null.
    """

    def __init__(
        self,
        src: _Source,
        version: int,
        compact: bool,
        stand_ins: dict[type, StandIn] | None = None,
    ) -> None:
        self.src = src
        self.version = version
        self.compact = compact
        self.uses_view = False
        self.stand_ins = stand_ins or {}

    def length(self, ind: int, var: str, nonflexible_fmt: str) -> None:
        """Read a length or count into `var`: a varint less one if compact, else fixed."""
        src = self.src
        if self.compact:
            src.emit(ind, f"{var} = data[pos]")
            src.emit(ind, f"if {var} < 128:")
            src.emit(ind + 1, "pos += 1")
            src.emit(ind, "else:")
            src.emit(ind + 1, f"{var}, pos = {src.const(read_uvarint, 'read_uvarint')}(data, pos)")
            src.emit(ind, f"{var} -= 1")
        else:
            src.emit(ind, f"{var} = {src.unpacker(nonflexible_fmt)}(data, pos)[0]")
            src.emit(ind, f"pos += {struct.calcsize('>' + nonflexible_fmt)}")

    def null(self, ind: int, target: str, nullable: bool, path: _Path) -> None:
        self.src.emit(ind, f"{target} = None")
        if not nullable:
            self.src.emit(ind, "if _null is None:")
            self.src.emit(ind + 1, f"_null = {path.expr()}")

    def slice_end(self, ind: int, end: str, size: str) -> None:
        src = self.src
        src.emit(ind, f"{end} = pos + {size}")
        src.emit(ind, f"if {end} > _n:")
        src.emit(ind + 1, f"raise {src.const(Underrun, 'Underrun')}")

    def value(self, ind: int, f: Any, target: str, path: _Path, nullable: bool) -> None:
        """Decode one field's value (not its tag) into the assignable `target`."""
        src = self.src
        version = self.version
        if f.is_struct_array() or f.is_array():
            count = src.var("count")
            self.length(ind, count, "i")
            src.emit(ind, f"if {count} < 0:")
            self.null(ind + 1, target, nullable, path)
            src.emit(ind, "else:")
            self.array_items(ind + 1, f, count, target, path)
            return
        if f.is_struct():
            if f.nullable_for_version_q(version):
                src.emit(ind, "if data[pos] == 0xFF:")
                src.emit(ind + 1, "pos += 1")
                src.emit(ind + 1, f"{target} = None")
                src.emit(ind, "else:")
                src.emit(ind + 1, "pos += 1")
                ind += 1
            item = src.var("struct")
            self.struct(ind, f, item, path)
            src.emit(ind, f"{target} = {item}")
            return
        kind = f.type_str
        fixed = _FIXED.get(kind)
        if fixed is not None:
            src.emit(ind, f"{target} = {src.unpacker(fixed)}(data, pos)[0]")
            src.emit(ind, f"pos += {struct.calcsize('>' + fixed)}")
        elif kind == "uuid":
            end = src.var("end")
            self.slice_end(ind, end, str(_UUID_SIZE))
            raw = src.var("uuid")
            src.emit(ind, f"{raw} = data[pos:{end}]")
            zero = src.const(_ZERO_UUID, "ZERO_UUID")
            make = src.const(uuid.UUID, "UUID")
            src.emit(ind, f"{target} = None if {raw} == {zero} else {make}(bytes={raw})")
            src.emit(ind, f"pos = {end}")
        elif kind == "bitfield":
            unpack = src.unpacker("I")
            src.emit(ind, f"{target} = {src.const(_bitfield, 'bitfield')}({unpack}(data, pos)[0])")
            src.emit(ind, "pos += 4")
        elif kind in ("string", "bytes", "records"):
            if kind == "string" and self.compact:
                # Empty strings are common (a consumer's member id, a commit's metadata):
                # one length byte read, nothing sliced or decoded (0.5 of the 3.4 µs that
                # decoding a 4-partition commit took).
                src.emit(ind, "if data[pos] == 1:")
                src.emit(ind + 1, "pos += 1")
                src.emit(ind + 1, f"{target} = ''")
                src.emit(ind, "else:")
                ind += 1
            size = src.var("size")
            self.length(ind, size, "h" if kind == "string" else "i")
            src.emit(ind, f"if {size} < 0:")
            self.null(ind + 1, target, nullable, path)
            src.emit(ind, "else:")
            end = src.var("end")
            self.slice_end(ind + 1, end, size)
            if kind == "string":
                src.emit(ind + 1, f"{target} = data[pos:{end}].decode()")
            elif kind == "bytes":
                src.emit(ind + 1, f"{target} = data[pos:{end}]")
            else:
                self.uses_view = True
                src.emit(ind + 1, f"{target} = _view[pos:{end}]")
            src.emit(ind + 1, f"pos = {end}")
        else:
            raise NotImplementedError(f"no decoder for field type {kind}")

    def array_items(self, ind: int, f: Any, count: str, target: str, path: _Path) -> None:
        src = self.src
        element_fmt = None if f.is_struct_array() else _FIXED.get(f.array_of.type_str)
        if element_fmt is not None:
            size = struct.calcsize(">" + element_fmt)
            unpack = src.const(struct.unpack_from, "unpack_from")
            src.emit(
                ind,
                f"{target} = list({unpack}('>%d{element_fmt}' % {count}, data, pos))",
            )
            src.emit(ind, f"pos += {size} * {count}")
            return
        minimum = _min_size(f.array_of, self.version, self.compact) if f.is_struct_array() else 1
        if minimum > 0:
            src.emit(ind, f"if {count} * {minimum} > _n - pos:")
            src.emit(ind + 1, f"raise {src.const(Underrun, 'Underrun')}")
        items = src.var("items")
        index = src.var("i")
        item = src.var("item")
        src.emit(ind, f"{items} = []")
        src.emit(ind, f"for {index} in range({count}):")
        element_path = path.element(index)
        if f.is_struct_array():
            self.struct(ind + 1, f.array_of, item, element_path)
        else:
            # Elements of a primitive array are never null in any schema.
            self.value(ind + 1, f.array_of, item, element_path, nullable=False)
        src.emit(ind + 1, f"{items}.append({item})")
        src.emit(ind, f"{target} = {items}")

    def struct(
        self, ind: int, struct_field: Any, target: str, path: _Path, data_class: Any = None
    ) -> None:
        """Build `target`, an object of the struct's data class, from its fields."""
        src = self.src
        version = self.version
        # A message's own struct refers to its class through a weak proxy.
        data_class = struct_field.data_class if data_class is None else data_class
        stand_in = self.stand_ins.get(data_class)
        if stand_in is not None:
            self.stand_in(ind, struct_field, stand_in, target, path)
            return
        src.emit(ind, f"{target} = _new({src.const(data_class, 'cls')})")
        src.emit(ind, f"{target}._version = {version}")
        src.emit(ind, f"{target}.tags = None")
        src.emit(ind, f"{target}.unknown_tags = None")
        for fmt, run in _runs(_in_version(struct_field, version)):
            if fmt:
                self.fixed_run(ind, fmt, [f"{target}.{f.name}" for f in run])
            else:
                f = run[0]
                nullable = f.nullable_for_version_q(version)
                self.value(ind, f, f"{target}.{f.name}", path.child(f.name), nullable)
        if self.compact:
            self.tag_section(ind, struct_field, target, path)

    def fixed_run(self, ind: int, fmt: str, targets: list[str]) -> None:
        """Read adjacent fixed-size fields (struct format `fmt`) into `targets` at once."""
        src = self.src
        comma = "," if len(targets) == 1 else ""
        src.emit(ind, f"{', '.join(targets)}{comma} = {src.unpacker(fmt)}(data, pos)")
        src.emit(ind, f"pos += {struct.calcsize('>' + fmt)}")

    def stand_in(
        self, ind: int, struct_field: Any, stand_in: StandIn, target: str, path: _Path
    ) -> None:
        """Build `target`, a stand_in.cls, from the struct's fields read into locals."""
        src = self.src
        version = self.version
        fields = _in_version(struct_field, version)
        local = {f.name: src.var(f.name) for f in fields}
        for fmt, run in _runs(fields):
            if fmt:
                self.fixed_run(ind, fmt, [local[f.name] for f in run])
                continue
            f = run[0]
            name = local[f.name]
            self.value(ind, f, name, path.child(f.name), f.nullable_for_version_q(version))
            if f.is_array() or f.is_struct_array():
                src.emit(ind, f"if {name} is not None:")
                src.emit(ind + 1, f"{name} = tuple({name})")
        if self.compact:
            self.skip_tags(ind)
        by_tuple_field = {
            held: local[schema] for schema, held in stand_in.names.items() if schema in local
        }
        defaults = stand_in.cls._field_defaults  # type: ignore[attr-defined]
        args = []
        for held in stand_in.cls._fields:  # type: ignore[attr-defined]
            if held in by_tuple_field:
                args.append(by_tuple_field[held])
            elif held in defaults:
                args.append(src.const(defaults[held], "default"))
            else:
                raise NotImplementedError(
                    f"{stand_in.cls.__name__}.{held} has no default and no field of"
                    f" {struct_field.name} v{version}"
                )
        # tuple.__new__ is what a named tuple's own __new__ calls, from a Python frame.
        values = ", ".join(args) + ("," if len(args) == 1 else "")
        made = (
            f"{src.const(tuple.__new__, 'tuple_new')}({src.const(stand_in.cls, 'cls')}, ({values}))"
        )
        src.emit(ind, f"{target} = {made}")

    def skip_tags(self, ind: int) -> None:
        """Read past a tag section, keeping nothing of it."""
        src = self.src
        read = src.const(read_uvarint, "read_uvarint")
        count, size, end = src.var("tags"), src.var("size"), src.var("end")
        src.emit(ind, f"if data[pos] == {_NO_TAGS}:")
        src.emit(ind + 1, "pos += 1")
        src.emit(ind, "else:")
        src.emit(ind + 1, f"{count}, pos = {read}(data, pos)")
        src.emit(ind + 1, f"for _ in range({count}):")
        src.emit(ind + 2, f"_, pos = {read}(data, pos)")
        src.emit(ind + 2, f"{size}, pos = {read}(data, pos)")
        self.slice_end(ind + 2, end, size)
        src.emit(ind + 2, f"pos = {end}")

    def tag_section(self, ind: int, struct_field: Any, target: str, path: _Path) -> None:
        src = self.src
        tagged = _tagged(struct_field, self.version)
        for f in tagged:
            src.emit(ind, f"{target}.{f.name} = {src.const(f.default, 'default')}")
        src.emit(ind, f"if data[pos] == {_NO_TAGS}:")
        src.emit(ind + 1, "pos += 1")
        src.emit(ind, "else:")
        ind += 1
        read = src.const(read_uvarint, "read_uvarint")
        count, tag, size, end = src.var("tags"), src.var("tag"), src.var("size"), src.var("end")
        src.emit(ind, f"{count}, pos = {read}(data, pos)")
        src.emit(ind, f"for _ in range({count}):")
        src.emit(ind + 1, f"{tag}, pos = {read}(data, pos)")
        src.emit(ind + 1, f"{size}, pos = {read}(data, pos)")
        # A known tag's value is read by its own encoding, its size trusted no further,
        # as Kafka's generated parsers read it; an unknown one is kept as its bytes.
        keyword = "if"
        for f in tagged:
            src.emit(ind + 1, f"{keyword} {tag} == {f.tag}:")
            self.value(ind + 2, f, f"{target}.{f.name}", path.child(f.name), nullable=True)
            src.emit(ind + 2, f"if {target}.tags is None:")
            src.emit(ind + 3, f"{target}.tags = set()")
            src.emit(ind + 2, f"{target}.tags.add({f.name!r})")
            keyword = "elif"
        if tagged:
            src.emit(ind + 1, "else:")
        inner = ind + 2 if tagged else ind + 1
        self.slice_end(inner, end, size)
        src.emit(inner, f"if {target}.unknown_tags is None:")
        src.emit(inner + 1, f"{target}.unknown_tags = {{}}")
        src.emit(inner, f"{target}.unknown_tags['_%d' % {tag}] = data[pos:{end}]")
        src.emit(inner, f"pos = {end}")


def request_decoder(
    message: type[ApiMessage], version: int, stand_ins: dict[type, StandIn] | None = None
) -> tuple[Callable[[bytes], tuple[Any, str | None]], str]:
    """decode(frame) -> (request, path of the first null the schema forbids, or None) for
    one request class and version, and its source. The frame starts at the header.
    `stand_ins`: the structs, by kafka-python class, decoded into named tuples."""
    src = _Source()
    compact = message.flexible_version_q(version)
    writer = _DecoderWriter(src, version, compact, stand_ins)
    src.names["_new"] = object.__new__
    src.emit(0, "def decode(data):")
    src.emit(1, "_n = len(data)")
    src.emit(1, "_null = None")
    header = RequestHeader._flexible_versions[0] if compact else RequestHeader._valid_versions[0]
    src.emit(1, f"_h = _new({src.const(RequestHeader, 'RequestHeader')})")
    src.emit(1, f"_h._version = {header}")
    src.emit(1, "_h.tags = None")
    src.emit(1, "_h.unknown_tags = None")
    fields = "_h.request_api_key, _h.request_api_version, _h.correlation_id, _size"
    src.emit(1, f"{fields} = {src.unpacker('hhih')}(data, 0)")
    src.emit(1, "pos = 10")
    src.emit(1, "if _size < 0:")
    src.emit(2, "_h.client_id = None")
    src.emit(1, "else:")
    writer.slice_end(2, "_end", "_size")
    src.emit(2, "_h.client_id = data[pos:_end].decode()")
    src.emit(2, "pos = _end")
    if compact:
        writer.tag_section(1, RequestHeader._struct, "_h", _Path("header"))
    writer.struct(1, message._struct, "_o", _Path(), data_class=message[None])
    src.emit(1, "_o._header = _h")
    src.emit(1, "return _o, _null")
    if writer.uses_view:
        src.lines.insert(1, "    _view = memoryview(data)")
    name = f"<herdless decode {message.__name__} v{version}>"
    return src.compile("decode", name), "\n".join(src.lines)


class _EncoderWriter:
    """Writes the body of `encode(message, correlation_id) -> chunks`.

    Locals: _b (the bytearray being filled), _chunks (None until a FileRegion is met:
    then the filled bytearrays and the regions, in order).
    """

    def __init__(
        self, src: _Source, version: int, compact: bool, in_tagged_value: bool = False
    ) -> None:
        self.src = src
        self.version = version
        self.compact = compact
        # kafka-python writes a tagged value's own structs with an empty tag section.
        self.in_tagged_value = in_tagged_value
        self.has_records = False

    def length(self, ind: int, value: str, nonflexible_fmt: str, out: str = "_b") -> None:
        """Write the length or count `value` (an int expression; the value is >= 0)."""
        src = self.src
        if self.compact:
            n = src.var("n")
            src.emit(ind, f"{n} = {value} + 1")
            src.emit(ind, f"if {n} < 128:")
            src.emit(ind + 1, f"{out}.append({n})")
            src.emit(ind, "else:")
            src.emit(ind + 1, f"{out} += {src.const(uvarint, 'uvarint')}({n})")
        else:
            src.emit(ind, f"{out} += {src.packer(nonflexible_fmt)}({value})")

    def null_length(self, ind: int, nonflexible_fmt: str, out: str = "_b") -> None:
        if self.compact:
            self.src.emit(ind, f"{out}.append(0)")
        else:
            self.src.emit(ind, f"{out} += {struct.pack('>' + nonflexible_fmt, -1)!r}")

    def value(self, ind: int, f: Any, value: str, out: str = "_b") -> None:
        """Write one field's value, held by the expression `value` (evaluated once)."""
        src = self.src
        version = self.version
        if f.is_struct_array() or f.is_array():
            v = src.var("array")
            src.emit(ind, f"{v} = {value}")
            src.emit(ind, f"if {v} is None:")
            self.null_length(ind + 1, "i", out)
            src.emit(ind, "else:")
            self.length(ind + 1, f"len({v})", "i", out)
            element_fmt = None if f.is_struct_array() else _FIXED.get(f.array_of.type_str)
            if element_fmt is not None:
                pack = src.const(struct.pack, "pack")
                src.emit(ind + 1, f"{out} += {pack}('>%d{element_fmt}' % len({v}), *{v})")
                return
            item = src.var("item")
            src.emit(ind + 1, f"for {item} in {v}:")
            if f.is_struct_array():
                self.struct(ind + 2, f.array_of, item, out)
            else:
                self.value(ind + 2, f.array_of, item, out)
            return
        if f.is_struct():
            v = src.var("struct")
            src.emit(ind, f"{v} = {value}")
            if f.nullable_for_version_q(version):
                src.emit(ind, f"if {v} is None:")
                src.emit(ind + 1, f"{out}.append(0xFF)")
                src.emit(ind, "else:")
                src.emit(ind + 1, f"{out}.append(1)")
                ind += 1
            self.struct(ind, f, v, out)
            return
        kind = f.type_str
        fixed = _FIXED.get(kind)
        if fixed is not None:
            src.emit(ind, f"{out} += {src.packer(fixed)}({value})")
        elif kind == "uuid":
            src.emit(ind, f"{out} += {src.const(_uuid_bytes, 'uuid_bytes')}({value})")
        elif kind == "bitfield":
            src.emit(ind, f"{out} += {src.const(_bitfield_bytes, 'bitfield_bytes')}({value})")
        elif kind in ("string", "bytes", "records"):
            v = src.var("v")
            src.emit(ind, f"{v} = {value}")
            src.emit(ind, f"if {v} is None:")
            self.null_length(ind + 1, "h" if kind == "string" else "i", out)
            if kind == "records":
                self.has_records = True
                region = src.const(FileRegion, "FileRegion")
                src.emit(ind, f"elif {v}.__class__ is {region}:")
                self.length(ind + 1, f"{v}.length", "i", out)
                src.emit(ind + 1, "if _chunks is None:")
                src.emit(ind + 2, "_chunks = []")
                src.emit(ind + 1, f"_chunks.append({out})")
                src.emit(ind + 1, f"_chunks.append({v})")
                src.emit(ind + 1, f"{out} = bytearray()")
            src.emit(ind, "else:")
            if kind == "string":
                src.emit(ind + 1, f"{v} = {v}.encode()")
            elif kind == "bytes":
                src.emit(ind + 1, f"if {v}.__class__ is str:")
                src.emit(ind + 2, f"{v} = {v}.encode()")
            self.length(ind + 1, f"len({v})", "h" if kind == "string" else "i", out)
            src.emit(ind + 1, f"{out} += {v}")
        else:
            raise NotImplementedError(f"no encoder for field type {kind}")

    def struct(self, ind: int, struct_field: Any, item: str, out: str = "_b") -> None:
        src = self.src
        for fmt, run in _runs(_in_version(struct_field, self.version)):
            if fmt:
                args = ", ".join(f"{item}.{f.name}" for f in run)
                src.emit(ind, f"{out} += {src.packer(fmt)}({args})")
            else:
                self.value(ind, run[0], f"{item}.{run[0].name}", out)
        if self.compact:
            self.tag_section(ind, struct_field, item, out)

    def tag_section(self, ind: int, struct_field: Any, item: str, out: str) -> None:
        """Known tagged fields whose value is not the default, in schema order, as
        kafka-python writes them; unknown tags are not written back (nor by kafka-python)."""
        src = self.src
        tagged = [] if self.in_tagged_value else _tagged(struct_field, self.version)
        if not tagged:
            src.emit(ind, f"{out}.append({_NO_TAGS})")
            return
        values = []
        for f in tagged:
            v = src.var("v")
            src.emit(ind, f"{v} = {item}.{f.name}")
            if f.default is None:
                values.append((f, v, f"{v} is not None"))
            else:
                values.append((f, v, f"{v} != {src.const(f.default, 'default')}"))
        src.emit(ind, f"if not ({' or '.join(test for _, _, test in values)}):")
        src.emit(ind + 1, f"{out}.append({_NO_TAGS})")
        src.emit(ind, "else:")
        ind += 1
        found = src.var("tagged")
        src.emit(ind, f"{found} = []")
        for f, v, test in values:
            src.emit(ind, f"if {test}:")
            value_out = src.var("tb")
            src.emit(ind + 1, f"{value_out} = bytearray()")
            inner = _EncoderWriter(src, self.version, compact=True, in_tagged_value=True)
            inner.value(ind + 1, f, v, value_out)
            src.emit(ind + 1, f"{found}.append(({f.tag}, {value_out}))")
        uv = src.const(uvarint, "uvarint")
        src.emit(ind, f"{out} += {uv}(len({found}))")
        tag, data = src.var("tag"), src.var("data")
        src.emit(ind, f"for {tag}, {data} in {found}:")
        src.emit(ind + 1, f"{out} += {uv}({tag})")
        src.emit(ind + 1, f"{out} += {uv}(len({data}))")
        src.emit(ind + 1, f"{out} += {data}")


def response_encoder(
    message: type[ApiMessage], version: int
) -> tuple[Callable[[Any, int], list[Chunk]], str]:
    """encode(response, correlation_id) -> the framed response as chunks, and its source.

    One chunk, a bytearray, unless a records field holds a FileRegion: then the bytes
    before it, the region, the bytes after, and so on. The frame's size counts them all.
    """
    src = _Source()
    compact = message.flexible_version_q(version)
    writer = _EncoderWriter(src, version, compact)
    src.emit(0, "def encode(message, correlation_id):")
    # The size, patched in at the end, then the response header (flexible: a tag count).
    src.emit(1, f"_b = bytearray({src.packer('ii')}(0, correlation_id))")
    if compact:
        src.emit(1, f"_b.append({_NO_TAGS})")
    writer.struct(1, message._struct, "message")
    pack_size = src.const(_INT32.pack_into, "pack_size_into")
    if writer.has_records:
        src.lines.insert(1, "    _chunks = None")
        src.emit(1, "if _chunks is None:")
        src.emit(2, f"{pack_size}(_b, 0, len(_b) - 4)")
        src.emit(2, "return [_b]")
        src.emit(1, "_chunks.append(_b)")
        src.emit(1, f"{pack_size}(_chunks[0], 0, sum(map(len, _chunks)) - 4)")
        src.emit(1, "return _chunks")
    else:
        src.emit(1, f"{pack_size}(_b, 0, len(_b) - 4)")
        src.emit(1, "return [_b]")
    name = f"<herdless encode {message.__name__} v{version}>"
    return src.compile("encode", name), "\n".join(src.lines)
