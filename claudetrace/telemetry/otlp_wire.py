"""OTLP requests encoded straight from span records and metric aggregates (pure; no
OpenTelemetry import).

The SDK path (``SpanRecord`` → ``ReadableSpan`` → protobuf objects → bytes) costs
about 80 µs per span, which made live export cost more CPU than the proxy
itself.  :class:`TraceRequestEncoder` writes the protobuf wire format of an
``ExportTraceServiceRequest`` directly and caches the encoding of attribute
key/value pairs that repeat (operation names, models, subtypes), so a span costs
a few microseconds.  :class:`MetricsRequestEncoder` does the same for the
aggregates of :class:`~.metrics.MetricAggregator`.  The results are field for
field what the SDK's ``encode_spans`` and ``encode_metrics`` produce for the same
spans and measurements (``tests/test_telemetry_otlp_wire.py`` parses both and
compares them).

Field numbers are those of ``opentelemetry/proto/trace/v1/trace.proto``,
``metrics/v1/metrics.proto`` and ``common/v1/common.proto``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from .metrics import Instrument, Point
from .records import SpanRecord

_KIND: Final = {"internal": b"\x30\x01", "client": b"\x30\x03"}  # Span.kind (6), varint
_STATUS_CODE: Final = {"unset": 0, "ok": 1, "error": 2}
#: Span.flags (16, fixed32): SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK, as the SDK sets
#: for a span whose parent (if any) is local.
_FLAGS: Final = b"\x85\x01" + struct.pack("<I", 0x100)
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
#: How many attribute pairs' encodings are remembered (then forgotten, all at once).
_CACHE_LIMIT: Final = 4096
#: How many values of one key are remembered: ids, which never repeat, stop early.
_VALUES_PER_KEY: Final = 256
#: The values whose pairs are remembered.  Not floats: ``0.0 == -0.0`` would
#: share an entry, and a float attribute (a duration, a cost) seldom repeats.
_CACHED: Final = frozenset({str, int, bool})
_pack_fixed64 = struct.Struct("<Q").pack
_pack_double = struct.Struct("<d").pack
_pack_sfixed64 = struct.Struct("<q").pack
#: ``AggregationTemporality`` of a metrics request.
_TEMPORALITY: Final = {"delta": 1, "cumulative": 2}


#: The one-byte varints (most lengths here).
_SMALL: Final = tuple(bytes((n,)) for n in range(0x80))


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _len_field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag byte(s), the length, the payload."""
    return tag + _varint(len(payload)) + payload


def any_value(value: Any) -> bytes:
    """The ``AnyValue`` message of an attribute value (the SDK's ``_encode_value``).

    Raises ``ValueError`` for what the SDK cannot encode either (the caller drops
    that attribute, as the SDK does).
    """
    if value is None:
        return b""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        return _len_field(b"\x0a", value.encode("utf-8"))
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise ValueError(f"integer {value} does not fit int64")
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)
    if isinstance(value, float):
        return b"\x21" + _pack_double(value)
    if isinstance(value, bytes):
        return _len_field(b"\x3a", value)
    if isinstance(value, Sequence):
        return _len_field(b"\x2a", b"".join(_len_field(b"\x0a", any_value(v)) for v in value))
    if isinstance(value, Mapping):
        pairs = b"".join(_len_field(b"\x0a", key_value(str(k), v)) for k, v in value.items())
        return _len_field(b"\x32", pairs)
    raise ValueError(f"invalid attribute type {type(value).__name__}")


def key_value(key: str, value: Any) -> bytes:
    """The ``KeyValue`` message of one attribute."""
    return _len_field(b"\x0a", key.encode("utf-8")) + _len_field(b"\x12", any_value(value))


