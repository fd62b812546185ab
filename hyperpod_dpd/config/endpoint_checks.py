"""Cross-field checks of a DPD endpoint (:class:`~hyperpod_dpd.config.endpoint_fields.EndpointFields`), on its own and
against the environment: the operator's CRD has no CEL rules, so bad combinations would otherwise surface only at
deploy time. :func:`endpoint_issues` returns errors, among them every choice the endpoint's image or operator release is
known not to run (hyperpod_dpd.config.endpoint_image); :func:`endpoint_warnings` returns valid but doubtful choices, which
may work; :func:`environment_warnings` gathers an environment's, each once and with its full field path."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.catalogue.limits import S3_KEY_MAX_BYTES, S3_PREFIX_MAX_BYTES
from hyperpod_dpd.catalogue.models import model_by_name
from hyperpod_dpd.catalogue.namespaces import DEFAULT_NAMESPACE, RESERVED_NAMESPACES
from hyperpod_dpd.catalogue.operator import (
    DPD_FIXED_ENVIRONMENT,
    DPD_ROLES,
    IEC_EXTENSION_FIELDS,
    KVAWARE_INVOCATION_PATHS,
    MANAGED_VLLM_FLAGS,
    PAYOFF_MIN_PARAMETERS_BILLION,
    PD_BUFFER_SIZE_VARIABLE,
    ROUTER_SERVICE_SUFFIX,
    supports,
)
from hyperpod_dpd.config.base import join
from hyperpod_dpd.config.capacity import ratio_issues, role_capacity_issues
from hyperpod_dpd.config.endpoint_autoscaling_checks import (
    autoscaling_issues,
    autoscaling_warnings,
    decode_issues,
    environment_autoscaling_warnings,
    server_issues,
)
from hyperpod_dpd.config.endpoint_cache import RELEASE_HINTS
from hyperpod_dpd.config.endpoint_fields import GENERATION_LENGTH as GENERATION_LENGTH  # re-exported
from hyperpod_dpd.config.endpoint_gateway_checks import gateway_environment_issues, gateway_issues
from hyperpod_dpd.config.endpoint_image import image_issues, image_warnings
from hyperpod_dpd.config.endpoint_kv_checks import kv_issues
from hyperpod_dpd.config.endpoint_overrides import overrides_issues
from hyperpod_dpd.config.endpoint_pods import (
    BLOCKING_EFFECTS,
    TOLERATIONS_RELEASE,
    GroupTaint,
    group_taints,
    iec_extensions,
    taint_text,
)
from hyperpod_dpd.config.endpoint_rollout import duplicate_name_issues, rollout_issues
from hyperpod_dpd.config.names import DNS_LABEL_MAX, is_unresolved
from hyperpod_dpd.config.network import public_cidrs_problem
from hyperpod_dpd.config.vllm_args import kv_format_issues
from hyperpod_dpd.errors import MISSING, Issue

if TYPE_CHECKING:
    from hyperpod_dpd.catalogue.operator import DpdRole
    from hyperpod_dpd.config.endpoint_fields import EndpointFields
    from hyperpod_dpd.config.hyperpod import InstanceGroup



def endpoint_issues(endpoint: EndpointFields, root: Any, path: str) -> Iterator[Issue]:
    """Errors; ``root`` is the environment (or ``None`` for an endpoint built in Python without one)."""
    yield from _local_issues(endpoint, path)
    yield from overrides_issues(endpoint, root, path)  # overrides: the CRD schema, before anything renders
    if root is not None:
        yield from _environment_issues(endpoint, root, path)


def operator_issues(endpoint: EndpointFields, operator: str, path: str, *,
                    setting: str = "operator.version") -> Iterator[Issue]:
    """Fields of later operators that ``operator`` (the release named by ``setting``) cannot render."""
    for field in iec_extensions(endpoint):
        introduced = IEC_EXTENSION_FIELDS[field.path].introduced
        if not supports(operator, introduced):
            yield Issue(join(path, field.key), field.value,
                        f'needs operator {introduced} or later ({setting} is "{operator}")'
                        f'{RELEASE_HINTS.get(field.key, "")}')


def managed_flag_issues(path: str, args: tuple[str, ...] | list[str]) -> Iterator[Issue]:
    """Free-form vLLM args must not set the flags the toolkit derives from typed fields."""
    for index, arg in enumerate(args):
        flag = arg.split("=", 1)[0]
        if flag in MANAGED_VLLM_FLAGS:
            yield Issue(join(path, index), arg,
                        f"is set by hyperpod-dpd ({', '.join(MANAGED_VLLM_FLAGS)} come from typed fields such as "
                        "tensor_parallel_size)")


# -- the endpoint on its own ---------------------------------------------------------------------------------------------

def _local_issues(e: EndpointFields, path: str) -> Iterator[Issue]:
    gpus = e.instance.gpu_count
    if e.tensor_parallel_size is not None:
        divisors = [d for d in range(1, gpus + 1) if gpus % d == 0]
        if e.tensor_parallel_size > gpus:
            yield Issue(join(path, "tensor_parallel_size"), e.tensor_parallel_size,
                        f"exceeds the {gpus} GPUs of {e.instance_type}; allowed: {divisors}")
        elif gpus % e.tensor_parallel_size:
            yield Issue(join(path, "tensor_parallel_size"), e.tensor_parallel_size,
                        f"must divide the {gpus} GPUs of {e.instance_type}; allowed: {divisors}")
    decode = list(decode_issues(e, path))
    yield from decode
    if not decode:  # the prefill:decode ratio, unless the decoders themselves are refused (root cause alone)
        yield from ratio_issues(e, path)
    if e.routing.strategy == "kvaware" and e.invocation_path.strip("/") not in KVAWARE_INVOCATION_PATHS:
        yield Issue(join(path, "invocation_path"), e.invocation_path,
                    "routing strategy 'kvaware' supports only the completions API; use '/completions' "
                    "(or 'v1/completions'), or another strategy for '/v1/chat/completions'")
    service = e.router_service_name
    if len(service) > DNS_LABEL_MAX:
        room = DNS_LABEL_MAX - len(ROUTER_SERVICE_SUFFIX) - GENERATION_LENGTH - 2
        yield Issue(join(path, "name"), e.name,
                    f"with namespace '{e.namespace}' the operator's router Service '{service}' would have "
                    f"{len(service)} characters (Service names allow {DNS_LABEL_MAX}); name and namespace "
                    f"may total at most {room} characters")
    prefill_image, decode_image = e.role_image("prefill"), e.role_image("decode")
    if prefill_image != decode_image:
        role, other = DPD_ROLES[::-1] if e.decode.image else DPD_ROLES
        yield Issue(join(path, f"{role}.image"), e.role_image(role),
                    f"must equal the {other} image ({e.role_image(other)}): prefiller and decoder must run the "
                    "same image (the IEC has one worker.image; LMCache and NIXL versions must match)")
    yield from _environment_variable_issues(e, path)
    yield from gateway_issues(e, path)  # routing.tier and gateway (endpoint_gateway_checks)
    yield from _s3_key_issues(e, path)
    yield from rollout_issues(e, path)
    yield from e.model_cache.issues(e.instance_type, join(path, "model_cache"))  # docs/cold-start.md
    for where, args in (("args", e.args), ("prefill.args", e.prefill.args), ("decode.args", e.decode.args)):
        yield from managed_flag_issues(join(path, where), args)
    yield from kv_format_issues(e, path)  # one KV format on both roles (config/vllm_args)
    yield from autoscaling_issues(e, path, decoder_refused=bool(decode))  # endpoint_autoscaling_checks
    if prefill_image == decode_image:  # one image (else refused above): what it cannot run is refused too
        yield from image_issues(e, path)
    gpu_memory = (e.instance.gpu.memory_gib if e.instance.gpu else 0) * 1024**3
    if e.pd_buffer_size >= gpu_memory:
        yield Issue(join(path, "pd_buffer_size"), e.pd_buffer_size,
                    f"must be smaller than one GPU's memory ({e.instance.gpu.memory_gib:g} GiB on "  # type: ignore[union-attr]
                    f"{e.instance_type}); it is allocated per tensor-parallel rank on the decoder")


def _s3_key_issues(e: EndpointFields, path: str) -> Iterator[Issue]:
    """S3 prefixes that no object key fits under (S3 keys have at most S3_KEY_MAX_BYTES of UTF-8, prefix included)."""
    prefixes: list[tuple[str, str, str]] = []  # (field, value as written, key prefix)
    if e.model.s3:
        prefixes.append(("model.s3.prefix", e.model.s3.prefix, e.model.s3.prefix))
    uri = e.tls.certificate_output_s3_uri if e.tls else None
    key = uri.removeprefix("s3://").partition("/")[2] if uri else ""
    if uri and not is_unresolved(key):  # a bucket known only at deploy time still has a literal key to measure
        prefixes.append(("tls.certificate_output_s3_uri", uri, key))
    for where, value, prefix in prefixes:
        size = len(prefix.encode("utf-8"))
        if size > S3_PREFIX_MAX_BYTES:
            yield Issue(join(path, where), value,
                        f"has a key prefix of {size:,} bytes (UTF-8); an S3 object key has at most "
                        f"{S3_KEY_MAX_BYTES:,} bytes, prefix included, so the prefix may have at most "
                        f"{S3_PREFIX_MAX_BYTES:,}")


def _environment_variable_issues(e: EndpointFields, path: str) -> Iterator[Issue]:
    for key, value in e.environment.items():
        where = join(join(path, "environment"), key)
        if key == PD_BUFFER_SIZE_VARIABLE:
            yield Issue(where, value, "set the typed field pd_buffer_size instead")
        elif key in DPD_FIXED_ENVIRONMENT and value != DPD_FIXED_ENVIRONMENT[key]:
            yield Issue(where, value,
                        f"must be '{DPD_FIXED_ENVIRONMENT[key]}' for DPD (hyperpod-dpd sets it; prefiller and "
                        "decoder must agree or KV cache lookups miss)")


# -- the endpoint in its environment -------------------------------------------------------------------------------------

def _environment_issues(e: EndpointFields, root: Any, path: str) -> Iterator[Issue]:
    if e.namespace == DEFAULT_NAMESPACE:
        yield Issue(join(path, "namespace"), e.given("namespace"),
                    f"an environment's endpoint needs a namespace of its own, such as 'llm-serving' (not "
                    f"{RESERVED_NAMESPACES[DEFAULT_NAMESPACE]}): its chart declares it, and one DPD endpoint may "
                    "use it")
    yield from _group_issues(e, root, path)
    problem = public_cidrs_problem(e.router.allowed_cidrs)
    if problem and getattr(root, "production", False):
        yield Issue(join(path, "router.allowed_cidrs"), list(e.router.allowed_cidrs),
                    f"a production router must admit known sources only: {problem}; list the load balancer's or "
                    "clients' ranges (e.g. the VPC CIDR)")
    yield from operator_issues(e, root.operator.version, path)
    yield from gateway_environment_issues(e, root, path)  # routing.tier: gateway (endpoint_gateway_checks)
    yield from server_issues(e, root, path)  # a trigger's Prometheus workspace against KEDA's role
    yield from kv_issues(e, root.operator.version, root, path)  # kv_cache: docs/kv-cache.md
    yield from _taint_issues(e, root, path)
    zone = e.topology.availability_zone
    if zone is not None and not root.network.is_gpu_zone(zone):
        yield Issue(join(path, "topology.availability_zone"), zone,
                    f"must be {root.network.gpu_zone_rule()}, the AZ of the prefill and decode groups"
                    f"{root.network.gpu_zone_form_hint()}")
    endpoints = list(root.endpoints)
    index = next((i for i, other in enumerate(endpoints) if other is e), len(endpoints))
    yield from duplicate_name_issues(e, endpoints[:index], path)
    for earlier, other in enumerate(endpoints[:index]):
        if other.name == e.name:
            yield Issue(join(path, "name"), e.name,
                        f"duplicate endpoint name (also endpoints[{earlier}]); names must be unique")
        elif other.namespace == e.namespace:
            yield Issue(join(path, "namespace"), e.namespace,
                        f"already holds endpoints[{earlier}] ({other.name}); one DPD endpoint per namespace, "
                        "because the operator labels pods only by DPD role, so the router chart's "
                        "PodDisruptionBudgets and NetworkPolicies cannot tell two endpoints apart")


def _group_issues(e: EndpointFields, root: Any, path: str) -> Iterator[Issue]:
    """Roles against the HyperPod groups; skipped while the groups themselves are invalid (root cause alone)."""
    if next(iter(root.hyperpod.issues(root, "hyperpod")), None) is not None:
        return
    groups: dict[str, InstanceGroup] = {g.name: g for g in root.hyperpod.instance_groups}
    for role in DPD_ROLES:
        config = e.role(role)
        if config.instance_group is None:
            yield from _role_only_issues(e, role, root.hyperpod.groups(role), path)
            continue
        where = join(path, f"{role}.instance_group")
        group = groups.get(config.instance_group)
        if group is None:
            yield Issue(where, config.instance_group,
                        f"is not an instance group of hyperpod.instance_groups; known: {', '.join(groups)}")
        elif group.role != role:
            yield Issue(where, config.instance_group, f"is a '{group.role}' group; a {role} role needs a '{role}' group")
        elif group.instance_type != e.instance_type:
            yield Issue(where, config.instance_group,
                        f"runs {group.instance_type}, but the endpoint's instance_type is {e.instance_type}")
        else:
            # per_node is 0 when tensor_parallel_size exceeds the instance's GPUs: reported by the local checks
            per_node = e.instance.gpu_count // e.gpus_per_pod
            nodes = math.ceil(config.replicas / per_node) if per_node else 0
            if group.parked:
                yield Issue(join(path, f"{role}.replicas"), config.replicas,
                            f"needs {_nodes(nodes)} of instance group '{group.name}', which is parked (count 0); set "
                            "the group's count, or remove the endpoint while the group is parked")
            else:  # replicas, then autoscaling.max_replicas, against count or autoscaling.max_nodes
                yield from role_capacity_issues(e, role, group, path)


def _role_only_issues(e: EndpointFields, role: DpdRole, groups: tuple[InstanceGroup, ...],
                      path: str) -> Iterator[Issue]:
    """A role placed by its role label alone runs on any group of that role: refused when every one is parked."""
    if groups and all(g.parked for g in groups):
        names = ", ".join(f"'{g.name}'" for g in groups)
        yield Issue(join(path, f"{role}.replicas"), e.role(role).replicas,
                    f"needs nodes of a {role} group, but every {role} instance group is parked (count 0): {names}; "
                    "set a group's count, or remove the endpoint while the groups are parked")


def _taint_issues(e: EndpointFields, root: Any, path: str) -> Iterator[Issue]:
    """Taints that keep the endpoint's pods off its instance groups: its tolerations must match every one of them."""
    operator = root.operator.version
    blocking = [t for t in group_taints(e, root.hyperpod) if t.taint.effect in BLOCKING_EFFECTS]
    where = join(path, "tolerations")
    if not supports(operator, TOLERATIONS_RELEASE):
        if blocking and not e.tolerations:  # a non-empty list is refused by operator_issues
            groups, one = _groups(blocking)
            yield Issue(where, MISSING if e.tolerations is None else [],
                        f"{groups} {'taints its' if one else 'taint their'} nodes, so the endpoint's pods need "
                        f'tolerations, which need operator {TOLERATIONS_RELEASE} or later (operator.version is '
                        f'"{operator}"); set operator.version to "{TOLERATIONS_RELEASE}" or later, or remove the taints')
        return
    if e.tolerations is None:
        return  # derived from these very taints
    missed = [t for t in blocking if not any(tol.tolerates(t.taint) for tol in e.tolerations)]
    if missed:
        yield Issue(where, [t.manifest() for t in e.tolerations],
                    f"does not tolerate the taints of {_groups(missed)[0]}, so those pods cannot schedule there; add "
                    "matching tolerations, or leave tolerations out to derive them from the groups' taints")


