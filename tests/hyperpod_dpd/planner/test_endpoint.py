"""The endpoints: block a plan emits: exact keys, placeholders where the planner cannot know, loadable once filled."""

from __future__ import annotations

import yaml

from hyperpod_dpd.catalogue.instances import instance
from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.config.endpoints import parse_endpoint
from hyperpod_dpd.planner.endpoint import endpoint_block, render_yaml
from hyperpod_dpd.planner.plan import Plan, make_plan
from hyperpod_dpd.planner.workload import LengthDistribution, Workload


def _plan(**layout: int) -> Plan:
    workload = Workload(inputs=LengthDistribution.fixed(8192), outputs=LengthDistribution.fixed(512),
                        concurrency=(32,))
    return make_plan(model=MODELS["Llama-3.3-70B"], instance=instance("ml.p5.48xlarge"), workload=workload,
                     **layout)


def test_the_block_has_exactly_the_documented_keys_and_values() -> None:
    # WHEN the 70B plan is rendered and read back
    block = yaml.safe_load(render_yaml(endpoint_block(_plan())))
    # THEN it is the documented shape with the plan's values and placeholders for the weights' location
    assert block == {"endpoints": [{
        "name": "llama-3-3-70b",
        "namespace": "llm-serving",  # an environment refuses the reserved 'default'
        "model": {"name": "Llama-3.3-70B-Instruct",
                  "s3": {"bucket": "<BUCKET>", "prefix": "<PREFIX>", "region": "<REGION>"}},
        "instance_type": "ml.p5.48xlarge",
        "tensor_parallel_size": 8,
        "max_model_len": 16384,
        "prefill": {"replicas": 2, "instance_group": "prefill"},
        "decode": {"replicas": 1, "instance_group": "decode"},
        "routing": {"threshold": 4096, "strategy": "prefixaware"},
        "pd_buffer_size": 17179869184,
    }]}


def test_leaf_mappings_are_written_in_flow_style_like_the_config_files() -> None:
    text = render_yaml(endpoint_block(_plan(), region="us-west-2"))
    assert "    routing: {threshold: 4096, strategy: prefixaware}\n" in text
    assert "region: us-west-2}" in text
    assert text.startswith("endpoints:\n  - name: llama-3-3-70b\n    namespace: llm-serving\n")


def test_group_names_and_region_come_from_the_environment_when_known() -> None:
    endpoint = endpoint_block(_plan(), prefill_group="gpu-prefill", decode_group="gpu-decode",
                              region="eu-west-2")["endpoints"][0]
    assert endpoint["prefill"]["instance_group"] == "gpu-prefill"
    assert endpoint["decode"]["instance_group"] == "gpu-decode"
    assert endpoint["model"]["s3"]["region"] == "eu-west-2"


def test_a_hypothetical_second_decoder_is_not_emitted() -> None:
    endpoint = endpoint_block(_plan(prefill_nodes=2, decode_nodes=2))["endpoints"][0]
    assert endpoint["decode"]["replicas"] == 1


def test_the_block_loads_through_the_endpoints_config_once_the_placeholders_are_filled() -> None:
    # GIVEN the emitted block with a real bucket and prefix, as a user would paste and complete it
    text = render_yaml(endpoint_block(_plan(), region="us-west-2"))
    text = text.replace("<BUCKET>", "hpdpd-models-111111111111-us-west-2").replace("<PREFIX>", "Llama-3.3-70B")
    data = yaml.safe_load(text)["endpoints"][0]
    # WHEN the toolkit's endpoint loader validates it
    endpoint = parse_endpoint(data, source="plan")
    # THEN it accepts the planned layout and settings
    assert endpoint.name == "llama-3-3-70b"
    assert endpoint.prefill.replicas == 2 and endpoint.pd_buffer_size == 17179869184
