"""LLMs the sizing planner knows: the architecture figures that decide KV size, FLOPs and weight traffic.

Sources: each model's ``config.json`` on Hugging Face (layers, heads, KV heads, head dimension, hidden and FFN sizes,
vocabulary, experts, context) and its model card or safetensors metadata (parameter counts). For MoE models the
total parameters decide memory and weight traffic, the active parameters decide FLOPs per token.
``tests/hyperpod_dpd/catalogue/test_models.py`` recounts the parameters from the architecture and checks them against the
published figures.

The models are published in BF16 (2 bytes per weight and per KV element); :meth:`ModelSpec.with_precision` gives
the same model served with FP8 or FP4 weights or KV cache (the byte counts live in ``PRECISION_BYTES``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

# Bytes per element of each serving precision. FP4 is NVFP4: 4-bit E2M1 values plus one FP8 (E4M3) scale per block of
# 16 values, i.e. 4.5 bits per element (NVIDIA, "Introducing NVFP4 for Efficient and Accurate Low-Precision
# Inference", developer blog, 2025-06-24). FP8 is E4M3 with per-tensor scales (vLLM --quantization fp8 /
# --kv-cache-dtype fp8), whose scales are negligible.
PRECISION_BYTES: Mapping[str, float] = MappingProxyType({"bf16": 2.0, "fp8": 1.0, "fp4": 0.5625})


@dataclass(frozen=True)
class ModelSpec:
    """One model. ``key`` is the short name the CLI takes; ``name`` is the served (catalogue) name."""

    key: str
    name: str
    hf_repo: str
    parameters: float
    active_parameters: float
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    hidden_size: int
    ffn_size: int  # per expert for MoE models
    vocab_size: int
    max_context: int
    source: str
    experts: int = 0
    experts_per_token: int = 0
    qkv_bias: bool = False
    tied_embeddings: bool = False  # one matrix serves as input embedding and LM head (tie_word_embeddings)
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"

    @property
    def bytes_per_param(self) -> float:
        return PRECISION_BYTES[self.weight_dtype]

    @property
    def kv_bytes_per_element(self) -> float:
        return PRECISION_BYTES[self.kv_dtype]

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def dns_name(self) -> str:
        """A DNS-1123 label derived from the key (``Llama-3.3-70B`` -> ``llama-3-3-70b``)."""
        return re.sub(r"[^a-z0-9]+", "-", self.key.lower()).strip("-")[:63].rstrip("-")

    def with_precision(self, *, weights: str = "bf16", kv: str = "bf16") -> ModelSpec:
        """The same model served with ``weights`` and ``kv`` precision (``bf16``, ``fp8`` or ``fp4``)."""
        for dtype in (weights, kv):
            if dtype not in PRECISION_BYTES:
                raise ValueError(f"unknown precision {dtype!r}; known: {', '.join(PRECISION_BYTES)}")
        return replace(self, weight_dtype=weights, kv_dtype=kv)

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V of every layer for one token: 2 x layers x KV heads x head dim x bytes (whole for every model)."""
        return round(2 * self.layers * self.kv_heads * self.head_dim * self.kv_bytes_per_element)

    def kv_bytes_per_token_per_rank(self, tensor_parallel: int) -> int:
        """What one tensor-parallel rank holds; KV heads are sharded, and replicated when TP exceeds them (vLLM)."""
        heads = math.ceil(self.kv_heads / tensor_parallel)
        return round(2 * self.layers * heads * self.head_dim * self.kv_bytes_per_element)

    @property
    def weight_bytes(self) -> float:
        return self.parameters * self.bytes_per_param

    @property
    def expert_parameters(self) -> float:
        """Parameters in routed experts (zero for dense models): the part a decode step may not touch."""
        return float(self.layers * self.experts * 3 * self.hidden_size * self.ffn_size)

    @property
    def head_parameters(self) -> float:
        """The LM head (vocabulary x hidden): a matmul only for tokens whose logits are sampled."""
        return float(self.vocab_size * self.hidden_size)

    @property
    def body_parameters(self) -> float:
        """Active parameters every token multiplies through: without the input embedding (a row lookup, not a
        matmul) and the LM head (vLLM computes logits only at each sequence's sampled position)."""
        tables = 1 if self.tied_embeddings else 2
        return self.active_parameters - tables * self.head_parameters

    @property
    def streamed_weight_bytes(self) -> float:
        """Weights a decode step reads from HBM: all but an untied input embedding, of which it gathers a few rows."""
        untouched = 0.0 if self.tied_embeddings else self.head_parameters
        return (self.parameters - untouched) * self.bytes_per_param

    @property
    def attention_width(self) -> int:
        return self.attention_heads * self.head_dim

    def architecture_parameters(self) -> tuple[float, float]:
        """(total, active) parameters recounted from the architecture, to cross-check the published counts."""
        kv_width = self.kv_heads * self.head_dim
        attention = 2 * self.hidden_size * self.attention_width + 2 * self.hidden_size * kv_width
        if self.qkv_bias:
            attention += self.attention_width + 2 * kv_width
        ffn = 3 * self.hidden_size * self.ffn_size
        if self.is_moe:
            router = self.hidden_size * self.experts
            total_layer = attention + self.experts * ffn + router
            active_layer = attention + self.experts_per_token * ffn + router
        else:
            total_layer = active_layer = attention + ffn
        embeddings = (1 if self.tied_embeddings else 2) * self.vocab_size * self.hidden_size
        return (float(self.layers * total_layer + embeddings), float(self.layers * active_layer + embeddings))


