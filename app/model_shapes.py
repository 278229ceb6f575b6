"""Ceiling inputs a target's settings leave unset, read from the model's shape (core/model_shape.py):
its config.json (``targets[].model_config``, else the Hugging Face cache by the served model name),
else the table of well-known architectures. Typed settings always win; the engine's own KV bytes per
token (cache_config_info) win over all of these where it exposes them (db/ceiling.py).

The collector calls :func:`shaped` once per target when its first page names the served model, and
stores the inputs with where they came from (``shape_source``). A config.json that is missing,
unreadable, not JSON or lacks the fields gives one log line naming the file and the next source.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from core.model_shape import ModelShape, resolve
from core.settings import TargetSettings

log = logging.getLogger(__name__)


def shaped(target: TargetSettings, model_name: str, hub: str) -> tuple[TargetSettings, ModelShape | None]:
    """``target`` with its unset weight_gb, kv_bytes_per_token and active_params_b filled from the
    model's shape (weights: the bytes a step reads), and the shape used; the target unchanged when
    nothing is unset or no source gives a shape (each failed source logged once, named)."""
    c = target.ceiling
    if c.weight_gb is not None and c.kv_bytes_per_token is not None and c.active_params_b is not None:
        return target, None
    config = Path(target.model_config).expanduser() if target.model_config else None
    shape, problems = resolve(model_name, c.tensor_parallel or 1, config, Path(hub).expanduser() if hub else None)
    for line in problems:
        log.warning("%s: %s; the model's shape comes from the next source", target.name, line)
    if shape is None:
        return target, None
    filled = dataclasses.replace(
        c,
        weight_gb=c.weight_gb if c.weight_gb is not None else shape.step_weight_bytes / 1e9,
        kv_bytes_per_token=c.kv_bytes_per_token if c.kv_bytes_per_token is not None else shape.kv_bytes_per_token,
        active_params_b=c.active_params_b if c.active_params_b is not None else shape.active_params / 1e9,
    )
    log.info("%s: model shape from %s: %.2f GB read a step, %.0f KV bytes a token, %.1f B active parameters",
             target.name, shape.source, shape.step_weight_bytes / 1e9, shape.kv_bytes_per_token, shape.active_params / 1e9)  # fmt: skip
    return dataclasses.replace(target, ceiling=filled), shape
