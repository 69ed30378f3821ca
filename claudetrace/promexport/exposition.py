"""Metric families computed on scrape, exposed through ``prometheus_client``.

Nothing here knows claudetrace's metrics: :class:`MetricSpec` describes a family,
:class:`Family` collects its samples, and :class:`FamiliesCollector` hands them to
``prometheus_client`` (a custom collector), which writes the Prometheus text
format or OpenMetrics.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from ..model import summary

MetricKind = Literal["counter", "gauge", "histogram"]

#: Content type of the text exposition format, version 0.0.4.
CONTENT_TYPE: Final = CONTENT_TYPE_PLAIN_0_0_4

#: Histogram bucket upper bounds in seconds (the session summary's, which ended
#: recordings store their durations counted in).
BUCKETS: Final = summary.BUCKETS


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
    """A Prometheus histogram over :data:`BUCKETS` (counts per bucket, not cumulative),
    its sum kept in whole nanoseconds (the same in any order of adding)."""

    __slots__ = ("count", "counts", "sum_ns")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.sum_ns = 0
        self.count = 0

    @property
    def sum(self) -> float:
        """The sum of the observations, in seconds."""
        return self.sum_ns / 1e9

    def observe(self, seconds: float) -> None:
        """Count one observation of ``seconds``."""
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.sum_ns += round(seconds * 1e9)
        self.count += 1

    def add(self, buckets: Sequence[int], sum_ns: int) -> None:
        """Add observations already counted by bucket (``[index, count, index,
        count…]``, ``len(BUCKETS)`` the index of ``+Inf``) summing to ``sum_ns``."""
        mine = self.counts
        for at in range(0, len(buckets), 2):
            n = buckets[at + 1]
            mine[buckets[at]] += n
            self.count += n
        self.sum_ns += sum_ns

    def merge(self, other: Histogram) -> None:
        """Add ``other``'s observations to this histogram."""
        for i, n in enumerate(other.counts):
            self.counts[i] += n
        self.sum_ns += other.sum_ns
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
    """A bucket bound as Prometheus writes it (``0.005``, ``1.0``, ``+Inf``)."""
    return str(floatToGoString(value))  # type: ignore[no-untyped-call]


def metric_family(family: Family) -> Metric:
    """``family`` as a ``prometheus_client`` metric family, for a collector to yield."""
    spec = family.spec
    metric: Metric
    if spec.kind == "counter":
        metric = CounterMetricFamily(spec.name, spec.help, labels=spec.labels)
    elif spec.kind == "gauge":
        metric = GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
    else:
        metric = HistogramMetricFamily(spec.name, spec.help, labels=spec.labels)
    for name, labels, value in family.samples:
        # The client names samples itself (``_total``, ``_bucket``…): ours are kept as
        # they are, each under the family's type.
        metric.add_sample(name, dict(labels), value)
    return metric


class FamiliesCollector(Collector):
    """A ``prometheus_client`` collector of the families ``source`` computes at each
    scrape (:meth:`~.store.StoreMetrics.collect`)."""

    def __init__(self, source: Callable[[], Iterable[Family]]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        for family in self._source():
            yield metric_family(family)


def registry(source: Callable[[], Iterable[Family]]) -> CollectorRegistry:
    """A registry holding only a :class:`FamiliesCollector` of ``source`` (not the
    client's default one, with its process and platform metrics)."""
    found = CollectorRegistry(auto_describe=False)
    found.register(FamiliesCollector(source))
    return found


def render(families: Iterable[Family], *, openmetrics: bool = False) -> str:
    """The text exposition (version 0.0.4, or OpenMetrics 1.0) of ``families``."""
    listed = list(families)
    generate = openmetrics_latest if openmetrics else generate_latest
    return generate(registry(lambda: listed)).decode("utf-8")