def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


_MODELS = (
    ModelSpec(
        key="Llama-3.1-8B", name="Llama-3.1-8B-Instruct", hf_repo="meta-llama/Llama-3.1-8B-Instruct",
        parameters=8_030_261_248, active_parameters=8_030_261_248,
        layers=32, attention_heads=32, kv_heads=8, head_dim=128, hidden_size=4096, ffn_size=14336,
        vocab_size=128256, max_context=131072,
        source=f"{_hf('meta-llama/Llama-3.1-8B-Instruct')}; parameters: safetensors total on the model page",
    ),
    ModelSpec(
        key="Llama-3.3-70B", name="Llama-3.3-70B-Instruct", hf_repo="meta-llama/Llama-3.3-70B-Instruct",
        parameters=70_553_706_496, active_parameters=70_553_706_496,
        layers=80, attention_heads=64, kv_heads=8, head_dim=128, hidden_size=8192, ffn_size=28672,
        vocab_size=128256, max_context=131072,
        source=f"{_hf('meta-llama/Llama-3.3-70B-Instruct')}; parameters: safetensors total on the model page",
    ),
    ModelSpec(
        key="Llama-3.1-405B", name="Llama-3.1-405B-Instruct", hf_repo="meta-llama/Llama-3.1-405B-Instruct",
        parameters=405_853_388_800, active_parameters=405_853_388_800,
        layers=126, attention_heads=128, kv_heads=8, head_dim=128, hidden_size=16384, ffn_size=53248,
        vocab_size=128256, max_context=131072,
        source=f"{_hf('meta-llama/Llama-3.1-405B-Instruct')}; parameters: safetensors total on the model page (BF16)",
    ),
    ModelSpec(
        key="Qwen2.5-72B", name="Qwen2.5-72B-Instruct", hf_repo="Qwen/Qwen2.5-72B-Instruct",
        parameters=72_706_203_648, active_parameters=72_706_203_648,
        layers=80, attention_heads=64, kv_heads=8, head_dim=128, hidden_size=8192, ffn_size=29568,
        vocab_size=152064, max_context=32768, qkv_bias=True,
        source=f"{_hf('Qwen/Qwen2.5-72B-Instruct')}; model card: 72.7B parameters, 80 layers, 64 Q / 8 KV heads",
    ),
    ModelSpec(
        key="Mixtral-8x22B", name="Mixtral-8x22B-Instruct-v0.1", hf_repo="mistralai/Mixtral-8x22B-Instruct-v0.1",
        parameters=141e9, active_parameters=39e9,
        layers=56, attention_heads=48, kv_heads=8, head_dim=128, hidden_size=6144, ffn_size=16384,
        vocab_size=32768, max_context=65536, experts=8, experts_per_token=2,
        source=(f"{_hf('mistralai/Mixtral-8x22B-Instruct-v0.1')}; Mistral AI announcement 'Cheaper, Better, "
                "Faster, Stronger' (2024-04-17): 141B total, 39B active parameters"),
    ),
    ModelSpec(
        key="Qwen3-235B-A22B", name="Qwen3-235B-A22B", hf_repo="Qwen/Qwen3-235B-A22B",
        parameters=235e9, active_parameters=22e9,
        layers=94, attention_heads=64, kv_heads=4, head_dim=128, hidden_size=4096, ffn_size=1536,
        vocab_size=151936, max_context=40960, experts=128, experts_per_token=8,
        source=f"{_hf('Qwen/Qwen3-235B-A22B')}; model card: 235B total, 22B activated, 128 experts, 8 activated",
    ),
)

MODELS: Mapping[str, ModelSpec] = MappingProxyType({m.key: m for m in _MODELS})


def model(name: str) -> ModelSpec:
    """Look a model up by key or served name, ignoring case; ``KeyError`` names the known models."""
    wanted = name.strip().lower()
    for spec in _MODELS:
        if wanted in (spec.key.lower(), spec.name.lower(), spec.hf_repo.lower()):
            return spec
    raise KeyError(f"unknown model {name!r}; known: {', '.join(MODELS)}")


def model_by_name(name: str) -> ModelSpec | None:
    """Like :func:`model`, but ``None`` for a model the catalogue does not know (endpoints may serve any model)."""
    try:
        return model(name)
    except KeyError:
        return None
