"""``hpdpd plan --env NAME --endpoint NAME``: plan an environment's endpoint as configured, flags replacing its values."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from hyperpod_dpd.cli.main import main

WORKLOAD = ["--input-tokens", "4096", "--output-tokens", "256", "--concurrency", "8"]
ENDPOINT = ["plan", "--env", "dev", "--endpoint", "llama-3-3-70b", *WORKLOAD]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = _run(capsys, *argv, "--output", "json")
    assert (code, err) == (0, "")
    data: dict[str, Any] = json.loads(out)
    return data


def _endpoint(mutate: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """A mutation of dev.yaml's one endpoint (and, through ``data``, of the rest of the file)."""
    def apply(data: dict[str, Any]) -> None:
        mutate(data["endpoints"][0])
    return apply


@pytest.fixture
def custom(write_config: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    def use(mutate: Callable[[dict[str, Any]], None]) -> None:
        monkeypatch.setenv("HPDPD_CONFIG_DIR", str(write_config(mutate)))
    return use


def test_the_configured_endpoint_supplies_every_flag_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN dev's endpoint: Llama 3.3 70B on ml.p5.48xlarge, TP 8, 1 prefill + 1 decode, threshold 4096,
    # max_model_len 16384, and the default SLO its alerts fire at (TTFT 2,000 ms, TPOT 100 ms)
    data = _json(capsys, *ENDPOINT)
    # THEN the plan is of that endpoint, and the JSON names each value taken from the file
    taken = data["endpoint"]["from_endpoint"]
    assert data["endpoint"]["name"] == "llama-3-3-70b" and data["endpoint"]["path"] == "endpoints[0]"
    assert taken == {"--model": "Llama-3.3-70B", "--instance": "ml.p5.48xlarge", "--prefill-tp": "8",
                     "--decode-tp": "8", "--prefill-nodes": "1", "--prefill-per-node": "1", "--decode-nodes": "1",
                     "--decode-per-node": "1", "--routing-threshold": "4096", "--max-model-len": "16384",
                     "--ttft-slo-ms": "2000", "--tpot-slo-ms": "100"}
    assert data["recommendation"]["routing_threshold"] == 4096 and data["recommendation"]["max_model_len"] == 16384
    assert (data["layout"]["prefill_nodes"], data["layout"]["decode_nodes"]) == (1, 1)
    assert (data["slo"]["ttft_ms"], data["slo"]["tpot_ms"]) == (2000.0, 100.0)
    assert data["environment"] == "dev" and data["warnings"] == []


def test_a_flag_replaces_the_endpoints_value_and_is_not_listed_as_taken(capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN the routing threshold and the prefill node count are asked as a what-if on the configured endpoint
    data = _json(capsys, *ENDPOINT, "--routing-threshold", "0", "--prefill-nodes", "2")
    taken = data["endpoint"]["from_endpoint"]
    # THEN the flags win, the rest still comes from the endpoint, and the larger layout is labelled as a what-if
    assert "--routing-threshold" not in taken and "--prefill-nodes" not in taken and taken["--prefill-tp"] == "8"
    assert data["recommendation"]["routing_threshold"] == 0 and data["layout"]["prefill_nodes"] == 2
    assert data["layout"]["what_if"][0].startswith("what if: 2 prefill node(s), beyond environment dev's 1")


def test_the_text_report_opens_with_the_endpoint_and_its_values(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, *ENDPOINT)
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == (
        "Endpoint llama-3-3-70b as configured (tests/fixtures/config/dev.yaml: endpoints[0]): --model Llama-3.3-70B, "
        "--instance ml.p5.48xlarge, --prefill-tp 8, --decode-tp 8, --prefill-nodes 1, --prefill-per-node 1, "
        "--decode-nodes 1, --decode-per-node 1, --routing-threshold 4096, --max-model-len 16384, --ttft-slo-ms 2000, "
        "--tpot-slo-ms 100; a flag on the command line replaces the endpoint's value")
    assert "SLO TTFT <= 2,000 ms and TPOT <= 100.0 ms" in out


def test_tp4_replicas_share_a_node_and_vllm_flags_and_slo_are_read(capsys: pytest.CaptureFixture[str],
                                                                  custom: Callable[..., None]) -> None:
    # GIVEN an endpoint at TP 4 with two prefill replicas on its one prefill node, vLLM flags in its args, its own
    # SLO, an FP8 KV cache (set twice: vLLM keeps the last) and a lower memory share
    def tp4(e: dict[str, Any]) -> None:
        e.update(tensor_parallel_size=4, gpu_memory_utilization=0.7, slo={"ttft_ms": 1500, "tpot_ms": 40},
                 args=["--max-num-seqs", "256", "--max-num-batched-tokens=4096", "--kv-cache-dtype", "auto",
                       "--kv-cache-dtype=fp8"])
        e["prefill"]["replicas"] = 2
        e["decode"]["args"] = ["--max-num-seqs", "128"]
    custom(_endpoint(tp4))
    data = _json(capsys, *ENDPOINT)
    taken = data["endpoint"]["from_endpoint"]
    # THEN two TP4 replicas on one prefill node, one on the decode node, and the engine settings as deployed
    assert (data["layout"]["prefill_nodes"], data["layout"]["prefill_replicas_per_node"]) == (1, 2)
    assert (data["layout"]["prefill_tensor_parallel_size"], data["layout"]["decode_replicas_per_node"]) == (4, 1)
    assert taken["--max-num-seqs"] == "128" and taken["--max-num-batched-tokens"] == "4096"
    assert taken["--kv-dtype"] == "fp8" and data["precision"]["kv_cache"] == "fp8"
    constants = data["calibration"]["constants"]
    assert constants["max_num_seqs"]["value"] == 128 and constants["chunk_tokens"]["value"] == 4096
    assert constants["dpd_memory_utilization"]["value"] == 0.7
    assert (data["slo"]["ttft_ms"], data["slo"]["tpot_ms"]) == (1500.0, 40.0)
    # AND the roles' differing vLLM values are named, with the one the plan used
    assert any(w.startswith("--max-num-seqs is 256 on prefill and 128 on decode; planned with the decode role's")
               for w in data["warnings"])
    assert not any(w.startswith("--kv-cache-dtype") for w in data["warnings"])


def test_a_tp_flag_drops_the_endpoints_replicas_per_node(capsys: pytest.CaptureFixture[str],
                                                         custom: Callable[..., None]) -> None:
    # GIVEN the TP4 endpoint with two prefill replicas per node
    def tp4(e: dict[str, Any]) -> None:
        e["tensor_parallel_size"] = 4
        e["prefill"]["replicas"] = 2
    custom(_endpoint(tp4))
    # WHEN TP 8 is asked for prefill
    data = _json(capsys, *ENDPOINT, "--prefill-tp", "8")
    # THEN a node holds one TP8 replica: the endpoint's per-node count belonged to its TP
    assert "--prefill-per-node" not in data["endpoint"]["from_endpoint"]
    assert (data["layout"]["prefill_tensor_parallel_size"], data["layout"]["prefill_replicas_per_node"]) == (8, 1)


def test_an_autoscaled_role_is_planned_at_its_replicas_and_says_so(capsys: pytest.CaptureFixture[str],
                                                                  custom: Callable[..., None]) -> None:
    def scaled(data: dict[str, Any]) -> None:
        prefill = next(g for g in data["hyperpod"]["instance_groups"] if g["name"] == "prefill")
        prefill["count"] = 3
        data["endpoints"][0]["prefill"]["autoscaling"] = {
            "min_replicas": 1, "max_replicas": 3,
            "prometheus": {"query": 'sum(rate(vllm:prompt_tokens_total{namespace="llm-serving"}[1m]))',
                           "target_value": 100000}}
    custom(scaled)
    data = _json(capsys, *ENDPOINT)
    assert data["layout"]["prefill_nodes"] == 1
    assert "prefill autoscales between 1 and 3 replicas; planned at its configured 1 (--prefill-nodes plans another " \
           "count)" in data["warnings"]


BAD = {
    "unknown endpoint": (["plan", "--env", "dev", "--endpoint", "nope", *WORKLOAD], None,
                         "tests/fixtures/config/dev.yaml: endpoints: 'nope': environment dev has no such endpoint; "
                         "its endpoints: llama-3-3-70b"),
    "no --env": (["plan", "--endpoint", "llama-3-3-70b", *WORKLOAD], None,
                 "--endpoint: 'llama-3-3-70b': names an endpoint of an environment: give --env NAME too"),
    "with --emit-endpoint": ([*ENDPOINT, "--emit-endpoint"], None,
                             "--emit-endpoint: true: writes a new endpoint block; --endpoint plans one that is already "
                             "configured: give one of them"),
    "model outside the catalogue": (ENDPOINT, _endpoint(lambda e: e["model"].update(name="my-org-model-70b")),
                                    "dev.yaml: endpoints[0].model.name: 'my-org-model-70b': is not in the planner's "
                                    "model catalogue"),
    "uneven replicas": (ENDPOINT, lambda d: (
        next(g for g in d["hyperpod"]["instance_groups"] if g["name"] == "prefill").update(count=2),
        d["endpoints"][0].update(tensor_parallel_size=4),
        d["endpoints"][0]["prefill"].update(replicas=3)),
        "dev.yaml: endpoints[0].prefill.replicas: 3: 3 prefill replicas, at most 2 per node, do not spread evenly "
        "over 2 nodes; pass --prefill-nodes and --prefill-per-node"),
    "unmodelled KV dtype": (ENDPOINT, _endpoint(lambda e: e.update(args=["--kv-cache-dtype", "fp8_inc"])),
                            "dev.yaml: endpoints[0].args: 'fp8_inc': --kv-cache-dtype fp8_inc is not modelled"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_endpoint_input_gets_one_line(case: str, capsys: pytest.CaptureFixture[str],
                                          custom: Callable[..., None]) -> None:
    argv, mutate, expected = BAD[case]
    if mutate is not None:
        custom(mutate)
    code, out, err = _run(capsys, *argv)
    # THEN exit 2, nothing on stdout, and one line naming the file or flag, the field, the value and what to do
    assert (code, out) == (2, "")
    assert err.startswith("hpdpd: error: ") and expected in err and err.count("\n") == 1


def test_a_model_outside_the_catalogue_plans_with_model_config(capsys: pytest.CaptureFixture[str],
                                                               custom: Callable[..., None], tmp_path: Any) -> None:
    # GIVEN an endpoint serving a model the catalogue lacks, and its Hugging Face config.json
    custom(_endpoint(lambda e: e["model"].update(name="my-org-model-70b")))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"num_hidden_layers": 80, "hidden_size": 8192, "num_attention_heads": 64,
                                  "num_key_value_heads": 8, "intermediate_size": 28672, "vocab_size": 128256,
                                  "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}))
    data = _json(capsys, *ENDPOINT, "--model-config", str(config))
    # THEN the rest of the endpoint is planned, and --model was not taken from the file
    assert "--model" not in data["endpoint"]["from_endpoint"] and data["layout"]["prefill_nodes"] == 1


def test_a_nixl_connector_in_the_args_is_planned_as_nixl(capsys: pytest.CaptureFixture[str],
                                                         custom: Callable[..., None]) -> None:
    # GIVEN an endpoint whose args end with vLLM's own NIXL connector, after an LMCache one
    lmcache, nixl = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}', '{"kv_connector":"NixlConnector"}'
    custom(_endpoint(lambda e: e.update(args=["--kv-transfer-config", lmcache, f"--kv-transfer-config={nixl}"])))
    # THEN the plan models the connector vLLM runs with: the last one given
    assert _json(capsys, *ENDPOINT)["endpoint"]["from_endpoint"]["--kv-connector"] == "nixl"


def test_a_kv_dtype_differing_between_the_roles_is_refused_before_planning(capsys: pytest.CaptureFixture[str],
                                                                           custom: Callable[..., None]) -> None:
    # GIVEN an FP8 KV cache on the decoder only: the prefiller's BF16 blocks could not be received
    custom(_endpoint(lambda e: e["decode"].update(args=["--kv-cache-dtype", "fp8"])))
    code, out, err = _run(capsys, *ENDPOINT)
    # THEN one line names the file, the field and the rule, and nothing is planned
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1, err
    assert "dev.yaml: endpoints[0].decode.args[0]: '--kv-cache-dtype': sets --kv-cache-dtype fp8 on decode" in err
