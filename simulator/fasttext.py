"""A fast path for repeated expositions of one fixed layout: prometheus_client's text, values filled in.

``generate_latest`` costs ~11 ms per vLLM payload on the shared test machine; the history generator
needs ~1 ms. A :class:`Template` is built once from the reference families (prometheus_client), keeps
every line's fixed part exactly as generate_latest writes it, and renders new values with
prometheus_client's own float formatting. tests/test_sim_history.py checks the output is identical.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from simulator.expo import _Families


def _header(name: str, doc: str, kind: str) -> str:
    return f"# HELP {name} {doc.replace(chr(92), chr(92) * 2).replace(chr(10), chr(92) + 'n')}\n# TYPE {name} {kind}\n"


def _sample_prefix(metric_name: str, labels: dict[str, str]) -> str:
    """The ``name{labels} `` part of a sample line, as generate_latest writes it (labels sorted)."""
    if not labels:
        return metric_name + " "
    escaped = ",".join(
        '{}="{}"'.format(k, v.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\""))
        for k, v in sorted(labels.items())
    )
    return f"{metric_name}{{{escaped}}} "


class Template:
    """The layout of ``families``; ``render(values)`` takes values in the families' sample order."""

    def __init__(self, families: Sequence[Metric]) -> None:
        self.items: list[tuple[str, int]] = []  # (text, slot); slot -1: text only
        slot = 0
        for metric in families:
            name, kind = metric.name, metric.type
            if kind == "counter":
                name += "_total"
            self.items.append((_header(name, metric.documentation, kind), -1))
            created: list[tuple[str, int]] = []
            for sample in metric.samples:
                target = created if sample.name == metric.name + "_created" else self.items
                target.append((_sample_prefix(sample.name, sample.labels), slot))
                slot += 1
            if created:
                self.items.append((_header(metric.name + "_created", metric.documentation, "gauge"), -1))
                self.items.extend(created)
        self.slots = slot
        self._formatted: dict[float, str] = {}
        self.reference = generate_latest(_Families(families)).decode("utf-8")

    def render(self, values: Sequence[float]) -> str:
        if len(values) != self.slots:
            raise ValueError(f"layout changed: {len(values)} values for {self.slots} slots")
        # Most values repeat from one sample to the next (quiet buckets, timestamps, config): formatting
        # each distinct value once is most of the speed-up. (-0.0 would share 0.0's entry; no figure
        # here is ever negative.)
        cache = self._formatted
        if len(cache) > 20_000:
            cache.clear()
        out = []
        for text, slot in self.items:
            if slot < 0:
                out.append(text)
                continue
            value = values[slot]
            formatted = cache.get(value)
            if formatted is None:
                formatted = cache[value] = floatToGoString(value)
            out.append(f"{text}{formatted}\n")
        return "".join(out)