class _RequestEncoder:
    """What trace and metric requests share: one resource, one scope, and the
    encodings of attribute pairs seen before.  Not thread-safe: one encoder per
    exporting thread.
    """

    def __init__(
        self,
        resource: Mapping[str, Any],
        resource_schema_url: str,
        scope_name: str,
        scope_version: str | None,
        scope_schema_url: str,
    ) -> None:
        self._pairs: dict[tuple[str, Any], tuple[type, bytes]] = {}
        self._per_key: dict[str, int] = {}
        self._resource = _len_field(b"\x0a", self._attributes(b"\x0a", resource))
        scope = _str_field(b"\x0a", scope_name) + _str_field(b"\x12", scope_version or "")
        self._scope = _len_field(b"\x0a", scope)
        self._scope_schema = _str_field(b"\x1a", scope_schema_url)
        self._resource_schema = _str_field(b"\x1a", resource_schema_url)

    def _request(self, items: list[bytes]) -> bytes:
        """``Export*ServiceRequest`` { Resource* { resource, Scope* { scope, items } } }.

        Spans and metrics requests nest alike: field 1 of the request, then the
        resource (1), the scope list (2) and schema URL (3), then the scope (1),
        its items (2) and schema URL (3).  ``items`` are the encoded items' parts
        (a list: it is gone through twice), joined once, here.
        """
        scoped = len(self._scope) + sum(map(len, items)) + len(self._scope_schema)
        scoped_head = b"\x12" + _varint(scoped)
        resource = len(self._resource) + len(scoped_head) + scoped + len(self._resource_schema)
        return b"".join((b"\x0a", _varint(resource), self._resource, scoped_head, self._scope,
                         *items, self._scope_schema, self._resource_schema))

    def _attributes(self, tag: bytes, attributes: Mapping[str, Any]) -> bytes:
        """Every attribute as a repeated ``KeyValue`` field with ``tag``.

        The dict's own ``(key, value)`` items are the cache's keys, and each entry
        keeps the value's type (``True == 1 == 1.0`` encode differently).  A key
        caches at most :data:`_VALUES_PER_KEY` values, so the keys whose values
        never repeat (request ids, line numbers) stop filling the cache early
        instead of emptying it for the pairs that do repeat.
        """
        pairs = self._pairs
        out: list[bytes] = []
        for item in attributes.items():
            kind = type(item[1])
            cacheable = kind in _CACHED
            cached = pairs.get(item) if cacheable else None
            if cached is not None and cached[0] is kind:
                out += (tag, cached[1])
                continue
            key, value = item
            try:
                message = key_value(key, value)
            except (ValueError, TypeError):
                continue  # the SDK logs and drops what it cannot encode
            encoded = _varint(len(message)) + message
            out += (tag, encoded)
            if cached is None and cacheable:
                seen = self._per_key.get(key, 0)
                if seen < _VALUES_PER_KEY and (seen or len(self._per_key) < _CACHE_LIMIT):
                    if len(pairs) >= _CACHE_LIMIT:
                        pairs.clear()  # the keys' counts stay: ids stay out
                    self._per_key[key] = seen + 1
                    pairs[item] = (kind, encoded)
        return b"".join(out)