def _groups(taints: list[GroupTaint]) -> tuple[str, bool]:
    """``instance group 'p' (prefill: k=v:NoSchedule)`` or ``instance groups 'p' (...), 'd' (...)``; one group?"""
    by_group: dict[tuple[str, str], list[str]] = {}
    for item in taints:
        by_group.setdefault((item.group.name, item.role), []).append(taint_text(item.taint))
    described = ", ".join(f"'{name}' ({role}: {', '.join(texts)})" for (name, role), texts in by_group.items())
    one = len({name for name, _ in by_group}) == 1
    return f"instance group{'' if one else 's'} {described}", one


def _nodes(count: int) -> str:
    return "nodes" if count == 0 else "1 node" if count == 1 else f"{count} nodes"


# -- warnings ------------------------------------------------------------------------------------------------------------

def environment_warnings(root: Any) -> list[Issue]:
    """Every warning of environment ``root``, each once: its own (``root.warnings()``) and each endpoint's under
    ``endpoints[<i>]``. Printed by ``--check`` and ``python app.py``, and the CDK annotations of an app
    (hyperpod_dpd.infra.config_warnings)."""
    found = [*root.warnings(), *(w for i, e in enumerate(root.endpoints) for w in e.warnings(f"endpoints[{i}]")),
             *(w for i, e in enumerate(root.endpoints)
               for w in environment_autoscaling_warnings(e, root, f"endpoints[{i}]"))]
    return list(dict.fromkeys(found))  # Issue is a frozen dataclass: the same path and message count once


