"""What the router chart adds around the operator's router (``endpoints[].router``), and the names of those objects.

The names are shared by the chart that renders the objects (``k8s/router.py``) and by ``hpdpd rollout``, which
re-points them from one IEC generation to the next (``hyperpod_dpd/ops/rollout_repoint.py``); this module imports nothing of
cdk8s, so the operations commands can use it without starting jsii.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from hyperpod_dpd.config.base import Cidr, Model
from hyperpod_dpd.config.names import DomainName, Labels, Namespace, SubdomainName


class IngressConfig(Model):
    """Expose the router outside the cluster through an Ingress (TLS terminated at the load balancer)."""

    host: DomainName
    class_name: SubdomainName = "alb"
    scheme: Literal["internal", "internet-facing"] = "internal"
    certificate_arn: str | None = Field(default=None, pattern=r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[A-Za-z0-9-]+$")
    tls_secret_name: SubdomainName | None = None
    backend_protocol: Literal["HTTP", "HTTPS"] = "HTTP"

    @model_validator(mode="after")
    def _tls(self) -> IngressConfig:
        if self.class_name == "alb" and self.tls_secret_name:
            raise ValueError("an 'alb' Ingress takes its certificate from ACM: use 'certificate_arn', not 'tls_secret_name'")
        if self.class_name != "alb" and not self.tls_secret_name:
            raise ValueError(f"a '{self.class_name}' Ingress needs 'tls_secret_name' (a kubernetes.io/tls Secret)")
        if self.class_name != "alb" and self.certificate_arn:
            raise ValueError("'certificate_arn' applies only to class_name 'alb'")
        return self


class RouterConfig(Model):
    """What the router chart adds around the operator's router (client Service, NetworkPolicies, PDBs, Ingress)."""

    client_namespaces: tuple[Namespace, ...] = ()
    network_policy: bool = True
    # Sources outside the cluster's pods, e.g. the VPC CIDR for an Ingress or the operator's load balancer.
    allowed_cidrs: tuple[Cidr, ...] = ()
    router_pod_labels: Labels | None = None
    ingress: IngressConfig | None = None

    @model_validator(mode="after")
    def _ingress_sources(self) -> RouterConfig:
        if self.ingress and self.network_policy and not self.allowed_cidrs:
            raise ValueError("an Ingress reaches the router from the load balancer's addresses, which the router "
                             "NetworkPolicy blocks: list them (e.g. the VPC CIDR) in 'allowed_cidrs'")
        return self


# -- names of the chart's objects (one per endpoint; they keep their names across IEC generations) ----------------------

def ingress_name(endpoint: str, namespace: str) -> str:
    """The Ingress ``<name>-<namespace>`` (in the operator's namespace, beside the router Services it points at)."""
    return f"{endpoint}-{namespace}"


def router_policy_name(endpoint: str, namespace: str) -> str:
    """The router NetworkPolicy ``<name>-<namespace>-router`` (in the operator's namespace, where the routers run)."""
    return f"{endpoint}-{namespace}-router"


def worker_policy_name(endpoint: str) -> str:
    """The worker NetworkPolicy ``<name>-dpd-workers`` (in the endpoint's namespace; it selects by DPD role only, so
    it covers every generation's workers)."""
    return f"{endpoint}-dpd-workers"


def default_router_pod_labels(resource_name: str, namespace: str) -> dict[str, str]:
    """ASSUMPTION (undocumented): the router pods of an IEC carry ``app=<iec-name>-<iec-namespace>-router``.

    The same assumption as ``hyperpod_dpd.k8s.defaults.router_pod_labels`` (tests/k8s/test_router.py checks that
    they agree): the docs name only the router Deployment (``<iec-name>-<iec-namespace>-router-...``). Check with
    ``kubectl get pods -n hyperpod-inference-system --show-labels`` and override with ``router.router_pod_labels``.
    """
    return {"app": f"{resource_name}-{namespace}-router"}
