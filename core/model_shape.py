"""A model's shape, read rather than typed: the weight bytes a decode step reads, the KV bytes a token
holds and the parameters a token passes through, from a Hugging Face ``config.json`` (or a table of
well-known architectures kept as data, core/model_shapes.json, holding the same fields).

Counted per linear layer, so quantisation is exact to the layout: AWQ and GPTQ store ``bits`` per
weight plus, per group of ``group_size`` inputs and output column, a 2-byte scale and a ``bits``-wide
zero point (vLLM's byte counters count 0.5 B a weight and miss the scales and zeros: −3.8 % on a
70B AWQ); fp8 checkpoints one byte a weight plus a 4-byte scale per block. Embeddings, the LM head,
norms and MoE routers stay in the model's dtype. The input embedding is looked up, not read whole,
so a step reads the weights less that table (unless it is tied to the LM head).

KV bytes per token are stated over all GPUs as core/mbu.StepModel divides them by TP: grouped-query
KV heads fewer than TP are replicated (each GPU holds at least one head), and MLA's compressed KV
(DeepSeek-V3: one latent of kv_lora_rank + qk_rope_head_dim per layer) is held whole by every GPU.
Pure functions of a mapping and numbers; reading a file is :func:`load_config`, which turns every
failure into one line naming the file (:class:`ShapeError`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("model_shapes.json")
_DTYPE_BYTES = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0, "half": 2.0, "float": 4.0}
REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")


class ShapeError(ValueError):
    """A config.json that cannot give a shape; the message is one line naming the file."""


@dataclass(frozen=True, slots=True)
class ModelShape:
    """Bytes a step reads (all GPUs), KV bytes per token (all GPUs, replication counted), active and
    total parameters, and where the figures came from."""

    weight_bytes: float  # on disk / in memory
    step_weight_bytes: float  # read by one decode step: the weights less the input embedding table
    kv_bytes_per_token: float
    params: float
    active_params: float
    source: str
    quantization: str | None = None  # the weights' quant_method (awq, gptq, fp8); None: the model's dtype
    layers: int | None = None


@dataclass(frozen=True, slots=True)
class _Linear:
    inputs: int
    outputs: int
    count: float  # how many such layers (× layers, × experts)
    active: float  # how many a token passes through
    quantized: bool = True


def _get(config: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = config.get(key, default)
    return default if value is None else value


def _linears(c: Mapping[str, Any]) -> list[_Linear]:
    h, layers, heads = int(c["hidden_size"]), int(c["num_hidden_layers"]), int(c["num_attention_heads"])
    out: list[_Linear] = []
    if c.get("kv_lora_rank"):  # MLA (DeepSeek-V2/V3)
        rope, nope, v = int(c["qk_rope_head_dim"]), int(c["qk_nope_head_dim"]), int(c["v_head_dim"])
        q_rank, kv_rank = int(_get(c, "q_lora_rank", 0)), int(c["kv_lora_rank"])
        q = [_Linear(h, q_rank, layers, layers), _Linear(q_rank, heads * (nope + rope), layers, layers)] if q_rank else \
            [_Linear(h, heads * (nope + rope), layers, layers)]  # fmt: skip
        out += [*q, _Linear(h, kv_rank + rope, layers, layers), _Linear(kv_rank, heads * (nope + v), layers, layers),
                _Linear(heads * v, h, layers, layers)]  # fmt: skip
    else:
        hd = int(_get(c, "head_dim", h // heads))
        kv_heads = int(_get(c, "num_key_value_heads", heads))
        out += [_Linear(h, heads * hd, layers, layers), _Linear(h, 2 * kv_heads * hd, layers, layers),
                _Linear(heads * hd, h, layers, layers)]  # fmt: skip
    out += _mlp(c, h, layers)
    return out


def _mlp(c: Mapping[str, Any], h: int, layers: int) -> list[_Linear]:
    inter = int(_get(c, "intermediate_size", 4 * h))
    experts = int(_get(c, "num_local_experts", _get(c, "n_routed_experts", 0)))
    if not experts:
        return [_Linear(h, 2 * inter, layers, layers), _Linear(inter, h, layers, layers)]  # gate+up, down
    k = int(_get(c, "num_experts_per_tok", 2))
    dense = int(_get(c, "first_k_dense_replace", 0))
    moe_layers = layers - dense
    e_inter = int(_get(c, "moe_intermediate_size", inter))
    shared = int(_get(c, "n_shared_experts", 0))
    out = [_Linear(h, 2 * inter, dense, dense), _Linear(inter, h, dense, dense)] if dense else []
    out += [_Linear(h, 2 * e_inter, moe_layers * experts, moe_layers * k), _Linear(e_inter, h, moe_layers * experts, moe_layers * k),
            _Linear(h, experts, moe_layers, moe_layers, quantized=False)]  # router  # fmt: skip
    if shared:
        out += [_Linear(h, 2 * e_inter * shared, moe_layers, moe_layers), _Linear(e_inter * shared, h, moe_layers, moe_layers)]
    return out


def _quantized_bytes(inputs: int, outputs: int, quant: Mapping[str, Any]) -> float:
    """Bytes of one quantised linear layer's weights with their scales and zero points."""
    method = str(_get(quant, "quant_method", "")).lower()
    n = inputs * outputs
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin", "compressed-tensors"):
        bits = int(_get(quant, "bits", _get(quant, "w_bit", 4)))
        group = int(_get(quant, "group_size", _get(quant, "q_group_size", 128)))
        groups = (inputs / group if group > 0 else 1.0) * outputs
        zeros = 0.0 if quant.get("sym") is True and method.startswith("gptq") else groups * bits / 8
        return n * bits / 8 + groups * 2.0 + zeros
    if method == "fp8":
        block = _get(quant, "weight_block_size", None)
        scales = (inputs / block[0]) * (outputs / block[1]) * 4.0 if block else outputs * 4.0
        return n * 1.0 + scales
    raise ShapeError(f"quantization_config.quant_method {method!r} is not one Sweetspot counts (awq, gptq, fp8)")


