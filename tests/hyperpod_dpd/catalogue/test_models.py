"""The model catalogue: KV sizes from the architecture, parameter counts that agree with it, lookups that explain."""

from __future__ import annotations

import re

import pytest

from hyperpod_dpd.catalogue.models import MODELS, model


def test_catalogue_covers_the_planned_models_and_a_moe() -> None:
    # THEN the four dense models of the issue and at least one MoE model are there
    assert {"Llama-3.1-8B", "Llama-3.3-70B", "Llama-3.1-405B", "Qwen2.5-72B"} <= set(MODELS)
    moe = [m for m in MODELS.values() if m.is_moe]
    assert moe and all(m.active_parameters < m.parameters for m in moe)


@pytest.mark.parametrize(("key", "expected"), [
    ("Llama-3.3-70B", 2 * 80 * 8 * 128 * 2),  # 327,680
    ("Llama-3.1-8B", 2 * 32 * 8 * 128 * 2),  # 131,072
    ("Llama-3.1-405B", 2 * 126 * 8 * 128 * 2),  # 516,096
    ("Qwen3-235B-A22B", 2 * 94 * 4 * 128 * 2),  # 192,512
])
def test_kv_bytes_per_token_is_two_layers_heads_dim_bytes(key: str, expected: int) -> None:
    assert MODELS[key].kv_bytes_per_token == expected


def test_seventy_b_kv_is_327680_bytes_and_40_kib_per_rank_at_tp8() -> None:
    # GIVEN the platform doc's figure: one token of a 70B Llama is ~40 KiB per rank at TP=8
    llama = MODELS["Llama-3.3-70B"]
    # THEN the catalogue gives exactly that
    assert llama.kv_bytes_per_token == 327_680
    assert llama.kv_bytes_per_token_per_rank(8) == 40 * 1024


def test_kv_heads_are_replicated_when_tensor_parallelism_exceeds_them() -> None:
    # GIVEN Qwen3-235B with 4 KV heads
    qwen = MODELS["Qwen3-235B-A22B"]
    # WHEN split over 4 and over 8 ranks
    # THEN each rank holds one head in both cases (vLLM replicates heads rather than splitting one)
    assert qwen.kv_bytes_per_token_per_rank(4) == 2 * 94 * 1 * 128 * 2
    assert qwen.kv_bytes_per_token_per_rank(8) == qwen.kv_bytes_per_token_per_rank(4)


@pytest.mark.parametrize("key", sorted(MODELS))
def test_published_parameter_counts_agree_with_the_architecture(key: str) -> None:
    # GIVEN the published totals and the figures from config.json
    spec = MODELS[key]
    total, active = spec.architecture_parameters()
    # THEN recounting attention, FFN (or experts) and embeddings lands within 1% (norms and rounding)
    assert total == pytest.approx(spec.parameters, rel=0.01)
    assert active == pytest.approx(spec.active_parameters, rel=0.01)


@pytest.mark.parametrize("key", sorted(MODELS))
def test_every_model_cites_its_sources(key: str) -> None:
    spec = MODELS[key]
    assert "huggingface.co/" in spec.source and spec.hf_repo in spec.source
    assert spec.attention_heads % spec.kv_heads == 0
    assert spec.attention_width == spec.attention_heads * spec.head_dim


def test_lookup_accepts_key_served_name_and_repository_in_any_case() -> None:
    assert model("llama-3.3-70b") is MODELS["Llama-3.3-70B"]
    assert model("Llama-3.3-70B-Instruct") is MODELS["Llama-3.3-70B"]
    assert model("meta-llama/Llama-3.3-70B-Instruct") is MODELS["Llama-3.3-70B"]


def test_unknown_model_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="unknown model 'Llama-9B'; known: Llama-3.1-8B"):
        model("Llama-9B")


@pytest.mark.parametrize("key", sorted(MODELS))
def test_dns_name_is_a_dns_1123_label(key: str) -> None:
    name = MODELS[key].dns_name
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", name)
    assert MODELS["Llama-3.3-70B"].dns_name == "llama-3-3-70b"


def test_expert_parameters_are_the_routed_experts_only() -> None:
    # GIVEN Mixtral-8x22B: 56 layers x 8 experts x 3 matrices of 6144 x 16384
    mixtral = MODELS["Mixtral-8x22B"]
    # THEN the routed-expert parameters are exactly that, and dense models have none
    assert mixtral.expert_parameters == 56 * 8 * 3 * 6144 * 16384
    assert MODELS["Llama-3.3-70B"].expert_parameters == 0
