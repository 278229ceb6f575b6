"""docs/ceiling.md's worked examples, recomputed from core.mbu: a figure the docs state that the model
does not give fails here (so does a change of the model that the docs were not told about)."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from core import mbu
from core import roofline as roofs

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "ceiling.md").read_text()
H200_DATA = ROOT / "tests" / "data" / "h200"

LLAMA_70B_KV = 80 * 8 * 128 * 2 * 2  # 327,680 bytes a token
REFERENCE = mbu.StepModel(weight_gb=40.0, tensor_parallel=8, peak_gbps=900.0, kv_bytes_per_token=LLAMA_70B_KV)
REFERENCE_CONTEXT = 0.6 * 200 + 0.4 * 2500 + 300 / 2  # the report's mix: mean prompt 1,120 + half of 300 output
LLAMA3_8B_KV = 32 * 8 * 128 * 2 * 2
EIGHT_B = {"H100": 3350.0, "H200": 4800.0}


def _gb(value: float) -> str:
    return f"{value / 1e9:,.2f} GB"


def reference_figures() -> list[str]:
    steps = 145 / 32
    return [
        f"{REFERENCE.step_bound_per_s:,.0f} steps/s",
        f"{steps:.2f} steps/s",
        f"{1000 / steps:.1f} ms",
        f"{REFERENCE.weight_bytes_per_gpu / (REFERENCE.peak_gbps * mbu.GB) * 1000:.2f} ms",
        f"{REFERENCE.mbu(steps, 32, None):.2%}".replace("%", " %"),
        f"{REFERENCE_CONTEXT:,.0f} tokens",
        f"{LLAMA_70B_KV:,} bytes",
        _gb(32 * REFERENCE_CONTEXT * LLAMA_70B_KV / 8),
        _gb(REFERENCE.bytes_per_step(32, REFERENCE_CONTEXT)),
        f"{REFERENCE.mbu(steps, 32, REFERENCE_CONTEXT):.2%}".replace("%", " %"),
        f"{REFERENCE.roofline_tokens_per_s(32, REFERENCE_CONTEXT):,.0f} tok/s",
        f"{REFERENCE.single_request_tokens_per_s(REFERENCE_CONTEXT):,.1f} tok/s",
        f"{145 / REFERENCE.step_bound_per_s:.1%}".replace("%", " %"),
    ]


def eight_b_rows() -> list[str]:
    """The roofline table of example (b): concurrency, bytes per step, and per GPU step ms and tok/s."""
    h100, h200 = (mbu.StepModel(16.0, 1, bw, LLAMA3_8B_KV) for bw in EIGHT_B.values())
    rows = []
    for c in (1, 8, 32, 64):
        cells = [str(c), _gb(h100.bytes_per_step(c, 1000))]
        for model in (h100, h200):
            step_ms = model.bytes_per_step(c, 1000) / (model.peak_gbps * mbu.GB) * 1000
            tok_s = model.roofline_tokens_per_s(c, 1000)
            cells += [f"{step_ms:.2f} ms", f"{tok_s:,.0f}", f"{tok_s / model.step_bound_per_s:.1f}×"]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def eight_b_figures() -> list[str]:
    h100, h200 = (mbu.StepModel(16.0, 1, bw, LLAMA3_8B_KV) for bw in EIGHT_B.values())
    return [
        f"{LLAMA3_8B_KV:,} bytes",
        f"{h100.step_bound_per_s:,.1f} steps/s",
        f"{h200.step_bound_per_s:,.1f} steps/s",
        f"{h100.single_request_tokens_per_s(1000):,.1f} tok/s",
        f"{h200.single_request_tokens_per_s(1000):,.1f} tok/s",
    ]


def _h200_model(data: dict) -> mbu.StepModel:
    return mbu.StepModel(data["step_weight_bytes"] / mbu.GB, 1, data["peak_gbps"], data["kv_bytes_per_token"])


def h200_figures() -> list[str]:
    """Example (c): the recorded H200 decodes at batch 1 (eager, compiled) and their largest batches."""
    out = []
    for name, batch_max in (("decode_truth.json", 128), ("decode_truth_static.json", 64)):
        data = json.loads((H200_DATA / name).read_text())
        model = _h200_model(data)
        one = next(r for r in data["rows"] if r["batch"] == 1)
        steps = 1000 / one["step_ms"]
        context = one["ctx"] + one["new"] / 2
        top = next(r for r in data["rows"] if r["batch"] == batch_max)
        out += [
            f"{one['step_ms']:.2f} ms",
            f"{steps:.2f} steps/s",
            _gb(model.bytes_per_step(1, context)),
            f"{model.mbu(steps, 1, context):.1%}".replace("%", " %"),
            f"{one['gpm_dram_pct_median']:.1f} %",
            f"{model.step_bound_per_s:,.1f} steps/s",
            f"{top['tok_s']:,.0f} tok/s",
            f"{top['tok_s'] / model.step_bound_per_s:.1f}×",
        ]
    return out


def shape_figures() -> list[str]:
    """Example (a) with the model's shape: Llama-3-70B AWQ g128's bytes a step, both roofs with prefill at
    the report's mix (decode on CUDA cores; prefill on CUDA cores, else dequantised on tensor cores), and
    the step model fitted on the report's three levels."""
    from core import step_model as step
    from core.model_shape import resolve

    shape, _ = resolve("sweetspot/sim-70b-awq", 8, None, None)
    assert shape is not None
    model = mbu.StepModel(shape.step_weight_bytes / mbu.GB, 8, 900.0, shape.kv_bytes_per_token)
    v100 = roofs.match_gpu("Tesla V100-SXM2-32GB")
    assert v100 is not None
    decode, prefill = roofs.kernel_peaks(v100, "bf16_tensor", shape.quantization)
    ratio = (0.6 * 200 + 0.4 * 2500) / 300
    cuda = roofs.roofline(model, REFERENCE_CONTEXT, decode, shape.active_params, decode, ratio)
    both = roofs.roofline(model, REFERENCE_CONTEXT, decode, shape.active_params, prefill, ratio)
    assert cuda.compute_tok_s and both.compute_tok_s and cuda.crossover_batch and both.crossover_batch
    fitted = step.fit(both, [step.Level(8, 85.0), step.Level(16, 126.0), step.Level(32, 145.0)])
    assert fitted is not None
    parts = step.step_parts(both, fitted.best, 32)
    return [
        f"{shape.step_weight_bytes / 1e9:.2f} GB",
        f"{model.step_bound_per_s:,.1f} steps/s",
        f"{cuda.decode_compute_tok_s:,.0f} tok/s",
        f"{ratio:.2f}",
        f"{cuda.compute_tok_s:,.0f} tok/s",
        f"{cuda.crossover_batch:.1f}",
        f"{145 / cuda.compute_tok_s:.1%}".replace("%", " %"),
        f"{both.compute_tok_s:,.0f} tok/s",
        f"{both.crossover_batch:.1f}",
        f"{145 / both.compute_tok_s:.1%}".replace("%", " %"),
        f"{fitted.worst:.2%}".replace("%", " %"),
        f"about {parts['read_s'] * 1000:.0f} ms of reading, {parts['decode_compute_s'] * 1000:.0f} ms of decode arithmetic, "
        f"{parts['prefill_s'] * 1000:.0f} ms of prefill and {parts['overhead_s'] * 1000:.0f} ms of fixed cost",
    ]


