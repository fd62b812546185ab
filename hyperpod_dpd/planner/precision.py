"""Serving precisions: which GPUs run FP8 and FP4, and how much faster their dense GEMMs are than BF16.

Dense tensor-core peaks per GPU (datasheet "with sparsity" figures halved, as the instance catalogue does for BF16):

* H100 SXM and H200 SXM: FP8 1,979 TFLOPS dense (3,958 with sparsity) = 2 x BF16; no FP4 (NVIDIA H100 and H200
  datasheets).
* HGX B200: FP8 72 PFLOPS and FP4 144 PFLOPS with sparsity per 8 GPUs = 4.5 and 9 PFLOPS dense per GPU = 2 x and
  4 x BF16 (NVIDIA HGX B200 specifications).
* HGX B300: FP8 72 PFLOPS with sparsity, FP4 108 PFLOPS dense per 8 GPUs = 4.5 and 13.5 PFLOPS per GPU = 2 x and
  6 x BF16 (NVIDIA HGX B300 specifications).

FP8 weights and KV cache run on Hopper and Blackwell (vLLM ``--quantization fp8``, ``--kv-cache-dtype fp8``); FP4
(NVFP4) needs Blackwell's FP4 tensor cores.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from hyperpod_dpd.catalogue.instances import InstanceSpec
from hyperpod_dpd.catalogue.models import PRECISION_BYTES, ModelSpec

DTYPES = tuple(PRECISION_BYTES)

_DENSE_SPEEDUP: Mapping[str, Mapping[str, float]] = MappingProxyType({
    "H100": MappingProxyType({"bf16": 1.0, "fp8": 2.0}),
    "H200": MappingProxyType({"bf16": 1.0, "fp8": 2.0}),
    "B200": MappingProxyType({"bf16": 1.0, "fp8": 2.0, "fp4": 4.0}),
    "B300": MappingProxyType({"bf16": 1.0, "fp8": 2.0, "fp4": 6.0}),
})


def supported(instance: InstanceSpec) -> tuple[str, ...]:
    """The precisions the instance's GPU runs natively."""
    gpu = instance.gpu
    if gpu is None:
        return ()
    return tuple(_DENSE_SPEEDUP.get(gpu.model, {"bf16": 1.0}))


def dense_speedup(instance: InstanceSpec, dtype: str) -> float:
    """Dense tensor-core throughput of ``dtype`` relative to BF16 on the instance's GPU."""
    gpu = instance.gpu
    table = _DENSE_SPEEDUP.get(gpu.model if gpu else "", {"bf16": 1.0})
    if dtype not in table:
        raise ValueError(precision_problem(instance, dtype) or f"{dtype} is not supported")
    return table[dtype]


def precision_problem(instance: InstanceSpec, dtype: str) -> str | None:
    """Why ``dtype`` cannot be served on ``instance``, or None."""
    if dtype not in PRECISION_BYTES:
        return f"unknown precision; known: {', '.join(DTYPES)}"
    if dtype not in supported(instance):
        gpu = instance.gpu.model if instance.gpu else "no GPU"
        return (f"{dtype} needs a GPU with {dtype.upper()} tensor cores (B200, B300); {instance.name} has {gpu}")
    return None


def served(model: ModelSpec, instance: InstanceSpec, *, weights: str = "bf16", kv: str = "bf16") -> ModelSpec:
    """``model`` at the given precisions, after checking that the instance's GPU runs them."""
    for dtype in (weights, kv):
        problem = precision_problem(instance, dtype)
        if problem:
            raise ValueError(problem)
    if (weights, kv) == (model.weight_dtype, model.kv_dtype):
        return model
    return model.with_precision(weights=weights, kv=kv)