def endpoint_warnings(e: EndpointFields, path: str = "") -> list[Issue]:
    """Valid but doubtful choices, where the docs say DPD will not pay off or may not work: each may still run, so
    none is refused (what the image or the operator cannot run is an error of :func:`endpoint_issues`)."""
    found: list[Issue] = []
    known = model_by_name(e.model.name)
    billions = e.model.parameters_billion or (known.parameters / 1e9 if known else None)
    if billions is not None and billions < PAYOFF_MIN_PARAMETERS_BILLION:
        found.append(Issue("model.parameters_billion", billions,
                           f"DPD pays off for dense models of {PAYOFF_MIN_PARAMETERS_BILLION}B+ parameters; "
                           "a smaller model gains little over colocated serving"))
    elif known is not None and known.is_moe:
        found.append(Issue("model.name", e.model.name,
                           f"is a mixture-of-experts model ({known.active_parameters / 1e9:.0f}B active); the DPD "
                           "documentation expects little gain for MoE models (run 'hpdpd plan' to check)"))
    threshold = e.routing.threshold
    if e.max_model_len is not None and 0 < threshold and e.max_model_len < threshold:
        found.append(Issue("max_model_len", e.max_model_len,
                           f"is below routing.threshold ({threshold}): no prompt reaches the threshold, so no "
                           "request is ever disaggregated"))
    found.extend(autoscaling_warnings(e, ""))  # triggers over series that may not exist (endpoint_autoscaling_checks)
    found.extend(image_warnings(e, ""))  # kvaware and MultiProcess on an image that cannot run them: endpoint_issues
    # The router NetworkPolicy admits the VPC's addresses, where the operator's load balancer (and so a SageMaker
    # endpoint) sends from (k8s.router.load_balancer_cidrs), so a SageMaker endpoint needs no router.allowed_cidrs.
    problem = public_cidrs_problem(e.router.allowed_cidrs)
    if problem:  # production refuses it (_environment_issues)
        found.append(Issue("router.allowed_cidrs", list(e.router.allowed_cidrs),
                           f"the router NetworkPolicy admits the internet: {problem}; list the load balancer's or "
                           "clients' ranges (e.g. the VPC CIDR)"))
    return [Issue(join(path, w.path), w.value, w.message) for w in found]
