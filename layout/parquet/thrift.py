"""Thrift compact protocol: a decoder generated per struct from `format.THRIFT_FIELDS`, and an encoder.

Speed: a generic interpreter (one dispatch per field and per value, as thriftpy2 does) is several times
slower than straight-line code. So at import time we build the Python source of one function per struct
(`_r_<Struct>(buf, pos, depth) -> (obj, pos)`) from the declarative field table and `exec` it once. The
generated code works on `bytes` with local variables, decodes the 1-byte varint case inline, has
unrolled loops for list<i64>, list<bool>, list<binary>, and inlines the fields of all-integer structs in
lists (PageLocation, PageEncodingStats), and builds the NamedTuples with `tuple.__new__`.

Safety on corrupt input: every read is bounds-checked (IndexError from `buf[pos]` at the end of the data
is turned into ThriftError; binary lengths are checked explicitly), list sizes are checked against the
remaining bytes before anything is allocated (every element takes at least one byte), varints are at
most 10 bytes, and struct nesting (including skipped unknown fields) is limited to MAX_DEPTH. Unknown
field ids, and known ids with an unexpected wire type, are skipped (forward compatibility).
"""

from __future__ import annotations

import enum
import functools
import struct
from collections.abc import Callable
from typing import Any, TypeVar

import numpy

from layout.parquet import format as fmt

MAX_DEPTH = 64

# Compact protocol wire types.
(T_STOP, T_TRUE, T_FALSE, T_BYTE, T_I16, T_I32, T_I64, T_DOUBLE, T_BINARY, T_LIST, T_SET, T_MAP,
 T_STRUCT) = range(13)


class ThriftError(Exception):
    """Malformed Thrift data; callers turn it into a ParquetError naming the file."""


def _varint(b: bytes, p: int, x: int) -> tuple[int, int]:
    """Rest of an unsigned varint whose first byte `x` (> 127) was already read; at most 10 bytes."""
    x &= 0x7F
    shift = 7
    while True:
        c = b[p]
        p += 1
        x |= (c & 0x7F) << shift
        if c < 128:
            return x, p
        shift += 7
        if shift > 63:
            raise ThriftError(f"varint longer than 10 bytes at offset {p}")


def _read_varint(b: bytes, p: int) -> tuple[int, int]:
    x = b[p]
    p += 1
    if x > 127:
        return _varint(b, p, x)
    return x, p


def _skip(b: bytes, p: int, t: int, d: int) -> int:
    """Skip one value of wire type `t` in a struct field (bools live in the field header)."""
    if t == T_TRUE or t == T_FALSE:
        return p
    return _skip_value(b, p, t, d)


def _skip_value(b: bytes, p: int, t: int, d: int) -> int:
    if t == T_TRUE or t == T_FALSE or t == T_BYTE:
        b[p]
        return p + 1
    if t == T_I16 or t == T_I32 or t == T_I64:
        return _read_varint(b, p)[1]
    if t == T_DOUBLE:
        if p + 8 > len(b):
            raise ThriftError("truncated double")
        return p + 8
    if t == T_BINARY:
        n, p = _read_varint(b, p)
        if p + n > len(b):
            raise ThriftError(f"binary length {n} exceeds the remaining {len(b) - p} bytes")
        return p + n
    if d > MAX_DEPTH:
        raise ThriftError(f"Thrift structures nested deeper than {MAX_DEPTH} levels")
    if t == T_LIST or t == T_SET:
        h = b[p]
        p += 1
        n, et = h >> 4, h & 15
        if n == 15:
            n, p = _read_varint(b, p)
        if n > len(b) - p:
            raise ThriftError(f"list of {n} elements exceeds the remaining {len(b) - p} bytes")
        if n and (et == T_STOP or et > T_STRUCT):
            raise ThriftError(f"invalid list element type {et}")
        if et <= T_BYTE:
            return p + n
        for _ in range(n):
            p = _skip_value(b, p, et, d + 1)
        return p
    if t == T_MAP:
        n, p = _read_varint(b, p)
        if n == 0:
            return p
        if 2 * n > len(b) - p:
            raise ThriftError(f"map of {n} entries exceeds the remaining {len(b) - p} bytes")
        h = b[p]
        p += 1
        kt, vt = h >> 4, h & 15
        if kt == T_STOP or kt > T_STRUCT or vt == T_STOP or vt > T_STRUCT:
            raise ThriftError(f"invalid map key/value types {kt}/{vt}")
        for _ in range(n):
            p = _skip_value(b, p, kt, d + 1)
            p = _skip_value(b, p, vt, d + 1)
        return p
    if t == T_STRUCT:
        d += 1
        while True:
            h = b[p]
            p += 1
            ft = h & 15
            if ft == T_STOP:
                if h:
                    raise ThriftError(f"invalid field header byte {h:#04x}")
                return p
            if h <= 15:
                p = _read_varint(b, p)[1]
            p = _skip(b, p, ft, d)
    raise ThriftError(f"invalid Thrift compact type id {t}")