def roofline_figures() -> list[str]:
    """Example (b)'s 8B model: its compute roof, and the H200 decode through the product's own MBU with
    each set of inputs."""
    h200 = roofs.roofline(mbu.StepModel(16.0, 1, 4800.0, LLAMA3_8B_KV), 1000.0, roofs.peak_compute(None, ("NVIDIA H200",)), 8e9)
    assert h200.compute_tok_s
    assert h200.crossover_batch is None  # "no crossover batch"
    data = json.loads((H200_DATA / "decode_mbu_bench.json").read_text())
    row = next(r for r in data["rows"] if r["mode"] == "compiled" and r["batch"] == 1)
    page = mbu.modelled_mbu(mbu.StepModel(16.0, 1, 4800.0, LLAMA3_8B_KV), row["steps_per_s"], 1, row["mean_context"])
    bench = mbu.modelled_mbu(mbu.StepModel(data["step_weight_bytes"] / mbu.GB, 1, data["peak_gbps"], LLAMA3_8B_KV),
                             row["steps_per_s"], 1, row["mean_context"])  # fmt: skip
    assert page is not None and bench is not None
    return [
        f"{h200.compute_tok_s:,.0f} tok/s",
        f"MBU **{page.value:.1%}**".replace("%", " %"),
        f"**{bench.value:.1%}**".replace("%", " %"),
        f"DRAM **{statistics.mean(row['gpm_samples']):.1f} %**",
        f"{data['step_weight_bytes'] / 1e9:.2f} GB read a step",
    ]


def bold_figures() -> set[str]:
    """Every bold number of the worked examples (``**4,321 tok/s**``, ``**3.36 %**``)."""
    examples = DOC[DOC.index("## Worked examples"):]
    return {m for m in re.findall(r"\*\*(.+?)\*\*", examples, re.DOTALL) if re.search(r"\d", m)}


def breach_message() -> str:
    """The truth check on the 8B bench's compiled batch-1 rate, for a target that copied weight_gb = 40."""
    data = json.loads((H200_DATA / "decode_mbu_bench.json").read_text())
    row = next(r for r in data["rows"] if r["mode"] == "compiled" and r["batch"] == 1)
    breach = mbu.check_step_bound(mbu.StepModel(40.0, 1, data["peak_gbps"]), row["steps_per_s"])
    assert breach is not None
    return breach.message()


ALL = (reference_figures() + eight_b_rows() + eight_b_figures() + h200_figures() + shape_figures() + roofline_figures()
       + [breach_message()])


@pytest.mark.parametrize("figure", ALL)
def test_the_worked_examples_say_what_core_mbu_computes(figure):
    assert figure in " ".join(DOC.split()), f"docs/ceiling.md lacks {figure!r}"


@pytest.mark.parametrize("bold", sorted(bold_figures()))
def test_every_bold_figure_of_the_examples_is_one_the_product_computes(bold):
    """The other way round: a figure the page states that no computation above gives is stale."""
    computed = " ".join(ALL)
    assert bold in computed or bold.removesuffix(" running") in computed, f"docs/ceiling.md states {bold!r}, computed by nothing"


def test_every_mbu_source_is_named_in_the_product_order():
    positions = [DOC.find(f"`{source}`") for source in mbu.MBU_SOURCES]
    assert -1 not in positions and positions == sorted(positions)


@pytest.mark.parametrize("doc", ["README.md", "docs/gpus.md"])
def test_the_ceiling_page_is_linked(doc):
    assert "ceiling.md" in (ROOT / doc).read_text()


if __name__ == "__main__":  # prints the figures to write into the page
    for figure in ALL:
        print(figure)
