"""The planner against two real GPUs: the step model fitted on the H100's levels predicts the H200's
output tok/s (docs/benchmarks.md "The plan on two real GPUs").

    python bench/bench_plan_gpus.py            # the table docs/benchmarks.md holds
    python bench/bench_plan_gpus.py --priors   # also rewrite core/efficiency_priors.json's measured rows

Reads tests/data/gpu/h100.json and h200.json (bench/gpu_levels.py: a Llama-3-8B-shaped bf16 model,
random weights, static KV cache, compiled decode; "levels": ``concurrency`` prompts of ``prompt``
tokens prefilled together, then ``output`` decode steps). Each GPU's roofs (core/roofline.py: the
weights a step reads and the KV cache at TP 1, NVML's peak bandwidth, the datasheet's bf16 peak for
decode and prefill, 2 × the active parameters a token, prefill at prompt ÷ output tokens a token) and
the step model's fit on its levels (core/step_model.py). The H200 is predicted with the H100's fit (the
same kernels: sm90), the range the fit's members give. No GPU needed.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import roofline as roofs
from core import step_model as step
from core.mbu import StepModel

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "gpu"
PRIORS = ROOT / "core" / "efficiency_priors.json"
CHECKED_AT = (8, 16, 32, 64)


def load(name: str, folder: Path = DATA) -> dict[str, Any]:
    return dict(json.loads((folder / f"{name}.json").read_text()))


def roof_of(doc: dict[str, Any], prompt: float | None = None, output: float | None = None) -> roofs.Roofline:
    """One GPU's roofline at a level's prompt and output lengths (context: the prompt plus half the output)."""
    model = StepModel(doc["step_weight_bytes"] / 1e9, 1, float(doc["peak_gbps"]), float(doc["kv_bytes_per_token"]))
    spec = roofs.match_gpu(doc["gpu"])
    assert spec is not None, f"{doc['gpu']} is not in core/gpu_specs.json"
    decode, prefill = roofs.kernel_peaks(spec, "bf16_tensor", None)
    context = None if prompt is None or output is None else prompt + output / 2
    ratio = None if prompt is None or not output else prompt / output
    return roofs.roofline(model, context, decode, float(doc["active_params"]), prefill, ratio)


def levels_of(doc: dict[str, Any]) -> list[step.Level]:
    """The served levels as the step model's levels: each with its own context and mix."""
    return [step.Level(float(lv["concurrency"]), float(lv["output_tok_s"]), lv["prompt"] + lv["output"] / 2,
                       lv["prompt"] / lv["output"]) for lv in doc["levels"]]  # fmt: skip


def fit_of(doc: dict[str, Any]) -> step.Fit:
    fitted = step.fit(roof_of(doc), levels_of(doc), f"{doc['gpu']}'s levels")
    assert fitted is not None
    return fitted


@dataclass(frozen=True)
class Row:
    concurrency: int
    measured: float
    predicted: step.Prediction

    @property
    def error(self) -> float:
        """Predicted ÷ measured − 1."""
        return self.predicted.tokens_per_s / self.measured - 1.0

    @property
    def within(self) -> bool:
        return self.predicted.low <= self.measured <= self.predicted.high

    @property
    def width(self) -> float:
        """The range's width as a share of the prediction (high − low) ÷ predicted."""
        return (self.predicted.high - self.predicted.low) / self.predicted.tokens_per_s


def predicted_rows(source: dict[str, Any], target: dict[str, Any], at: tuple[int, ...] = CHECKED_AT) -> list[Row]:
    """``target``'s levels at ``at`` predicted with ``source``'s fit on ``target``'s roofs."""
    fitted = fit_of(source)
    out = []
    for lv in target["levels"]:
        if lv["concurrency"] in at:
            roof = roof_of(target, lv["prompt"], lv["output"])
            out.append(Row(lv["concurrency"], float(lv["output_tok_s"]), fitted.predict(roof, lv["concurrency"])))
    return out


