"""A model outside the catalogue, read from its Hugging Face ``config.json`` (``hpdpd plan --model-config FILE``).

The planner needs what decides KV size, FLOPs and weight traffic: layers, hidden size, attention and KV heads, head
dimension, FFN (intermediate) size, vocabulary, context and, for mixtures of experts, the expert counts. The field
names are those of transformers' configuration classes (LlamaConfig, Qwen2Config, MixtralConfig, Qwen3MoeConfig:
``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``, ``head_dim``,
``intermediate_size``, ``moe_intermediate_size``, ``vocab_size``, ``max_position_embeddings``,
``num_local_experts`` / ``num_experts``, ``num_experts_per_tok``, ``attention_bias``, ``tie_word_embeddings``).
Parameters are recounted from the architecture (``ModelSpec.architecture_parameters``), since config.json does not
carry them. Architectures whose attention the planner does not model (multi-head latent attention, sliding windows,
shared experts) are refused rather than planned wrongly.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from hyperpod_dpd.catalogue.models import ModelSpec
from hyperpod_dpd.errors import ConfigError

MAX_BYTES = 1 << 20  # a config.json is a few KiB; refuse anything that is clearly not one

# Fields whose presence means an attention or expert layout the roofline does not model.
_UNSUPPORTED = {
    "kv_lora_rank": "multi-head latent attention (DeepSeek-V2/V3 style) has a different KV size",
    "q_lora_rank": "multi-head latent attention (DeepSeek-V2/V3 style) has a different KV size",
    "n_shared_experts": "shared experts are not modelled",
    "shared_expert_intermediate_size": "shared experts are not modelled",
}


def _field(data: dict[str, Any], source: str, names: tuple[str, ...], *, required: bool = True,
           default: int | None = None, minimum: int = 1) -> int:
    for name in names:
        if name in data:
            value = data[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ConfigError.single(source, name, value, f"must be a whole number of at least {minimum}")
            return value
    if required:
        raise ConfigError.single(source, names[0], "<missing>", f"is required ({' or '.join(names)})")
    assert default is not None
    return default


def load_model_config(path: Path, *, display: str | None = None) -> ModelSpec:
    """The model ``path`` describes, in BF16 (use ``with_precision`` for FP8/FP4); one ConfigError per problem."""
    source = display or str(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise ConfigError.single(source, "<file>", path.name, f"is larger than {MAX_BYTES:,} bytes; not a "
                                     "config.json")
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError.single(source, "<file>", path.name, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError.single(source, "<file>", path.name, f"cannot be read: {exc.__class__.__name__}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError.single(source, "<file>", path.name, f"is not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise ConfigError.single(source, "<root>", type(data).__name__, "must be a JSON object (a config.json)")
    if isinstance(data.get("text_config"), dict):  # multimodal wrappers keep the language model here
        data = {**data["text_config"], "_name_or_path": data.get("_name_or_path")}
    for name, why in _UNSUPPORTED.items():
        if data.get(name):
            raise ConfigError.single(source, name, data[name], f"is not supported by the planner: {why}")
    if data.get("sliding_window") and data.get("use_sliding_window", True) is not False:
        raise ConfigError.single(source, "sliding_window", data["sliding_window"],
                                 "is not supported by the planner: sliding-window attention has a different KV size")
    layers = _field(data, source, ("num_hidden_layers", "n_layer", "num_layers"))
    hidden = _field(data, source, ("hidden_size", "n_embd", "d_model"))
    heads = _field(data, source, ("num_attention_heads", "n_head"))
    kv_heads = _field(data, source, ("num_key_value_heads",), required=False, default=heads)
    if heads % kv_heads:
        raise ConfigError.single(source, "num_key_value_heads", kv_heads,
                                 f"must divide num_attention_heads ({heads})")
    head_dim = _field(data, source, ("head_dim",), required=False, default=hidden // heads)
    experts = _field(data, source, ("num_local_experts", "num_experts", "n_routed_experts"), required=False,
                     default=0, minimum=0)
    per_token = _field(data, source, ("num_experts_per_tok",), required=experts > 0, default=0, minimum=0)
    if experts and not 0 < per_token <= experts:
        raise ConfigError.single(source, "num_experts_per_tok", per_token, f"must be from 1 to {experts}")
    ffn_names = ("moe_intermediate_size", "intermediate_size") if experts else ("intermediate_size", "n_inner")
    ffn = _field(data, source, ffn_names)
    vocab = _field(data, source, ("vocab_size",))
    context = _field(data, source, ("max_position_embeddings", "n_positions", "max_sequence_length"))
    name = str(data.get("_name_or_path") or path.parent.name or path.stem)
    key = name.rsplit("/", 1)[-1] or "model"
    spec = ModelSpec(key=key, name=key, hf_repo=name, parameters=0.0, active_parameters=0.0, layers=layers,
                     attention_heads=heads, kv_heads=kv_heads, head_dim=head_dim, hidden_size=hidden, ffn_size=ffn,
                     vocab_size=vocab, max_context=context, source=f"{source} (config.json; parameters recounted)",
                     experts=experts, experts_per_token=per_token, qkv_bias=bool(data.get("attention_bias")),
                     tied_embeddings=bool(data.get("tie_word_embeddings")))
    total, active = spec.architecture_parameters()
    return replace(spec, parameters=total, active_parameters=active)
