"""The step model against a real GPU's decodes: fitted on batches 1 and 8, predict the larger batches
(docs/benchmarks.md, "Capacity what-if").

    python bench/bench_plan_h200.py

Reads the H200 decodes of tests/data/h200 (eager with a dynamic KV cache, a 40-layer model of 69 GB and
Llama-3-8B's shape; a static cache with a compiled forward, a 20-layer model of 35 GB and Llama-3-8B's
shape): each series' roofline (core/roofline.py: the weights a step reads and the KV cache at TP 1,
NVML's peak bandwidth, the H200's bf16 datasheet peak over 2 × the parameters a token passes through,
bf16 so bytes ÷ 2; decode only: these rows time no prefill), the step model's fit on its batch-1 and
batch-8 rows (core/step_model.py ``fit``), and the prediction with its range at every batch against
what the GPU measured. Prints the markdown table the docs hold; no GPU needed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from core import roofline as roofs
from core import step_model as step
from core.mbu import StepModel

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "h200"
# (file, mode within the file or None, the series' name in the table)
SERIES = (
    ("decode_truth.json", None, "eager, 40 layers (69 GB)"),
    ("decode_mbu_bench.json", "eager", "eager, Llama-3-8B (15 GB)"),
    ("decode_truth_static.json", None, "static + compiled, 20 layers (35 GB)"),
    ("decode_mbu_bench.json", "compiled", "static + compiled, Llama-3-8B (15 GB)"),
)


CALIBRATED_ON = (1, 8, 32)


@dataclass(frozen=True)
class Row:
    series: str
    batch: int
    context: float
    measured_tok_s: float
    predicted: step.Prediction
    roofline_tok_s: float

    @property
    def predicted_tok_s(self) -> float:
        return self.predicted.tokens_per_s

    @property
    def error(self) -> float:
        """Predicted ÷ measured − 1."""
        return self.predicted_tok_s / self.measured_tok_s - 1.0

    @property
    def within(self) -> bool:
        return self.predicted.low <= self.measured_tok_s <= self.predicted.high


def _roofline(doc: dict, context: float) -> roofs.Roofline:
    model = StepModel(doc["step_weight_bytes"] / 1e9, 1, doc["peak_gbps"], doc["kv_bytes_per_token"])
    peak = roofs.peak_compute(None, (doc["gpu"],))
    return roofs.roofline(model, context, peak, doc["step_weight_bytes"] / 2.0)


def series_rows(doc: dict, mode: str | None, name: str) -> tuple[step.Fit, list[Row]]:
    """One series fitted on its batch-1 and batch-8 rows (at the first context), and every row predicted."""
    rows = [r for r in doc["rows"] if mode is None or r.get("mode") == mode]
    if mode is None:  # the 32 × 2048 row changes the context too: it is predicted, not fitted on
        rows = [r for r in rows if r["ctx"] == 512] + [r for r in rows if r["ctx"] != 512]

    def context(r: dict) -> float:
        return float(r.get("mean_context") or r["ctx"] + r["new"] / 2)

    first = context(rows[0])
    on = [step.Level(float(r["batch"]), r["tok_s"], context(r)) for r in rows
          if r["batch"] in CALIBRATED_ON and context(r) == first]  # fmt: skip
    fitted = step.fit(_roofline(doc, first), on, f"{name}, batches 1 and 8")
    assert fitted is not None
    out = []
    for r in rows:
        at = _roofline(doc, context(r))
        out.append(Row(name, r["batch"], context(r), r["tok_s"], fitted.predict(at, r["batch"]), at.attainable_tok_s(r["batch"])))
    return fitted, out


def rows() -> list[Row]:
    out: list[Row] = []
    for file, mode, name in SERIES:
        out += series_rows(json.loads((DATA / file).read_text()), mode, name)[1]
    return out


def table(found: list[Row]) -> str:
    lines = ["| series | batch | context | roofline tok/s | predicted tok/s | its range | measured tok/s | error | within |",
             "|---|---:|---:|---:|---:|---|---:|---:|---|"]  # fmt: skip
    for r in found:
        p = r.predicted
        lines.append(f"| {r.series} | {r.batch} | {r.context:.0f} | {r.roofline_tok_s:,.0f} | {r.predicted_tok_s:,.1f} | "
                     f"{p.low:,.1f}–{p.high:,.1f} | {r.measured_tok_s:,.1f} | {r.error * 100:+.0f} % | "
                     f"{'yes' if r.within else 'no'} |")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(rows()))