# --- code generation ---------------------------------------------------------------------------------

_WIRE = {"bool": (T_TRUE, T_FALSE), "byte": T_BYTE, "i16": T_I16, "i32": T_I32, "i64": T_I64,
         "double": T_DOUBLE, "binary": T_BINARY, "string": T_BINARY}


def _wire_type(spec: Any) -> Any:
    if isinstance(spec, tuple):
        return T_LIST
    if isinstance(spec, type) and issubclass(spec, enum.Enum):
        return T_I32
    if isinstance(spec, type):
        return T_STRUCT
    return _WIRE[spec]


def _is_int_spec(spec: Any) -> bool:
    return spec in ("i16", "i32", "i64") or (isinstance(spec, type) and issubclass(spec, enum.Enum))


def _inlinable(cls: type) -> bool:
    """All-integer structs are decoded inline inside their lists (PageLocation: thousands per file)."""
    fields = fmt.THRIFT_FIELDS[cls]
    return bool(fields) and all(_is_int_spec(f[2]) for f in fields)


def _int_code(target: str, spec: Any, ind: str) -> list[str]:
    # The whole varint loop inline: a call per multi-byte varint costs more than the decoding itself.
    out = [f"{ind}x = b[p]; p += 1",
           f"{ind}if x > 127:",
           f"{ind}    x &= 127; s = 7",
           f"{ind}    while True:",
           f"{ind}        c = b[p]; p += 1; x |= (c & 127) << s",
           f"{ind}        if c < 128: break",
           f"{ind}        s += 7",
           f"{ind}        if s > 63: raise ThriftError(f'varint longer than 10 bytes at offset {{p}}')",
           f"{ind}{target} = (x >> 1) ^ -(x & 1)"]
    if isinstance(spec, type):  # enum: known values become members, unknown stay ints
        out.append(f"{ind}{target} = E_{spec.__name__}.get({target}, {target})")
    return out


def _binary_code(target: str, ind: str, string: bool) -> list[str]:
    val = "b[p:q].decode('utf-8', 'replace')" if string else "b[p:q]"
    return [f"{ind}x = b[p]; p += 1",
            f"{ind}if x > 127: x, p = _varint(b, p, x)",
            f"{ind}q = p + x",
            f"{ind}if q > L: raise ThriftError(f'binary length {{x}} exceeds the remaining {{L - p}} bytes')",
            f"{ind}{target} = {val}; p = q"]


def _field_loop(cls: type, prefix: str, ind: str, fid: str = "fid") -> list[str]:
    """Lines that decode the fields of one `cls` struct into variables prefix1..prefixN
    (field id in `fid`)."""
    fields = fmt.THRIFT_FIELDS[cls]
    out = []
    if fields:
        out.append(ind + " = ".join(f"{prefix}{i}" for i in range(len(fields))) + " = None")
    out += [f"{ind}{fid} = 0",
            f"{ind}while True:",
            f"{ind}    h = b[p]; p += 1",
            f"{ind}    t = h & 15",
            f"{ind}    if not t:",
            f"{ind}        if h: raise ThriftError(f'invalid field header byte {{h:#04x}}')",
            f"{ind}        break",
            f"{ind}    if h > 15: {fid} += h >> 4",
            f"{ind}    else:",
            f"{ind}        x = b[p]; p += 1",
            f"{ind}        if x > 127: x, p = _varint(b, p, x)",
            f"{ind}        {fid} = (x >> 1) ^ -(x & 1)"]
    kw = "if"
    ind2 = ind + "        "
    for i, (fnum, _name, spec, _req) in enumerate(fields):
        target = f"{prefix}{i}"
        wt = _wire_type(spec)
        out.append(f"{ind}    {kw} {fid} == {fnum}:")
        kw = "elif"
        if spec == "bool":
            out += [f"{ind}        if t == 1: {target} = True",
                    f"{ind}        elif t == 2: {target} = False",
                    f"{ind}        else: p = _skip(b, p, t, d)"]
            continue
        # Integers of any width share the zigzag varint encoding: accept i16/i32/i64 alike, as the C++
        # and Java readers effectively do (some writers use the wrong width, e.g. ARROW-GH-41317).
        cond = "3 < t < 7" if _is_int_spec(spec) else f"t == {wt}"
        out.append(f"{ind}        if {cond}:")
        out += _value_code(target, spec, ind2 + "    ")
        out.append(f"{ind}        else: p = _skip(b, p, t, d)")
    if fields:
        out.append(f"{ind}    else: p = _skip(b, p, t, d)")
    else:
        out.append(f"{ind}    p = _skip(b, p, t, d)")
    for i, (fnum, name, _spec, req) in enumerate(fields):
        if req:
            out.append(f"{ind}if {prefix}{i} is None: raise ThriftError("
                       f"'{cls.__name__}.{name} (field {fnum}) is missing')")
    return out