def fitted_rows(doc: dict[str, Any]) -> list[Row]:
    """``doc``'s own levels against its own fit: how well the step model reproduces them."""
    return predicted_rows(doc, doc, tuple(int(lv["concurrency"]) for lv in doc["levels"]))


def table(rows: list[Row]) -> str:
    lines = ["| running | measured tok/s | predicted tok/s | its range | error | within | range width |",
             "|---:|---:|---:|---|---:|---|---:|"]  # fmt: skip
    for r in rows:
        p = r.predicted
        lines.append(f"| {r.concurrency} | {r.measured:,.1f} | {p.tokens_per_s:,.1f} | {p.low:,.1f}–{p.high:,.1f} | "
                     f"{r.error * 100:+.1f} % | {'yes' if r.within else 'no'} | {r.width * 100:.1f} % |")  # fmt: skip
    return "\n".join(lines)


MAX_MEMBERS = 60  # the fit's parameter sets kept in the prior (evenly spread, the extremes included)


def prior_row(doc: dict[str, Any], transfer_error: float, name: str) -> dict[str, Any]:
    """A measured prior: the fit's best and spread, its parameter sets thinned (the overhead per
    layer), where it came from."""
    fitted = fit_of(doc)
    layers = int(doc["shape"]["layers"])
    spec = roofs.match_gpu(doc["gpu"])
    assert spec is not None
    triple = lambda field: [fitted.spread(field)[0], getattr(fitted.best, field), fitted.spread(field)[1]]  # noqa: E731
    ordered = sorted(fitted.members, key=lambda m: (m.bandwidth, m.compute))
    extremes = {min(ordered, key=lambda m: getattr(m, f) * sign) for f in ("bandwidth", "compute", "overhead_s") for sign in (1, -1)}
    every = max(1, len(ordered) // MAX_MEMBERS)
    kept = sorted(set(ordered[::every]) | extremes | {fitted.best}, key=lambda m: (m.bandwidth, m.compute))
    return {"arch": spec.arch, "label": f"measured on an {spec.name} (tests/data/gpu/{name}.json)",
            "bandwidth": [round(x, 4) for x in triple("bandwidth")], "compute": [round(x, 4) for x in triple("compute")],
            "overhead_s_per_layer": [round(x / layers, 7) for x in triple("overhead_s")],
            "members": [[round(m.bandwidth, 4), round(m.compute, 4), round(m.overhead_s / layers, 7)] for m in kept],
            "transfer_error": round(transfer_error, 4),
            "source": f"measured: tests/data/gpu/{name}.json ({doc['gpu']}, Llama-3-8B's shape in bf16, CUDA-graph "
                      f"decode; the step model fitted on its {len(doc['levels'])} levels, RMS {fitted.error * 100:.1f} %)"}  # fmt: skip


def main(argv: list[str]) -> int:
    h100 = load("h100")
    print(f"H100 fit: {fit_of(h100).words()} (RMS {fit_of(h100).error * 100:.1f} %)\n")
    print(table(fitted_rows(h100)) + "\n")
    worst = 0.0
    if (DATA / "h200.json").exists():
        h200 = load("h200")
        forward, backward = predicted_rows(h100, h200), predicted_rows(h200, h100)
        print(f"H200 fit: {fit_of(h200).words()} (RMS {fit_of(h200).error * 100:.1f} %)\n")
        print("The H200 predicted from the H100's fit:\n")
        print(table(forward))
        worst = max(abs(r.error) for r in forward + backward)
        print(f"\nworst error either way (H100→H200, H200→H100): {worst * 100:.1f} %")
    else:
        print("no tests/data/gpu/h200.json: no transfer measured")
    if "--priors" in argv:
        doc = json.loads(PRIORS.read_text())
        doc["families"] = [prior_row(h100, worst, "h100")]
        PRIORS.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {PRIORS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
