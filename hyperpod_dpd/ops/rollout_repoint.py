"""The objects around the router that name one IEC generation, and how ``hpdpd rollout promote`` moves them to the
next: the optional Ingress and the router NetworkPolicy (both in the operator's namespace, named by
``hyperpod_dpd.config.endpoint_router``).

* Ingress ``<name>-<namespace>``: its backends name the generation's ``<iec>-<namespace>-routing-service`` (port 443);
  every backend that names a routing Service of one of the endpoint's generations (``<name>-<6 hex>-<namespace>
  -routing-service``) is re-pointed, and nothing else is touched. ``spec.rules`` is sent whole: a list without a
  merge key is replaced by a merge patch, not merged.
* Router NetworkPolicy ``<name>-<namespace>-router``: it selects the router pods by label (``router.router_pod_labels``
  or the assumed ``app=<iec>-<namespace>-router``). While two generations' routers run it must select both: the
  selector is widened to ``<key> In (<old>, <new>)`` (a LabelSelector's requirements are ANDed, so two label sets
  unite only where they differ in one key), and narrowed to the new router's labels once the old generation is gone.
  The worker policy (``<name>-dpd-workers``) selects by DPD role only, so it covers both generations already.

An object that does not exist (not configured, or not deployed yet) is skipped; one that exists but cannot be read
or patched stops the promote (a :class:`~hyperpod_dpd.ops.kube.KubeError`, exit 2) before anything is deleted. Every
patch carries the object's ``metadata.resourceVersion``: a concurrent change makes it fail (409) rather than be lost.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.catalogue.operator import ROUTER_SERVICE_SUFFIX, router_service
from hyperpod_dpd.config.endpoint_checks import GENERATION_LENGTH
from hyperpod_dpd.ops.kube import Kube, KubeError
from hyperpod_dpd.ops.workloads import get_ingress, get_network_policy, patch_ingress, patch_network_policy

Selector = Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class Exposure:
    """The live Ingress and router NetworkPolicy of an endpoint (None: absent)."""

    ingress: dict[str, Any] | None
    policy: dict[str, Any] | None


def _absent_is_none(read: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
    try:
        return read()
    except KubeError as exc:
        if exc.not_found:
            return None
        raise


def read_exposure(kube: Kube, endpoint: Any) -> Exposure:
    return Exposure(ingress=_absent_is_none(lambda: get_ingress(kube, name=endpoint.ingress_name)),
                    policy=_absent_is_none(lambda: get_network_policy(kube, name=endpoint.router_policy_name)))


def _version(document: Mapping[str, Any]) -> dict[str, Any]:
    version = (document.get("metadata") or {}).get("resourceVersion")
    return {"resourceVersion": str(version)} if version else {}


# -- the Ingress ---------------------------------------------------------------------------------------------------------

def _generation_service(endpoint: Any) -> re.Pattern[str]:
    return re.compile(rf"{re.escape(endpoint.name)}-[0-9a-f]{{{GENERATION_LENGTH}}}-{re.escape(endpoint.namespace)}"
                      rf"{re.escape(ROUTER_SERVICE_SUFFIX)}")


def _backends(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every ``backend.service`` of the spec (the default backend and each rule's paths)."""
    found = [(spec.get("defaultBackend") or {}).get("service")]
    for rule in spec.get("rules") or []:
        for path in ((rule or {}).get("http") or {}).get("paths") or []:
            found.append(((path or {}).get("backend") or {}).get("service"))
    return [s for s in found if isinstance(s, dict)]


def ingress_services(document: Mapping[str, Any] | None, endpoint: Any) -> set[str]:
    """The endpoint's routing Services the Ingress sends to."""
    pattern = _generation_service(endpoint)
    return {str(s.get("name")) for s in _backends((document or {}).get("spec") or {})
            if pattern.fullmatch(str(s.get("name", "")))}


def ingress_patch(document: Mapping[str, Any], endpoint: Any, iec: str) -> dict[str, Any] | None:
    """The patch that points every generation backend of the Ingress at ``iec``'s router Service (None: it does)."""
    spec = copy.deepcopy(dict(document.get("spec") or {}))
    pattern, target = _generation_service(endpoint), router_service(iec, endpoint.namespace)
    changed = False
    for backend in _backends(spec):
        if pattern.fullmatch(str(backend.get("name", ""))) and backend["name"] != target:
            backend["name"], changed = target, True
    if not changed:
        return None
    body = {key: spec[key] for key in ("rules", "defaultBackend") if key in spec}
    return {"metadata": _version(document), "spec": body}


