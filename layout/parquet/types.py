"""Typed values of Parquet columns: decoding min/max bytes, sort orders, order keys, JSON and PLAIN bytes.

`ColumnType` is built once per leaf column from its SchemaElement and the file's ColumnOrder.

Conventions (documented here once):
- Out-of-range temporal values (a DATE or TIMESTAMP outside years 1..9999, a TIME outside one day) decode
  to the plain int in the column's unit instead of raising; `to_json` then gives that number.
- Nanosecond TIME / TIMESTAMP / INT96 values with a sub-microsecond part decode to `TimeNs` /
  `DatetimeNs` (subclasses of `datetime.time` / `datetime.datetime` with a `nanosecond` attribute, 0-999
  on top of `microsecond`); `to_json`, `plain_bytes` and `order_key` keep all nine digits. Note that
  Python's own comparison of these ignores the extra nanoseconds: compare order keys, not values.
- Strings whose bytes are not valid UTF-8 (e.g. a bound truncated inside a multi-byte character)
  decode with errors="replace" (for display only); `order_key` always works on the raw bytes.
- `order_key(raw)` orders exactly like the column's sort order: int for integers (unsigned as
  unsigned), DATE/TIME/TIMESTAMP (epoch units of the column) and INT96 (ns since epoch), the unscaled int
  for DECIMAL, float for FLOAT/DOUBLE/FLOAT16, bool for BOOLEAN, raw bytes otherwise (unsigned
  lexicographic). It is meaningless when `sort_order` is UNKNOWN.
"""

from __future__ import annotations

import datetime as dt
import enum
import math
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

from layout.errors import UsageError
from layout.parquet.format import ColumnOrder, ConvertedType, LogicalType, PhysicalType, SchemaElement


class SortOrder(enum.Enum):
    SIGNED = "SIGNED"
    UNSIGNED = "UNSIGNED"
    UNKNOWN = "UNKNOWN"

    def __str__(self) -> str:
        return self.name


