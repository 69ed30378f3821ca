"""The Prometheus text exposition format (version 0.0.4): families, histograms, rendering.

Nothing here knows claudetrace's metrics: :class:`MetricSpec` describes a family,
:class:`Family` collects its samples and :func:`render` writes the text a
Prometheus server scrapes.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

MetricKind = Literal["counter", "gauge", "histogram"]

#: Content type of the text exposition format, version 0.0.4.
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

#: Histogram bucket upper bounds in seconds (tool runs and permission waits can
#: take minutes: a person answers those).
BUCKETS: Final[tuple[float, ...]] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip


@dataclass(frozen=True)
class MetricSpec:
    """One metric family: its name, type, help text and label names."""

    name: str
    kind: MetricKind
    help: str
    labels: tuple[str, ...] = ()

    @property
    def sample_names(self) -> tuple[str, ...]:
        """The names its samples carry (``_bucket``/``_sum``/``_count`` for histograms)."""
        if self.kind == "histogram":
            return (f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count")
        return (self.name,)


class Histogram:
    """A Prometheus histogram over :data:`BUCKETS` (counts per bucket, not cumulative)."""

    __slots__ = ("count", "counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        """Count one observation of ``seconds``."""
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.sum += seconds
        self.count += 1

    def merge(self, other: Histogram) -> None:
        """Add ``other``'s observations to this histogram."""
        for i, n in enumerate(other.counts):
            self.counts[i] += n
        self.sum += other.sum
        self.count += other.count

    def cumulative(self) -> Iterator[tuple[str, int]]:
        """``(le, cumulative count)`` pairs, ending with ``+Inf``."""
        total = 0
        for bound, n in zip((*BUCKETS, float("inf")), self.counts, strict=True):
            total += n
            yield _number(bound), total


Labels = tuple[str, ...]

Sample = tuple[str, Mapping[str, str], float]


@dataclass
class Family:
    """A metric family with its samples, ready to render."""

    spec: MetricSpec
    samples: list[Sample] = field(default_factory=list)

    def add(self, labels: Labels, value: float) -> None:
        self.samples.append(
            (self.spec.name, dict(zip(self.spec.labels, labels, strict=True)), value)
        )

    def add_histogram(self, labels: Labels, hist: Histogram) -> None:
        base = dict(zip(self.spec.labels, labels, strict=True))
        name = self.spec.name
        for le, total in hist.cumulative():
            self.samples.append((f"{name}_bucket", {**base, "le": le}, total))
        self.samples.append((f"{name}_sum", base, hist.sum))
        self.samples.append((f"{name}_count", base, hist.count))


def _number(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(families: Iterable[Family]) -> str:
    """The text exposition format (version 0.0.4) of ``families``."""
    lines: list[str] = []
    for fam in families:
        help_text = fam.spec.help.replace("\\", "\\\\").replace("\n", "\\n")
        lines.append(f"# HELP {fam.spec.name} {help_text}")
        lines.append(f"# TYPE {fam.spec.name} {fam.spec.kind}")
        for name, labels, value in fam.samples:
            if labels:
                inner = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())
                lines.append(f"{name}{{{inner}}} {_number(value)}")
            else:
                lines.append(f"{name} {_number(value)}")
    return "\n".join(lines) + "\n"
