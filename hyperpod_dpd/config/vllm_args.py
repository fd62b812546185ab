"""vLLM flags in an endpoint's free-form args: the value each role runs with, and the flags both roles must agree on.

The operator appends a role's ``pdSpec.*Spec.args`` after ``worker.args`` (the CRD's ``prefillSpec.args``: "a flag
already in worker.args takes the per-role value"), and vLLM parses the command line with argparse, whose ``store``
action keeps the last occurrence (vllm-project/vllm ``vllm/engine/arg_utils.py`` ``EngineArgs.add_cli_args``;
docs.python.org/3/library/argparse.html#action). So a role runs with the last value of ``[*args, *role.args]``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from hyperpod_dpd.config.base import join
from hyperpod_dpd.errors import Issue

if TYPE_CHECKING:
    from hyperpod_dpd.catalogue.operator import DpdRole
    from hyperpod_dpd.config.endpoint_fields import EndpointFields

ROLES: tuple[DpdRole, DpdRole] = ("prefill", "decode")

# Flags that fix the KV cache's format. vLLM's NIXL connector hashes both into the handshake it refuses on a mismatch
# ("dtype": model_config.dtype, "cache_dtype": cache_config.cache_dtype; vllm-project/vllm
# vllm/distributed/kv_transfer/kv_connector/v1/nixl/metadata.py @ 02cfb53, compute_nixl_compatibility_hash). LMCache's
# PD transfer allocates the decoder's buffers in the prefiller's shape and dtype (its AllocRequest carries them) and no
# source read shows a conversion into the decoder's cache, so a mismatch is refused for every connector (fail safe).
KV_FORMAT_FLAGS = {"--kv-cache-dtype": "auto", "--dtype": "auto"}  # flag -> vLLM's default


def flag_values(argv: Sequence[str], flag: str, *, rest_of_line: bool = False) -> list[str]:
    """Every value ``flag`` is given in ``argv``, in order: the next word, ``flag=value``, or the word after it inside
    a shell command line (``sh -c "vllm serve ..."``; with ``rest_of_line``, all of that line after the flag)."""
    values: list[str] = []
    for index, part in enumerate(argv):
        if part == flag:
            if index + 1 < len(argv):
                values.append(argv[index + 1])
        elif part.startswith(flag + "="):
            values.append(part.split("=", 1)[1])
        elif flag in part:  # a shell command line: only whole flags, followed by a space or '='
            for rest in part.split(flag)[1:]:
                if rest[:1] in (" ", "="):
                    rest = rest[1:].lstrip()
                    values.append(rest if rest_of_line else _shell_word(rest))
    return values


def _shell_word(text: str) -> str:
    """The first word of a shell line, unquoted (``'fp8' --x`` -> ``fp8``)."""
    if text[:1] in ("'", '"'):
        end = text.find(text[0], 1)
        return text[1:end] if end > 0 else text[1:]
    return text.split(None, 1)[0] if text.strip() else ""


def last_flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value vLLM runs with: the last occurrence of ``flag``; None when it is absent."""
    values = flag_values(argv, flag)
    return values[-1] if values else None


def role_argv(e: EndpointFields, role: DpdRole) -> list[str]:
    """The vLLM args a role runs with: the shared ``args``, then the role's own."""
    return [*e.args, *e.role(role).args]


def kv_format_issues(e: EndpointFields, path: str) -> Iterator[Issue]:
    """Prefiller and decoder must hold the KV cache in one format: a KV-format flag whose values differ is refused."""
    for flag, default in KV_FORMAT_FLAGS.items():
        values = {role: last_flag_value(role_argv(e, role), flag) or default for role in ROLES}
        if values["prefill"] == values["decode"]:
            continue
        role = next(r for r in ROLES[::-1] if last_flag_value(e.role(r).args, flag) is not None)
        other: DpdRole = "prefill" if role == "decode" else "decode"
        index = max(i for i, arg in enumerate(e.role(role).args) if arg == flag or arg.startswith(flag + "=")
                    or (flag + " ") in arg or (flag + "=") in arg)
        yield Issue(join(join(path, f"{role}.args"), index), e.role(role).args[index],
                    f"sets {flag} {values[role]} on {role} while {other} runs {values[other]}"
                    f"{' (vLLM default)' if values[other] == default else ''}: prefiller and decoder must hold the KV "
                    f"cache in one format (vLLM's NIXL handshake refuses a dtype or cache_dtype mismatch; no source shows "
                    f"LMCache converting one into the other); set {flag} once in args, for both roles")