def _fast_path(cls: type, prefix: str, ind: str, make: str) -> list[str]:
    """Straight-line decoding of an all-integer struct written the usual way (every field, in id order,
    short headers, then STOP); anything else rewinds to the element start and takes the general loop."""
    out = [f"{ind}s0 = p"]
    cur = ind
    last = 0
    for i, (fnum, _name, spec, _req) in enumerate(fmt.THRIFT_FIELDS[cls]):
        header = ((fnum - last) << 4) | _wire_type(spec)
        last = fnum
        out += [f"{cur}if b[p] == {header}:", f"{cur}    p += 1"]
        cur += "    "
        out += _int_code(f"{prefix}{i}", spec, cur)
    out += [f"{cur}if b[p] == 0:", f"{cur}    p += 1", f"{cur}    {make}", f"{cur}    continue",
            f"{ind}p = s0"]
    return out


def _value_code(target: str, spec: Any, ind: str) -> list[str]:
    if _is_int_spec(spec):
        return _int_code(target, spec, ind)
    if spec in ("binary", "string"):
        return _binary_code(target, ind, spec == "string")
    if spec == "byte":
        return [f"{ind}{target} = b[p]; p += 1", f"{ind}if {target} > 127: {target} -= 256"]
    if spec == "double":
        return [f"{ind}{target} = _unpack_d(b, p)[0]; p += 8"]
    if isinstance(spec, tuple):
        return _list_code(target, spec[1], ind)
    if spec is fmt.Empty:
        return [f"{ind}p = _skip_value(b, p, 12, d); {target} = EMPTY"]
    return [f"{ind}{target}, p = _r_{spec.__name__}(b, p, d)"]


def _list_code(target: str, elem: Any, ind: str) -> list[str]:
    ewt = _wire_type(elem)
    out = [f"{ind}h = b[p]; p += 1",
           f"{ind}n = h >> 4; et = h & 15",
           f"{ind}if n == 15:",
           f"{ind}    n = b[p]; p += 1",
           f"{ind}    if n > 127: n, p = _varint(b, p, n)",
           (f"{ind}if n > L - p: raise ThriftError(f'list of {{n}} elements exceeds the remaining "
            f"{{L - p}} bytes')")]
    if elem == "bool":
        out += [f"{ind}if et == 1 or et == 2:",
                f"{ind}    {target} = [x == 1 for x in b[p:p + n]]; p += n"]
    else:
        cond = "3 < et < 7" if _is_int_spec(elem) else f"et == {ewt}"
        out.append(f"{ind}if {cond} or n == 0:")
        body = ind + "    "
        out.append(f"{body}{target} = lst = []; app = lst.append")
        if elem in ("i16", "i32", "i64"):
            # Fast paths: all one-byte varints (null counts, small numbers); long lists through numpy.
            out += [f"{body}seg = b[p:p + n]",
                    f"{body}if seg.isascii():",
                    f"{body}    {target} = [(x >> 1) ^ -(x & 1) for x in seg]; p += n",
                    f"{body}elif n >= {_NP_MIN} and (r := _np_varints(b, p, n, 1, None)) is not None:",
                    f"{body}    {target} = r[1][0]; p = r[0]",
                    f"{body}else:",
                    f"{body}    for _ in range(n):"] + _int_code("v", elem, body + "        ")
            out.append(f"{body}        app(v)")
        elif _is_int_spec(elem):
            out += [f"{body}for _ in range(n):"] + _int_code("v", elem, body + "    ")
            out.append(f"{body}    app(v)")
        elif elem == "binary":
            # Fast path: every value has the same one-byte length k (min/max of fixed-width types): one
            # strided slice checks all the length bytes at once, a comprehension cuts the values.
            out += [f"{body}k = b[p] if n else 0",
                    f"{body}if n and k < 128 and b[p:p + n * (k + 1):k + 1] == bytes((k,)) * n:",
                    f"{body}    {target} = [b[i:i + k] for i in range(p + 1, p + 1 + n * (k + 1), k + 1)]",
                    f"{body}    p += n * (k + 1)",
                    f"{body}else:",
                    f"{body}    for _ in range(n):"] + _binary_code("v", body + "        ", False)
            out.append(f"{body}        app(v)")
        elif elem == "string":
            out += [f"{body}for _ in range(n):"] + _binary_code("v", body + "    ", elem == "string")
            out.append(f"{body}    app(v)")
        elif isinstance(elem, type) and _inlinable(elem):
            fields = fmt.THRIFT_FIELDS[elem]
            k = len(fields)
            make = f"app(_new({elem.__name__}, ({', '.join(f'g{i}' for i in range(k))},)))"
            headers, last = [], 0
            for fnum, _name, spec, _req in fields:
                headers.append(((fnum - last) << 4) | _wire_type(spec))
                last = fnum
            if all(h < 128 for h in headers) and not any(isinstance(f[2], type) for f in fields):
                # Long lists of the usual layout: numpy splits all varints (headers included) at once.
                out += [(f"{body}if n >= {_NP_MIN} and (r := _np_varints(b, p, n, {2 * k + 1}, "
                         f"{tuple(headers)!r})):"),
                        f"{body}    p = r[0]",
                        f"{body}    {target} = lst = list(map(_maker({elem.__name__}), zip(*r[1])))",
                        f"{body}    n = 0"]
            out.append(f"{body}for _ in range(n):")
            out += _fast_path(elem, "g", body + "    ", make)
            out += _field_loop(elem, "g", body + "    ", "gid")
            out.append(f"{body}    {make}")
        else:
            out += [f"{body}for _ in range(n):"] + _value_code("v", elem, body + "    ")
            out.append(f"{body}    app(v)")
    out += [f"{ind}else:",  # unexpected element type: skip the whole list, leave the field unset
            f"{ind}    p = _skip_list_body(b, p, n, et, d)"]
    return out