def shape_of(config: Mapping[str, Any], tensor_parallel: int = 1, kv_cache_dtype: str = "auto",
             source: str = "config.json") -> ModelShape:  # fmt: skip
    """The shape of a model from its config.json fields (raises KeyError/ValueError on missing or bad ones)."""
    c = dict(config.get("text_config") or {}) | {k: v for k, v in config.items() if k != "text_config"}
    dtype = _DTYPE_BYTES.get(str(_get(c, "torch_dtype", _get(c, "dtype", "bfloat16"))), 2.0)
    quant = c.get("quantization_config") or None
    h, vocab = int(c["hidden_size"]), int(c["vocab_size"])
    tied = bool(_get(c, "tie_word_embeddings", False))
    embed = vocab * h * dtype
    weights = embed * (1 if tied else 2)  # the input embedding table, the LM head
    params = active = float(vocab * h * (1 if tied else 2))
    for lin in _linears(c):
        one = lin.inputs * lin.outputs
        size = _quantized_bytes(lin.inputs, lin.outputs, quant) if quant and lin.quantized else one * dtype
        weights += size * lin.count
        params += one * lin.count
        active += one * lin.active
    norms = (2 * int(c["num_hidden_layers"]) + 1) * h
    weights += norms * dtype
    step = weights - (0.0 if tied else embed)
    method = str(_get(quant, "quant_method", "")).lower() if quant else None
    return ModelShape(weights, step, kv_bytes_per_token(c, tensor_parallel, kv_cache_dtype, dtype), params + norms,
                      active + norms, source, method or None, int(c["num_hidden_layers"]))  # fmt: skip