class TraceRequestEncoder(_RequestEncoder):
    """Encodes batches of span records as OTLP ``ExportTraceServiceRequest`` bytes."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._trace_ids: dict[int, bytes] = {}
        self._names: dict[tuple[bytes, str], bytes] = {}

    def encode(self, records: Iterable[SpanRecord]) -> bytes:
        """One request holding ``records`` (one resource, one scope)."""
        out: list[bytes] = []
        for record in records:
            span = self.span(record)
            out += (b"\x12", _varint(len(span)), span)
        return self._request(out)

    def span(self, record: SpanRecord) -> bytes:
        """The ``Span`` message of one record (what ``to_readable_span`` would export)."""
        trace = self._trace_ids.get(record.trace_id)
        if trace is None:
            trace = b"\x0a\x10" + record.trace_id.to_bytes(16, "big")
            self._trace_ids[record.trace_id] = trace
        parts = [trace, b"\x12\x08", record.span_id.to_bytes(8, "big")]
        if record.parent_id is not None:
            parts += (b"\x22\x08", record.parent_id.to_bytes(8, "big"))
        parts += (self._name(b"\x2a", record.name), _KIND[record.kind])
        end = record.end_ns if record.end_ns is not None else record.start_ns
        if record.start_ns:
            parts += (b"\x39", _pack_fixed64(record.start_ns))
        if end:
            parts += (b"\x41", _pack_fixed64(end))
        parts.append(self._attributes(b"\x4a", record.attributes))
        for event in record.events:
            body = b"".join((b"\x09" + _pack_fixed64(event.time_ns) if event.time_ns else b"",
                             self._name(b"\x12", event.name),
                             self._attributes(b"\x1a", event.attributes)))
            parts += (b"\x5a", _varint(len(body)), body)
        code = _STATUS_CODE[record.status]
        status = b""
        if code == 2 and record.status_message:
            status = _str_field(b"\x12", record.status_message)
        if code:
            status += b"\x18" + _SMALL[code]
        parts += (b"\x7a", _varint(len(status)), status, _FLAGS)
        return b"".join(parts)

    def _name(self, tag: bytes, name: str) -> bytes:
        """A span's or an event's name field (names repeat: their encodings are kept)."""
        field = self._names.get((tag, name))
        if field is None:
            field = _str_field(tag, name)
            if len(self._names) < _CACHE_LIMIT:
                self._names[(tag, name)] = field
        return field


class MetricsRequestEncoder(_RequestEncoder):
    """Encodes :meth:`~.metrics.MetricAggregator.collect` results as OTLP
    ``ExportMetricsServiceRequest`` bytes (field for field what the SDK's
    ``encode_metrics`` writes for the same aggregates).
    """

    def encode(self, now_ns: int, metrics: Iterable[tuple[Instrument, Sequence[Point]]],
               temporality: str) -> bytes:
        """One request with every instrument's series, taken at ``now_ns``."""
        code = _TEMPORALITY[temporality]
        now = b"\x19" + _pack_fixed64(now_ns)
        out = []
        for inst, points in metrics:
            header = (_str_field(b"\x0a", inst.name) + _str_field(b"\x12", inst.description)
                      + _str_field(b"\x1a", inst.unit))
            if inst.buckets is None:
                body = b"".join(_len_field(b"\x0a", self._number(p, now)) for p in points)
                data = _len_field(b"\x3a", body + b"\x10" + bytes((code,)) + b"\x18\x01")
            else:
                bounds = _len_field(b"\x3a", b"".join(map(_pack_double, inst.buckets)))
                body = b"".join(_len_field(b"\x0a", self._histogram(p, now, bounds))
                                for p in points)
                data = _len_field(b"\x4a", body + b"\x10" + bytes((code,)))
            out.append(_len_field(b"\x12", header + data))
        return self._request(out)

    def _number(self, point: Point, now: bytes) -> bytes:
        """A ``NumberDataPoint``: an int sum as ``as_int``, any other as ``as_double``."""
        value = point.value
        if type(value) is int and _INT64_MIN <= value <= _INT64_MAX:
            number = b"\x31" + _pack_sfixed64(value)
        else:
            number = b"\x21" + _pack_double(float(value))
        return (self._start(point) + now + number
                + self._attributes(b"\x3a", point.attributes))

    def _histogram(self, point: Point, now: bytes, bounds: bytes) -> bytes:
        """A ``HistogramDataPoint`` with count, sum, buckets, bounds, min and max."""
        counts = b"".join(map(_pack_fixed64, point.buckets or ()))
        return (self._start(point) + now + b"\x21" + _pack_fixed64(point.count)
                + b"\x29" + _pack_double(point.total) + _len_field(b"\x32", counts) + bounds
                + self._attributes(b"\x4a", point.attributes)
                + b"\x59" + _pack_double(point.minimum) + b"\x61" + _pack_double(point.maximum))

    @staticmethod
    def _start(point: Point) -> bytes:
        return b"\x11" + _pack_fixed64(point.start_ns) if point.start_ns else b""


def _str_field(tag: bytes, text: str) -> bytes:
    """A proto3 string field (left out when empty, as protobuf does)."""
    return _len_field(tag, text.encode("utf-8")) if text else b""
