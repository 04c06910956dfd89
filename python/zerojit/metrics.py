"""The process's counters in Prometheus form (docs/METRICS.md lists every metric).

``metrics_text()`` is the text exposition format, for an endpoint that serves it as is or a
file a node exporter's textfile collector reads. ``PrometheusCollector`` hands the same values
to ``prometheus_client`` (``prometheus_client.REGISTRY.register(zerojit.PrometheusCollector())``),
which is imported only when the collector collects, so zerojit does not need it.
"""

from zerojit import _core

__all__ = ["metrics_text", "PrometheusCollector"]


def metrics_text():
    """Every kernel's monitor counters, the monitor's state and the disk and remote cache
    counters, in the Prometheus text exposition format (version 0.0.4)."""
    return _core.metrics_text()


class PrometheusCollector:
    """A ``prometheus_client`` collector of zerojit's metrics: each scrape reads the live
    counters. The families are built from the values the text is rendered from, not by
    parsing it."""

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        for name, kind, documentation, samples in _core.metric_families():
            label_names = [label for label, _ in samples[0][0]] if samples else []
            if kind == "counter":
                # prometheus_client adds the _total suffix back to the samples it exposes.
                family = CounterMetricFamily(
                    name.removesuffix("_total"), documentation, labels=label_names
                )
            else:
                family = GaugeMetricFamily(name, documentation, labels=label_names)
            for labels, value in samples:
                family.add_metric([value_ for _, value_ in labels], value)
            yield family

    def describe(self):
        # Nothing up front: the registry then calls collect() when a scrape asks, never at
        # registration, and the set of kernels may grow as the process defines them.
        return []