UTC = dt.UTC
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=UTC)
_PER_SECOND = {"ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_JULIAN_EPOCH_DAY = 2_440_588  # Julian day number of 1970-01-01
_NS_PER_DAY = 86_400 * 10**9


class DatetimeNs(dt.datetime):
    """A datetime with `nanosecond` (0-999) beyond `microsecond`; built by `from_ns`."""

    __slots__ = ("nanosecond",)
    nanosecond: int

    def isoformat(self, sep: str = "T", timespec: str = "auto") -> str:
        base = super().isoformat(sep, "microseconds")
        head, tail = base[:26], base[26:]
        return f"{head}{self.nanosecond:03d}{tail}"

    __str__ = isoformat


class TimeNs(dt.time):
    """A time with `nanosecond` (0-999) beyond `microsecond`."""

    __slots__ = ("nanosecond",)
    nanosecond: int

    def isoformat(self, timespec: str = "auto") -> str:
        base = super().isoformat("microseconds")
        return f"{base[:15]}{self.nanosecond:03d}{base[15:]}"

    __str__ = isoformat


def _datetime_from_units(v: int, unit: str, utc: bool) -> Any:
    per = _PER_SECOND[unit]
    micros, ns = (v * 1_000_000 // per, 0) if unit != "ns" else divmod(v, 1000)
    try:
        base = (_EPOCH_UTC if utc else _EPOCH) + dt.timedelta(microseconds=micros)
    except OverflowError:
        return v
    if not ns:
        return base
    out = DatetimeNs(base.year, base.month, base.day, base.hour, base.minute, base.second,
                     base.microsecond, base.tzinfo)
    out.nanosecond = ns
    return out


def _time_from_units(v: int, unit: str) -> Any:
    per = _PER_SECOND[unit]
    if not 0 <= v < 86_400 * per:
        return v
    secs, frac = divmod(v, per)
    micros, ns = (frac * 1_000_000 // per, 0) if unit != "ns" else divmod(frac, 1000)
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    if not ns:
        return dt.time(h, m, s, micros)
    out = TimeNs(h, m, s, micros)
    out.nanosecond = ns
    return out


def _units_from_datetime(value: dt.datetime, unit: str) -> int:
    delta = value - (_EPOCH_UTC if value.tzinfo is not None else _EPOCH)
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return _exact_units(micros, value, unit)


def _exact_units(micros: int, value: Any, unit: str) -> int:
    """`micros` in `unit`; a value between two units has no exact PLAIN form (a bloom hash would lie)."""
    if unit == "ns":
        return micros * 1000 + getattr(value, "nanosecond", 0)
    units, rest = divmod(micros, 1_000_000 // _PER_SECOND[unit])
    if rest:
        raise ValueError(f"{value} is not a whole number of {unit}")
    return units


def _units_from_time(value: dt.time, unit: str) -> int:
    micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    return _exact_units(micros, value, unit)


def _unit_of(tu: Any) -> str | None:
    if tu is None:
        return None
    return ("ms" if tu.millis is not None else "us" if tu.micros is not None else "ns" if tu.nanos is not None
            else None)


_STRINGY = {ConvertedType.UTF8, ConvertedType.ENUM, ConvertedType.JSON}
# Keyed by int: a converted type newer than this spec stays a plain int (IntEnum members hash as their ints).
_SIGNED_CT: dict[int, int] = {ConvertedType.INT_8: 8, ConvertedType.INT_16: 16, ConvertedType.INT_32: 32,
                              ConvertedType.INT_64: 64}
_UNSIGNED_CT: dict[int, int] = {ConvertedType.UINT_8: 8, ConvertedType.UINT_16: 16, ConvertedType.UINT_32: 32,
                                ConvertedType.UINT_64: 64}
_UNDEFINED_CT = {ConvertedType.MAP, ConvertedType.MAP_KEY_VALUE, ConvertedType.LIST, ConvertedType.INTERVAL}


def _classify(el: SchemaElement) -> tuple[str, dict[str, Any]]:
    """(kind, details) of a leaf from its logical type, else converted type, else physical type."""
    pt = el.type
    lt: LogicalType | None = el.logical_type
    ct = el.converted_type
    if lt is not None:
        if lt.string is not None or lt.enum is not None or lt.json is not None:
            return "string", {}
        if lt.bson is not None:
            return "binary", {}
        if lt.uuid is not None:
            return ("uuid", {}) if pt == PhysicalType.FIXED_LEN_BYTE_ARRAY else ("undefined", {})
        if lt.decimal is not None:
            return "decimal", {"scale": lt.decimal.scale or 0, "precision": lt.decimal.precision}
        if lt.date is not None:
            return "date", {}
        if lt.time is not None:
            unit = _unit_of(lt.time.unit)
            return ("time", {"unit": unit}) if unit else ("undefined", {})
        if lt.timestamp is not None:
            unit = _unit_of(lt.timestamp.unit)
            return ("timestamp", {"unit": unit, "utc": bool(lt.timestamp.is_adjusted_to_utc)}) if unit else (
                "undefined", {})
        if lt.integer is not None:
            return "int", {"signed": bool(lt.integer.is_signed), "bits": lt.integer.bit_width}
        if lt.float16 is not None:
            return ("float16", {}) if pt == PhysicalType.FIXED_LEN_BYTE_ARRAY else ("undefined", {})
        # NULL ("UNKNOWN"), MAP, LIST, VARIANT, GEOMETRY, GEOGRAPHY, VECTOR, or a member newer than us.
        return "undefined", {}
    if ct is not None:
        if ct in _STRINGY:
            return "string", {}
        if ct == ConvertedType.BSON:
            return "binary", {}
        if ct == ConvertedType.DECIMAL:
            return "decimal", {"scale": el.scale or 0, "precision": el.precision}
        if ct == ConvertedType.DATE:
            return "date", {}
        if ct == ConvertedType.TIME_MILLIS:
            return "time", {"unit": "ms"}
        if ct == ConvertedType.TIME_MICROS:
            return "time", {"unit": "us"}
        if ct == ConvertedType.TIMESTAMP_MILLIS:  # legacy timestamps are UTC-normalized (LogicalTypes.md)
            return "timestamp", {"unit": "ms", "utc": True}
        if ct == ConvertedType.TIMESTAMP_MICROS:
            return "timestamp", {"unit": "us", "utc": True}
        if ct in _SIGNED_CT:
            return "int", {"signed": True, "bits": _SIGNED_CT[ct]}
        if ct in _UNSIGNED_CT:
            return "int", {"signed": False, "bits": _UNSIGNED_CT[ct]}
        if ct in _UNDEFINED_CT or not isinstance(ct, ConvertedType):
            return "undefined", {}
    # `pt` is a leaf's type, which the schema's reader checked is a PhysicalType.
    return {
        PhysicalType.BOOLEAN: "bool", PhysicalType.INT32: "int", PhysicalType.INT64: "int",
        PhysicalType.INT96: "int96", PhysicalType.FLOAT: "float", PhysicalType.DOUBLE: "double",
        PhysicalType.BYTE_ARRAY: "binary", PhysicalType.FIXED_LEN_BYTE_ARRAY: "binary",
    }[pt], {"signed": True, "bits": 32 if pt == PhysicalType.INT32 else 64}  # type: ignore[index]


_FLOAT_KINDS = {"float", "double", "float16"}
_SIGNED_KINDS = {"bool", "float", "double", "float16", "decimal", "date", "time", "timestamp"}


@dataclass(frozen=True, slots=True)
class ColumnType:
    """The type of one leaf column; see the module docstring for the value conventions."""

    physical_type: PhysicalType
    type_length: int | None = None
    converted_type: ConvertedType | int | None = None
    logical_type: LogicalType | None = None
    scale: int | None = None
    precision: int | None = None
    column_order: ColumnOrder | None = None  # None: the file has no column_orders
    name: str = ""  # the column's dotted path, for error messages
    kind: str = field(default="", compare=False)  # bool int int96 float double float16 decimal date time
    #   timestamp string binary uuid undefined
    signed: bool = field(default=True, compare=False)
    bits: int | None = field(default=None, compare=False)
    unit: str | None = field(default=None, compare=False)  # "ms" "us" "ns" for time/timestamp
    utc: bool = field(default=False, compare=False)
    sort_order: SortOrder = field(default=SortOrder.UNKNOWN, compare=False)
    _decode: Callable[[bytes], Any] = field(default=None, compare=False,  # type: ignore[assignment]
                                            repr=False)
    _key: Callable[[bytes], Any] = field(default=None, compare=False, repr=False)  # type: ignore[assignment]

    @classmethod
    def from_schema(cls, element: SchemaElement, column_order: ColumnOrder | None = None,
                    name: str | None = None) -> ColumnType:
        kind, info = _classify(element)
        ct = cls(
            # A leaf's type, which the schema's reader checked (a group's None raises ValueError here).
            physical_type=PhysicalType(element.type),  # type: ignore[arg-type]
            type_length=element.type_length,
            converted_type=element.converted_type, logical_type=element.logical_type,
            scale=info.get("scale", element.scale), precision=info.get("precision", element.precision),
            column_order=column_order, name=name if name is not None else (element.name or ""),
            kind=kind, signed=info.get("signed", True), bits=info.get("bits"), unit=info.get("unit"),
            utc=info.get("utc", False),
        )
        object.__setattr__(ct, "sort_order", ct._compute_sort_order())
        dec, key = ct._make_codecs()
        object.__setattr__(ct, "_decode", dec)
        object.__setattr__(ct, "_key", key)
        return ct

    # --- sort order ----------------------------------------------------------------------------------

    @property
    def type_sort_order(self) -> SortOrder:
        """The order the type defines (TypeDefinedOrder), regardless of the file's column order."""
        k = self.kind
        if k == "int":
            return SortOrder.SIGNED if self.signed else SortOrder.UNSIGNED
        if k in _SIGNED_KINDS:
            return SortOrder.SIGNED
        if k in ("string", "binary", "uuid"):
            return SortOrder.UNSIGNED
        return SortOrder.UNKNOWN  # INT96 (without INT96 order), INTERVAL, NULL, MAP, LIST, VARIANT, ...

    def _compute_sort_order(self) -> SortOrder:
        co = self.column_order
        if co is None or co.type_order is not None:
            return self.type_sort_order
        if co.ieee_754_total_order is not None and self.kind in _FLOAT_KINDS:
            return SortOrder.SIGNED
        if co.int96_timestamp_order is not None and self.kind == "int96":
            return SortOrder.SIGNED
        return SortOrder.UNKNOWN  # an order this reader does not know: statistics unusable

    # --- raw bytes -> values -------------------------------------------------------------------------

    def decode(self, raw: bytes) -> Any:
        """The typed value of PLAIN-encoded min/max bytes. Raises ValueError for bytes of the wrong size."""
        return self._decode(raw)

    def order_key(self, raw: bytes) -> Any:
        """A Python value ordering exactly like the column's sort order (see the module docstring)."""
        return self._key(raw)

    def value_key(self, value: Any) -> Any:
        """order_key of a logical value (e.g. a predicate literal): order_key(plain_bytes(value))."""
        return self._key(self.plain_bytes(value))

    def _make_codecs(self) -> tuple[Callable[[bytes], Any], Callable[[bytes], Any]]:
        pt, k = self.physical_type, self.kind
        width = {PhysicalType.INT32: 4, PhysicalType.INT64: 8, PhysicalType.INT96: 12}.get(pt)

        def ival(raw: bytes, signed: bool = True) -> int:
            if len(raw) != width:
                raise ValueError(f"expected {width} bytes for {pt.name}, got {len(raw)}")
            return int.from_bytes(raw, "little", signed=signed)

        if pt == PhysicalType.BOOLEAN:
            def key(raw: bytes) -> bool:
                if len(raw) != 1:
                    raise ValueError(f"expected 1 byte for BOOLEAN, got {len(raw)}")
                return bool(raw[0] & 1)
            return key, key
        if pt == PhysicalType.FLOAT or pt == PhysicalType.DOUBLE or k == "float16":
            fmt_, size = {PhysicalType.FLOAT: ("<f", 4), PhysicalType.DOUBLE: ("<d", 8)}.get(pt, ("<e", 2))

            def fl(raw: bytes) -> float:
                if len(raw) != size:
                    raise ValueError(f"expected {size} bytes for {self.logical_name}, got {len(raw)}")
                value: float = struct.unpack(fmt_, raw)[0]
                return value
            return fl, fl
        if k == "int96":
            def ns96(raw: bytes) -> int:
                ival(raw)  # size check
                nanos = int.from_bytes(raw[:8], "little", signed=True)
                days = int.from_bytes(raw[8:], "little", signed=True)
                return (days - _JULIAN_EPOCH_DAY) * _NS_PER_DAY + nanos
            return (lambda raw: _datetime_from_units(ns96(raw), "ns", False)), ns96
        if k == "decimal":
            scale = self.scale or 0
            if width:
                def unscaled(raw: bytes) -> int:
                    return ival(raw)
            else:
                def unscaled(raw: bytes) -> int:
                    if not raw:
                        raise ValueError("empty DECIMAL value")
                    return int.from_bytes(raw, "big", signed=True)
            return (lambda raw: Decimal(f"{unscaled(raw)}e{-scale}")), unscaled
        if width:  # INT32 / INT64 based
            signed = not (k == "int" and not self.signed)

            def num(raw: bytes) -> int:
                return ival(raw, signed)
            if k == "date":
                def date(raw: bytes) -> Any:
                    v = num(raw)
                    try:
                        return _EPOCH_DATE + dt.timedelta(days=v)
                    except OverflowError:
                        return v
                return date, num
            unit = self.unit
            if k == "time":
                assert unit is not None  # _classify gives kinds time and timestamp a unit
                return (lambda raw: _time_from_units(num(raw), unit)), num
            if k == "timestamp":
                assert unit is not None
                return (lambda raw: _datetime_from_units(num(raw), unit, self.utc)), num
            return num, num
        # BYTE_ARRAY / FIXED_LEN_BYTE_ARRAY
        flba = pt == PhysicalType.FIXED_LEN_BYTE_ARRAY
        n = self.type_length

        def raw_bytes(raw: bytes) -> bytes:
            if flba and n is not None and len(raw) != n and k != "string":
                raise ValueError(f"expected {n} bytes for FIXED_LEN_BYTE_ARRAY({n}), got {len(raw)}")
            return bytes(raw)
        if k == "string":
            def text(raw: bytes) -> str:
                try:
                    return raw.decode("utf-8")
                except UnicodeDecodeError:
                    return raw.decode("utf-8", "replace")
            return text, raw_bytes
        if k == "uuid":
            return (lambda raw: uuid.UUID(bytes=raw_bytes(raw))), raw_bytes
        return raw_bytes, raw_bytes

    # --- values -> JSON / PLAIN bytes ----------------------------------------------------------------

    def to_json(self, value: Any) -> Any:
        """JSON-able form: numbers, "NaN"/"Infinity"/"-Infinity", ISO 8601 strings, decimal strings, hex."""
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, float):
            if math.isnan(value):
                return "NaN"
            if math.isinf(value):
                return "Infinity" if value > 0 else "-Infinity"
            return value
        if isinstance(value, int):
            return value
        if isinstance(value, Decimal):
            return format(value, "f")
        if isinstance(value, (dt.date, dt.time)):  # datetime is a date
            return value.isoformat()
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value).hex()
        if isinstance(value, uuid.UUID):
            return str(value)
        return str(value)

    def _unfit(self, value: Any, why: str = "") -> UsageError:
        col = f"column {self.name!r}" if self.name else "column"
        return UsageError(f"value {value!r} does not fit {col} of type "
                          f"{self.logical_name}{': ' + why if why else ''}")

    def plain_bytes(self, value: Any) -> bytes:
        """The PLAIN encoding of a logical value, as the bloom filter hashes it (no length prefix)."""
        pt, k = self.physical_type, self.kind
        try:
            if k == "bool":
                if not isinstance(value, bool):
                    raise self._unfit(value)
                return b"\x01" if value else b"\x00"
            if k in _FLOAT_KINDS:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise self._unfit(value)
                return struct.pack({"float": "<f", "double": "<d"}.get(k, "<e"), value)
            if k == "decimal":
                return self._decimal_bytes(value)
            if k == "int96":
                if not isinstance(value, dt.datetime):
                    raise self._unfit(value)
                ns = _units_from_datetime(value, "ns")
                days, nanos = divmod(ns, _NS_PER_DAY)
                return (nanos.to_bytes(8, "little", signed=True)
                        + (days + _JULIAN_EPOCH_DAY).to_bytes(4, "little"))
            if pt in (PhysicalType.INT32, PhysicalType.INT64):
                return self._int_bytes(self._int_of(value), value)
            if k == "uuid":
                if isinstance(value, str):
                    value = uuid.UUID(value)
                if isinstance(value, uuid.UUID):
                    return value.bytes
            if isinstance(value, str) and k in ("string", "binary", "undefined"):
                data = value.encode("utf-8")
            elif isinstance(value, (bytes, bytearray, memoryview)):
                data = bytes(value)
            else:
                raise self._unfit(value)
            if pt == PhysicalType.FIXED_LEN_BYTE_ARRAY and self.type_length is not None \
                    and len(data) != self.type_length:
                raise self._unfit(value, f"expected {self.type_length} bytes")
            return data
        except (OverflowError, ValueError, struct.error) as e:
            raise self._unfit(value, str(e)) from None

    def _int_of(self, value: Any) -> int:
        k = self.kind
        if k == "date" and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return (value - _EPOCH_DATE).days
        if k == "time" and isinstance(value, dt.time):
            assert self.unit is not None  # _classify gives kinds time and timestamp a unit
            return _units_from_time(value, self.unit)
        if k == "timestamp" and isinstance(value, dt.datetime):
            assert self.unit is not None
            return _units_from_datetime(value, self.unit)
        if isinstance(value, int) and not isinstance(value, bool):
            return value  # raw units / plain integers
        raise self._unfit(value)

    def _int_bytes(self, v: int, value: Any) -> bytes:
        width = 4 if self.physical_type == PhysicalType.INT32 else 8
        bits = self.bits or width * 8
        if self.kind == "int" and not self.signed:
            if not 0 <= v < (1 << bits):
                raise self._unfit(value)
            return v.to_bytes(width, "little", signed=False)
        if self.kind == "int" and not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
            raise self._unfit(value)
        return v.to_bytes(width, "little", signed=True)

    def _decimal_bytes(self, value: Any) -> bytes:
        if isinstance(value, bool) or not isinstance(value, (Decimal, int, str)):
            raise self._unfit(value)
        f: Fraction = Fraction(Decimal(value)) * 10 ** (self.scale or 0)
        if f.denominator != 1:
            raise self._unfit(value, f"more than {self.scale} decimal places")
        u = f.numerator
        if self.precision and abs(u) >= 10**self.precision:
            raise self._unfit(value, f"more than {self.precision} digits")
        pt = self.physical_type
        if pt == PhysicalType.INT32:
            return u.to_bytes(4, "little", signed=True)
        if pt == PhysicalType.INT64:
            return u.to_bytes(8, "little", signed=True)
        if pt == PhysicalType.FIXED_LEN_BYTE_ARRAY:
            return u.to_bytes(self.type_length or 16, "big", signed=True)
        return u.to_bytes(max(1, (u.bit_length() + 8) // 8), "big", signed=True)  # minimal two's complement

    # --- description ---------------------------------------------------------------------------------

    @property
    def logical_annotation(self) -> str | None:
        """The logical type alone, e.g. "TIMESTAMP(us, UTC)", "STRING", "INT(8, unsigned)"; None for none."""
        k = self.kind
        if k == "undefined":
            return "(type with undefined order)"
        if k == "int" and self.logical_type is None and self.converted_type is None:
            return None
        return {
            "int": f"INT({self.bits}, {'signed' if self.signed else 'unsigned'})",
            "decimal": f"DECIMAL({self.precision}, {self.scale})",
            "date": "DATE", "time": f"TIME({self.unit})", "string": "STRING", "uuid": "UUID",
            "timestamp": f"TIMESTAMP({self.unit}{', UTC' if self.utc else ''})", "float16": "FLOAT16",
        }.get(k)

    @property
    def logical_name(self) -> str:
        """A short description, e.g. "INT64 TIMESTAMP(us, UTC)", "BYTE_ARRAY STRING",
        "INT32 INT(8, signed)"."""
        pt = self.physical_type.name
        if pt == "FIXED_LEN_BYTE_ARRAY":
            pt = f"FIXED_LEN_BYTE_ARRAY({self.type_length})"
        return f"{pt} {self.logical_annotation or ''}".strip()

    def __str__(self) -> str:
        return self.logical_name
