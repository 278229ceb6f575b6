"""The step model with both phases (core/step_model.py), the compute roof with prefill and the kernels'
peaks (core/roofline.py), and the demo's model shape (core/model_shapes.json): DOMAIN.md §1's figures
recomputed, the fit recovering efficiencies it was given, and the reference's three levels reproduced."""

from __future__ import annotations

import math

import pytest

from core import roofline as roofs
from core import step_model as step
from core.mbu import GB, StepModel
from core.model_shape import resolve

V100 = roofs.match_gpu("Tesla V100-SXM2-32GB")
H100 = roofs.match_gpu("NVIDIA H100 80GB HBM3")
# Llama-3-70B AWQ g128 (core/model_shapes.json): what a step reads, a token's KV, the active parameters
WEIGHTS_GB, KV, ACTIVE = 37.666439168, 327_680.0, 70.553706496e9


def reference(ratio: float | None = 3.6, context: float = 1270.0, prefill_on_tensor: bool = True) -> roofs.Roofline:
    assert V100 is not None
    decode, prefill = roofs.kernel_peaks(V100, "bf16_tensor", "awq")
    return roofs.roofline(StepModel(WEIGHTS_GB, 8, 900.0, KV), context, decode, ACTIVE,
                          prefill if prefill_on_tensor else None, ratio)  # fmt: skip


def test_the_demo_knows_its_model_from_the_served_name():
    shape, problems = resolve("sweetspot/sim-70b-awq", 8, None, None)
    assert problems == [] and shape is not None
    assert shape.step_weight_bytes / GB == pytest.approx(37.67, abs=0.005)  # no "40 GB" typed
    assert (shape.kv_bytes_per_token, shape.quantization, shape.layers) == (327_680.0, "awq", 80)
    assert shape.active_params == pytest.approx(ACTIVE)
    # a real AWQ checkpoint's name finds the same row; the bf16 model does not
    assert resolve("casperhansen/llama-3-70b-instruct-awq", 8, None, None)[0].quantization == "awq"
    assert resolve("meta-llama/Meta-Llama-3-70B-Instruct", 8, None, None)[0].quantization is None


def test_awq_on_sm70_decodes_on_cuda_cores_and_prefills_on_tensor_cores():
    assert V100 is not None and H100 is not None and (V100.arch, H100.arch) == ("sm70", "sm90")
    decode, prefill = roofs.kernel_peaks(V100, "bf16_tensor", "awq")
    assert (decode.tflops, prefill.tflops) == (31.4, 125.0)
    assert "CUDA cores" in decode.source and "tensor cores" in prefill.source
    # fp16 weights on a V100 use its tensor cores; AWQ on an H100 has a tensor-core path (Marlin)
    assert [p.tflops for p in roofs.kernel_peaks(V100, "bf16_tensor", None)] == [125.0, 125.0]
    assert [p.tflops for p in roofs.kernel_peaks(H100, "bf16_tensor", "awq")] == [989.4, 989.4]
    # a configured peak is both phases'
    assert roofs.target_peaks(31.4, ("Tesla V100-SXM2-32GB",), "bf16_tensor", "awq") == (roofs.PeakCompute(31.4, "config"),) * 2


def test_the_compute_roof_counts_prefill_at_the_mix():
    # DOMAIN.md §1: 31.4 TFLOP/s × 8 ÷ (2 × 70 B × (1 + 3.6)) ≈ 390 tok/s on CUDA cores, not 1,794
    cuda = reference(prefill_on_tensor=False)
    assert cuda.decode_compute_tok_s == pytest.approx(31.4e12 * 8 / (2 * ACTIVE))
    assert cuda.compute_tok_s == pytest.approx(31.4e12 * 8 / (2 * ACTIVE * 4.6))
    assert cuda.compute_tok_s == pytest.approx(387.0, abs=0.5)
    assert 145 / cuda.compute_tok_s == pytest.approx(0.375, abs=0.002)  # the reference at 32: ~37 %, not 8.1 %
    # prefill dequantised onto the tensor cores: 1 ÷ (1 ÷ 1,780 + 3.6 ÷ 7,087)
    both = reference()
    assert both.compute_tok_s == pytest.approx(1 / (1 / (31.4e12 * 8 / (2 * ACTIVE)) + 3.6 / (125e12 * 8 / (2 * ACTIVE))))
    assert reference(ratio=None).compute_tok_s == pytest.approx(both.decode_compute_tok_s)  # no mix known: decode only


def test_a_step_is_the_larger_of_reading_and_computing_plus_its_overhead():
    roof, eff = reference(), step.Efficiency(0.5, 0.4, 0.03)
    read = (WEIGHTS_GB * GB + 16 * 1270 * KV) / 8 / (0.5 * 900 * GB)
    work = 2 * ACTIVE * 16 / 8 / (0.4 * 31.4e12)
    prefill = 3.6 * 2 * ACTIVE / 8 / (0.4 * 125e12)
    assert step.tokens_per_s(roof, eff, 16) == pytest.approx(16 / (max(read, work) + 0.03 + 16 * prefill))
    parts = step.step_parts(roof, eff, 16)
    assert parts == pytest.approx({"read_s": read, "decode_compute_s": work, "overhead_s": 0.03, "prefill_s": 16 * prefill})


def test_the_fit_recovers_the_efficiencies_it_was_given():
    roof, truth = reference(), step.Efficiency(0.3, 0.25, 0.04)
    levels = [step.Level(c, step.tokens_per_s(roof, truth, c)) for c in (1, 2, 4, 8, 16, 32, 64)]
    fitted = step.fit(roof, levels, "made")
    assert fitted is not None and fitted.error < 0.01
    for c in (3, 12, 48):
        assert fitted.predict(roof, c).tokens_per_s == pytest.approx(step.tokens_per_s(roof, truth, c), rel=0.02)
        p = fitted.predict(roof, c)
        assert p.low <= step.tokens_per_s(roof, truth, c) <= p.high
    lo, hi = fitted.spread("overhead_s")
    assert lo <= 0.04 <= hi
    assert step.fit(roof, [step.Level(8, math.nan), step.Level(0, 5.0)]) is None  # nothing usable


def test_the_reference_levels_are_reproduced_and_its_compute_bound_said():
    roof = reference()
    fitted = step.fit(roof, [step.Level(8, 85.0), step.Level(16, 126.0), step.Level(32, 145.0)], "the report")
    assert fitted is not None and fitted.worst < 0.02  # within 2 % of each of the three levels
    for c, measured in ((8, 85.0), (16, 126.0), (32, 145.0)):
        p = fitted.predict(roof, c)
        assert p.low <= measured <= p.high
    assert "bandwidth" in fitted.words() and "overhead" in fitted.words()


def test_a_prediction_widens_by_a_transfers_error_and_scales_by_engines():
    p = step.Prediction(100.0, 90.0, 120.0)
    assert p.widened(0.15) == step.Prediction(100.0, 85.0, 120.0)
    assert p.scaled(2) == step.Prediction(200.0, 180.0, 240.0)
