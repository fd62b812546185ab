"""Models from a Hugging Face config.json: the architecture the planner needs, recounted parameters, clear refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.catalogue.models import MODELS
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.planner.hf_config import load_model_config

# Mixtral-8x22B-Instruct-v0.1's config.json fields (huggingface.co/mistralai/Mixtral-8x22B-Instruct-v0.1)
MIXTRAL = {"_name_or_path": "mistralai/Mixtral-8x22B-Instruct-v0.1", "num_hidden_layers": 56, "hidden_size": 6144,
           "num_attention_heads": 48, "num_key_value_heads": 8, "intermediate_size": 16384, "vocab_size": 32768,
           "max_position_embeddings": 65536, "num_local_experts": 8, "num_experts_per_tok": 2,
           "sliding_window": None, "tie_word_embeddings": False}


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_a_mixture_of_experts_config_matches_the_catalogue(tmp_path: Path) -> None:
    # WHEN Mixtral's config.json is read
    spec = load_model_config(_write(tmp_path, MIXTRAL))
    known = MODELS["Mixtral-8x22B"]
    # THEN the architecture is the catalogue's and the recounted parameters are the published 141B / 39B
    assert (spec.layers, spec.kv_heads, spec.head_dim, spec.experts, spec.experts_per_token) == (56, 8, 128, 8, 2)
    assert spec.kv_bytes_per_token == known.kv_bytes_per_token
    assert spec.parameters == pytest.approx(known.parameters, rel=0.01)
    assert spec.active_parameters == pytest.approx(known.active_parameters, rel=0.01)
    assert spec.key == "Mixtral-8x22B-Instruct-v0.1" and str(tmp_path) in spec.source


def test_a_tied_head_counts_its_table_once_and_streams_it(tmp_path: Path) -> None:
    # GIVEN Mixtral's architecture with tie_word_embeddings (one 32,768 x 6,144 matrix for embedding and LM head)
    untied = load_model_config(_write(tmp_path, MIXTRAL))
    tied = load_model_config(_write(tmp_path, {**MIXTRAL, "tie_word_embeddings": True}))
    table = 32768 * 6144
    # THEN the table is counted once, every token still multiplies through the same layers, and a decode step
    # streams the whole tied model (the head reads the table) but not an untied input embedding
    assert tied.tied_embeddings and not untied.tied_embeddings
    assert untied.parameters - tied.parameters == table
    assert tied.body_parameters == untied.body_parameters == untied.active_parameters - 2 * table
    assert tied.streamed_weight_bytes == tied.weight_bytes
    assert untied.streamed_weight_bytes == untied.weight_bytes - table * untied.bytes_per_param


@pytest.mark.parametrize(("change", "field", "message"), [
    ({"num_hidden_layers": None}, "num_hidden_layers", "is required"),
    ({"num_key_value_heads": 7}, "num_key_value_heads", "must divide num_attention_heads (48)"),
    ({"num_experts_per_tok": 9}, "num_experts_per_tok", "must be from 1 to 8"),
    ({"hidden_size": "6144"}, "hidden_size", "must be a whole number of at least 1"),
    ({"sliding_window": 4096}, "sliding_window", "sliding-window attention has a different KV size"),
    ({"n_shared_experts": 2}, "n_shared_experts", "shared experts are not modelled"),
])
def test_a_config_the_planner_cannot_model_is_refused(tmp_path: Path, change: dict[str, Any], field: str,
                                                      message: str) -> None:
    data = {k: v for k, v in {**MIXTRAL, **change}.items() if v is not None or k == "sliding_window"}
    with pytest.raises(ConfigError) as caught:
        load_model_config(_write(tmp_path, data))
    text = str(caught.value)
    assert field in text and message in text and str(tmp_path / "config.json") in text


def test_a_file_that_is_not_a_config_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not JSON"):
        load_model_config(_write(tmp_path, "{not json"))
    with pytest.raises(ConfigError, match="must be a JSON object"):
        load_model_config(_write(tmp_path, "[1, 2]"))
    with pytest.raises(ConfigError, match="no such file"):
        load_model_config(tmp_path / "missing.json")
