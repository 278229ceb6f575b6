"""Gateway presets: the queue-depth source of a known gateway by name (docs/gateways.md)."""

from __future__ import annotations

import dataclasses
from typing import Any

from core.settings.schema import ConfigError, GatewaySettings

GATEWAY_PRESETS: dict[str, dict[str, Any]] = {
    "litellm": {"kind": "prometheus", "metric": "litellm_in_flight_requests",
                "wait_metric": "litellm_request_queue_time_seconds"},
    "litellm-json": {"kind": "json", "json_path": "in_flight_requests"},
    "production-stack": {"kind": "prometheus", "metric": "vllm:num_prefill_requests+vllm:num_decoding_requests"},
    "gateway-api": {"kind": "prometheus", "metric": "inference_pool_average_queue_size"},
    "llm-d": {"kind": "prometheus", "metric": "inference_extension_flow_control_queue_size",
              "wait_metric": "llm_d_epp_flow_control_request_queue_duration_seconds"
                             "|inference_extension_flow_control_request_queue_duration_seconds"},
    "aibrix": {"kind": "prometheus", "metric": "gateway_in_flight_requests"},
    "envoy": {"kind": "prometheus", "metric": "envoy_cluster_upstream_rq_pending_active"},
    "sweetspot-sim": {"kind": "prometheus", "metric": "sweetspot_gateway_queue_depth",
                      "wait_metric": "litellm_request_queue_time_seconds"},
}


def apply_gateway_preset(gateway: GatewaySettings, key: str = "gateway") -> GatewaySettings:
    """Fill kind / metric / json_path from the preset where not given; explicit values win, kind aside."""
    if not gateway.preset:
        return gateway
    preset = GATEWAY_PRESETS.get(gateway.preset)
    if preset is None:
        raise ConfigError(f"{key}.preset: unknown preset {gateway.preset!r} (one of {', '.join(GATEWAY_PRESETS)})")
    # The preset's fields are plain strings: read them directly (asdict deep-copies every field),
    # and hand back the same settings when the preset is already applied (the collector calls this
    # every round with the loader's already resolved settings).
    explicit = {k: getattr(gateway, k) for k in preset if k != "kind" and getattr(gateway, k)}
    resolved = {**preset, **explicit}
    if all(getattr(gateway, k) == v for k, v in resolved.items()):
        return gateway
    return dataclasses.replace(gateway, **resolved)