def kv_bytes_per_token(c: Mapping[str, Any], tensor_parallel: int, kv_cache_dtype: str, dtype: float) -> float:
    """KV bytes one token holds over all GPUs, as StepModel divides by TP (replicated heads counted)."""
    per_value = 1.0 if kv_cache_dtype.startswith("fp8") else dtype
    layers, tp = int(c["num_hidden_layers"]), max(tensor_parallel, 1)
    if c.get("kv_lora_rank"):  # MLA: one compressed latent a layer, held whole by every GPU
        return layers * (int(c["kv_lora_rank"]) + int(c["qk_rope_head_dim"])) * per_value * tp
    heads = int(c["num_attention_heads"])
    hd = int(_get(c, "head_dim", int(c["hidden_size"]) // heads))
    kv_heads = int(_get(c, "num_key_value_heads", heads))
    return 2.0 * layers * max(kv_heads, tp) * hd * per_value  # fewer KV heads than TP: each GPU holds one


def load_config(path: Path) -> dict[str, Any]:
    """A config.json's fields; :class:`ShapeError` (one line naming the file) when it is missing,
    unreadable, not JSON or lacks the fields a shape needs."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ShapeError(f"{path}: no such file") from None
    except OSError as exc:
        raise ShapeError(f"{path}: unreadable ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ShapeError(f"{path}: not JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ShapeError(f"{path}: not a JSON object")
    text_config = data.get("text_config")
    fields: dict[str, Any] = text_config if isinstance(text_config, dict) else data
    missing = [k for k in REQUIRED if k not in fields]
    if missing:
        raise ShapeError(f"{path}: lacks {', '.join(missing)}")
    return data


def find_in_hf_cache(model_name: str, hub: Path) -> Path | None:
    """The newest snapshot's config.json of ``model_name`` (``org/name``) in a Hugging Face hub cache
    directory (``~/.cache/huggingface/hub``), or None."""
    folder = hub / ("models--" + model_name.replace("/", "--"))
    found = sorted(folder.glob("snapshots/*/config.json"), key=lambda p: p.stat().st_mtime if p.exists() else 0.0)
    return found[-1] if found else None


@cache
def _table() -> tuple[tuple[str, str, dict[str, Any]], ...]:
    rows = json.loads(TABLE.read_text())["models"]
    return tuple((r["name"], r["match"], r["config"]) for r in rows)


def known_architecture(model_name: str) -> tuple[str, dict[str, Any]] | None:
    """(table name, config fields) of the first well-known architecture matching the served name."""
    return next(((name, dict(cfg)) for name, match, cfg in _table() if re.search(match, model_name, re.IGNORECASE)), None)


def resolve(model_name: str, tensor_parallel: int, config_path: Path | None, hub: Path | None,
            kv_cache_dtype: str = "auto", quantization: Mapping[str, Any] | None = None) -> tuple[ModelShape | None, list[str]]:  # fmt: skip
    """The best shape found, best first: the configured config.json, the one in the HF cache for the
    served name, the table of well-known architectures; with one line per source that failed (named)."""
    problems: list[str] = []
    candidates: list[tuple[Path, str]] = []
    if config_path is not None:
        candidates.append((config_path, f"config.json ({config_path})"))
    cached = find_in_hf_cache(model_name, hub) if hub is not None and model_name else None
    if cached is not None:
        candidates.append((cached, f"config.json (Hugging Face cache, {model_name})"))
    for path, source in candidates:
        try:
            return shape_of(load_config(path), tensor_parallel, kv_cache_dtype, source), problems
        except (ShapeError, KeyError, ValueError, TypeError) as exc:
            problems.append(str(exc) if isinstance(exc, ShapeError) else f"{path}: {exc!r} is missing or malformed")
    known = known_architecture(model_name) if model_name else None
    if known is not None:
        name, fields = known
        if quantization:
            fields["quantization_config"] = dict(quantization)
        return shape_of(fields, tensor_parallel, kv_cache_dtype, f"table of known architectures ({name})"), problems
    return None, problems
