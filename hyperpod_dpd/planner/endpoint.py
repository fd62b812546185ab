"""The ``endpoints:`` block of ``config/<env>.yaml`` for a plan, ready to paste (loaded by ``hyperpod_dpd.config.endpoints``)."""

from __future__ import annotations

from typing import Any

import yaml

from hyperpod_dpd.planner.plan import Plan

BUCKET_PLACEHOLDER = "<BUCKET>"
PREFIX_PLACEHOLDER = "<PREFIX>"
REGION_PLACEHOLDER = "<REGION>"


def endpoint_block(plan: Plan, *, namespace: str = "llm-serving", prefill_group: str = "prefill",
                   decode_group: str = "decode", region: str | None = None) -> dict[str, Any]:
    """The endpoint as planned: the prefill replicas the predictions used, the recommended settings, and one
    decoder (the operator's limit, even when a hypothetical multi-decoder layout was modelled).

    The planner does not know where the weights live, so bucket and prefix (and the Region without ``--env``)
    are placeholders.
    """
    r = plan.recommendation
    return {"endpoints": [{
        "name": plan.model.dns_name,
        "namespace": namespace,
        "model": {
            "name": plan.model.name,
            "s3": {"bucket": BUCKET_PLACEHOLDER, "prefix": PREFIX_PLACEHOLDER,
                   "region": region or REGION_PLACEHOLDER},
        },
        "instance_type": plan.instance.name,
        "tensor_parallel_size": r.tensor_parallel_size,
        "max_model_len": r.max_model_len,
        "prefill": {"replicas": plan.layout.prefill_nodes, "instance_group": prefill_group},
        "decode": {"replicas": r.decode_replicas, "instance_group": decode_group},
        "routing": {"threshold": r.routing_threshold, "strategy": r.routing_strategy},
        "pd_buffer_size": r.pd_buffer_size_bytes,
    }]}


class _ConfigDumper(yaml.SafeDumper):
    """Indents list items under their key, as ``config/*.yaml`` does."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)


def render_yaml(block: dict[str, Any]) -> str:
    """Block style outside, flow style for the small leaf mappings, keys in the documented order."""
    return yaml.dump(block, Dumper=_ConfigDumper, sort_keys=False, default_flow_style=None, width=120)