def repoint_ingress(kube: Kube, endpoint: Any, document: Mapping[str, Any] | None, iec: str) -> bool:
    """Re-point the Ingress at ``iec`` (True: it was patched; False: absent or already there)."""
    patch = ingress_patch(document, endpoint, iec) if document is not None else None
    if patch is None:
        return False
    patch_ingress(kube, name=endpoint.ingress_name, body=patch)
    return True


# -- the router NetworkPolicy --------------------------------------------------------------------------------------------

def selects(selector: Selector, labels: Mapping[str, str]) -> bool:
    """Whether a LabelSelector matches a pod with ``labels`` (Kubernetes semantics: every requirement holds)."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for requirement in selector.get("matchExpressions") or []:
        key, operator = requirement.get("key"), requirement.get("operator")
        values = set(requirement.get("values") or ())
        holds = {"In": key in labels and labels[key] in values, "NotIn": key not in labels or labels[key] not in values,
                 "Exists": key in labels, "DoesNotExist": key not in labels}.get(str(operator), False)
        if not holds:
            return False
    return True


def widened(selector: Selector, labels: Mapping[str, str]) -> dict[str, Any] | None:
    """A selector that matches what ``selector`` matches and ``labels`` too: ``selector`` itself when it does
    already, the one-key ``In`` union when both are plain labels differing in one key, else None (it cannot be
    expressed as one LabelSelector)."""
    if selects(selector, labels):
        return dict(selector)
    live = dict(selector.get("matchLabels") or {})
    if selector.get("matchExpressions") or set(live) != set(labels):
        return None
    differing = [k for k in labels if live[k] != labels[k]]
    if len(differing) != 1:
        return None
    (key,) = differing
    same = {k: v for k, v in labels.items() if k != key}
    union: dict[str, Any] = {"matchExpressions": [{"key": key, "operator": "In",
                                                   "values": sorted({live[key], labels[key]})}]}
    if same:
        union["matchLabels"] = same
    return union


def _canonical(selector: Selector) -> tuple[Any, ...]:
    labels = tuple(sorted((selector.get("matchLabels") or {}).items()))
    expressions = tuple(sorted((str(r.get("key")), str(r.get("operator")), tuple(sorted(r.get("values") or ())))
                               for r in selector.get("matchExpressions") or []))
    return labels, expressions


def policy_selector(document: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(((document or {}).get("spec") or {}).get("podSelector") or {})


def selector_patch(document: Mapping[str, Any], wanted: Selector) -> dict[str, Any] | None:
    """The patch that makes the policy's ``podSelector`` exactly ``wanted`` (None: it is): labels it drops are
    nulled (a merge patch merges maps), expressions are replaced whole."""
    live = policy_selector(document)
    if _canonical(live) == _canonical(wanted):
        return None
    labels: dict[str, Any] = {k: None for k in (live.get("matchLabels") or {})}
    labels.update(wanted.get("matchLabels") or {})
    pod_selector = {"matchLabels": labels if wanted.get("matchLabels") else None,
                    "matchExpressions": list(wanted.get("matchExpressions") or []) or None}
    return {"metadata": _version(document), "spec": {"podSelector": pod_selector}}


def set_policy_selector(kube: Kube, endpoint: Any, document: Mapping[str, Any] | None, wanted: Selector) -> bool:
    """Patch the router policy's selector to ``wanted`` (True: patched; False: absent or already so)."""
    patch = selector_patch(document, wanted) if document is not None else None
    if patch is None:
        return False
    patch_network_policy(kube, name=endpoint.router_policy_name, body=patch)
    return True


def describe_selector(selector: Selector) -> str:
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    parts += [f"{r.get('key')} {r.get('operator')} ({','.join(r.get('values') or [])})"
              for r in selector.get("matchExpressions") or []]
    return ", ".join(parts) or "every pod"


def unwidenable(endpoint: Any, selector: Selector, iec: str) -> str:
    """Why a promote cannot widen the router policy's ``selector`` to ``iec``'s router (``widened`` found none)."""
    return (f"the router NetworkPolicy {endpoint.router_policy_name} selects "
            f"{describe_selector(selector)}, which cannot be widened to the new router's "
            f"{describe_selector({'matchLabels': endpoint.router_pod_labels_for(iec)})} in one selector (was it "
            "edited by hand?): deploy the endpoints chart or fix the policy, then promote again")