_NP_MIN = 24  # below this many elements numpy's fixed cost (~20 us) is not worth it
_np = None


def _maker(cls: type) -> Any:
    return functools.partial(tuple.__new__, cls)


def _np_varints(b: bytes, p: int, n: int, per: int, headers: tuple[int, ...] | None) -> Any:
    """Vectorized decoding of `n` elements of `per` consecutive varints each, starting at `p`.

    With `headers`, an element is (header, value, header, value, ..., STOP) and the header bytes must
    be exactly `headers` (then 0); the values are returned zigzag-decoded per field. Returns
    (end position, [list of ints per value column]) or None when the data is not in that shape (the
    caller then takes the general path, which also produces the precise error for corrupt input).
    """
    global _np
    if _np is None:

        _np = numpy
    np = _np
    count = n * per
    avail = min(len(b) - p, 10 * count)
    if avail <= 0:
        return None
    seg = np.frombuffer(b, np.uint8, count=avail, offset=p)
    ends = np.flatnonzero(seg < 128)
    if len(ends) < count:
        return None
    ends = ends[:count]
    starts = np.empty(count, np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    if lengths.max() > 10:
        return None
    total = int(ends[-1]) + 1
    shifts = (np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)) * 7
    vals = np.add.reduceat((seg[:total] & 127).astype(np.uint64) << shifts.astype(np.uint64), starts)
    one = np.uint64(1)
    if headers is None:
        cols = [vals]
    else:
        grid = vals.reshape(n, per)
        lens = lengths.reshape(n, per)
        hdr_cols = list(range(0, per, 2))
        expect = np.array(list(headers) + [0], dtype=np.uint64)
        if not (grid[:, hdr_cols] == expect).all() or not (lens[:, hdr_cols] == 1).all():
            return None
        cols = [grid[:, i] for i in range(1, per, 2)]
    out = [((c >> one) ^ (np.uint64(0) - (c & one))).view(np.int64).tolist() for c in cols]
    return p + total, out


def _skip_list_body(b: bytes, p: int, n: int, et: int, d: int) -> int:
    if n == 0:
        return p
    if et == T_STOP or et > T_STRUCT:
        raise ThriftError(f"invalid list element type {et}")
    for _ in range(n):
        p = _skip_value(b, p, et, d + 1)
    return p


def _gen_struct(cls: type) -> str:
    name = cls.__name__
    fields = fmt.THRIFT_FIELDS[cls]
    # table and class must agree (every THRIFT_FIELDS key is a NamedTuple)
    assert tuple(f[1] for f in fields) == cls._fields, name  # type: ignore[attr-defined]
    lines = [f"def _r_{name}(b, p, d):",
             (f"    if d > {MAX_DEPTH}: raise ThriftError('Thrift structures nested deeper than "
              f"{MAX_DEPTH} levels')"),
             "    d += 1",
             "    L = len(b)"]
    lines += _field_loop(cls, "f", "    ")
    vals = ", ".join(f"f{i}" for i in range(len(fields)))
    lines.append(f"    return _new({name}, ({vals}{',' if fields else ''})), p")
    return "\n".join(lines)


def _build() -> dict[str, Any]:
    ns: dict[str, Any] = {
        "_varint": _varint, "_skip": _skip, "_skip_value": _skip_value, "_skip_list_body": _skip_list_body,
        "ThriftError": ThriftError, "_new": tuple.__new__, "_unpack_d": struct.Struct("<d").unpack_from,
        "EMPTY": fmt.EMPTY, "_np_varints": _np_varints, "_maker": _maker,
    }
    sources = []
    for cls, fields in fmt.THRIFT_FIELDS.items():
        ns[cls.__name__] = cls
        for _fid, _n, spec, _r in fields:
            e = spec[1] if isinstance(spec, tuple) else spec
            if isinstance(e, type) and issubclass(e, enum.Enum):
                ns[f"E_{e.__name__}"] = {m.value: m for m in e}
        sources.append(_gen_struct(cls))
    source = "\n\n".join(sources)
    exec(compile(source, "<layout.parquet.thrift generated>", "exec"), ns)  # noqa: S102 - our own source
    ns["__source__"] = source
    return ns


_NS = _build()
GENERATED_SOURCE: str = _NS["__source__"]
_READERS: dict[type, Callable[[bytes, int, int], tuple[Any, int]]] = {
    cls: _NS[f"_r_{cls.__name__}"] for cls in fmt.THRIFT_FIELDS}
_S = TypeVar("_S")


def decode_struct(cls: type[_S], data: bytes, pos: int = 0) -> tuple[_S, int]:
    """Decode one `cls` struct from `data` at `pos`; return (object, end position). Raises ThriftError."""
    if not isinstance(data, bytes):
        data = bytes(data)
    try:
        return _READERS[cls](data, pos, 0)
    except IndexError:
        raise ThriftError(f"truncated {cls.__name__}: data ends after {len(data)} bytes") from None
    except struct.error:
        raise ThriftError(f"truncated {cls.__name__}: data ends after {len(data)} bytes") from None
    except (RecursionError, MemoryError, OverflowError) as e:  # defensive: never expected
        raise ThriftError(f"malformed {cls.__name__}: {type(e).__name__}") from None


# --- encoder (tests, tools): the exact inverse of the decoder -----------------------------------------


def _zz(v: int) -> bytes:
    return _uvarint((v << 1) ^ (v >> 63))


def _uvarint(v: int) -> bytes:
    out = bytearray()
    while v > 127:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _enc_value(spec: Any, v: Any, out: bytearray, in_list: bool = False) -> None:
    if spec == "bool":
        out.append(1 if v else 2)  # only reached inside lists; fields carry bools in the header
    elif _is_int_spec(spec):
        out += _zz(int(v))
    elif spec == "byte":
        out.append(v & 0xFF)
    elif spec == "double":
        out += struct.pack("<d", v)
    elif spec in ("binary", "string"):
        raw = v.encode() if isinstance(v, str) else bytes(v)
        out += _uvarint(len(raw)) + raw
    elif isinstance(spec, tuple):
        ewt = _wire_type(spec[1])
        ewt = T_TRUE if spec[1] == "bool" else ewt
        out.append((min(len(v), 15) << 4) | ewt)
        if len(v) >= 15:
            out += _uvarint(len(v))
        for e in v:
            _enc_value(spec[1], e, out, True)
    else:
        out += encode_struct(v)


def encode_struct(obj: Any) -> bytes:
    """Compact-protocol bytes of a format object (fields that are None are omitted)."""
    out = bytearray()
    last = 0
    for fid, name, spec, _req in fmt.THRIFT_FIELDS[type(obj)]:
        v = getattr(obj, name)
        if v is None:
            continue
        wt = (T_TRUE if v else T_FALSE) if spec == "bool" else _wire_type(spec)
        delta = fid - last
        if 0 < delta <= 15:
            out.append((delta << 4) | wt)
        else:
            out.append(wt)
            out += _zz(fid)
        last = fid
        if spec != "bool":
            _enc_value(spec, v, out)
    out.append(T_STOP)
    return bytes(out)
