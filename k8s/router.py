"""EndpointRouter: what a team needs around the router the operator creates for a DPD endpoint.

The operator already creates, per IEC (SageMaker HyperPod DPD documentation): the prefill and decode Deployments and pods, the router
Deployment and its ``<iec>-<namespace>-routing-service`` Service in ``hyperpod-inference-system``, the load balancer
of ``spec.loadBalancer`` and, with ``endpointName``, a SageMaker endpoint. This construct adds only what is missing:

* ``ClientService``: a stable ``ExternalName`` Service ``<name>`` in the endpoint's namespace that points at the
  operator's router Service, so clients keep one address while the IEC name changes with its generation;
* ``RouterPolicy`` / ``WorkerPolicy``: NetworkPolicies (ingress and egress) admitting exactly the flows of a DPD
  endpoint: clients and the load balancer to the router's container port, the prefill workers' transfer reports to the
  router, the router to the workers, prefill <-> decode KV side channels, metrics collection, DNS and HTTPS out
  (docs/endpoints.md, "Network isolation", has the table with the source of each port);
* ``PrefillBudget`` / ``DecodeBudget``: PodDisruptionBudgets so a node drain takes at most ``max_unavailable`` pods
  of a role at a time;
* ``Ingress`` (optional): exposure of the router outside the cluster with TLS at the load balancer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from cdk8s_plus_35 import k8s
from constructs import Construct

from hyperpod_dpd.catalogue.operator import INFERENCE_NAMESPACE, OBSERVABILITY_NAMESPACE, ROUTER_PORT
from hyperpod_dpd.config.endpoint_router import worker_policy_name
from hyperpod_dpd.config.endpoints import DpdRole, EndpointConfig
from hyperpod_dpd.config.network import NetworkConfig
from hyperpod_dpd.k8s import defaults

ALB_DEREGISTRATION_MAX = 3600  # botocore elbv2 TargetGroupAttribute: "The range is 0-3600 seconds"


def _namespace_peer(namespace: str, pods: k8s.LabelSelector | None = None) -> k8s.NetworkPolicyPeer:
    """The pods of a namespace (all of them, or those ``pods`` selects)."""
    return k8s.NetworkPolicyPeer(
        namespace_selector=k8s.LabelSelector(match_labels={defaults.NAMESPACE_NAME_LABEL: namespace}), pod_selector=pods)


def _dpd_pods(*roles: DpdRole) -> k8s.LabelSelector:
    return k8s.LabelSelector(match_expressions=[k8s.LabelSelectorRequirement(
        key=defaults.DPD_ROLE_LABEL, operator="In", values=list(roles or defaults.DPD_ROLES))])


def _not_dpd_pods() -> k8s.LabelSelector:
    """Pods without the DPD role label: a client namespace's clients, not the workers that may share it."""
    return k8s.LabelSelector(match_expressions=[k8s.LabelSelectorRequirement(
        key=defaults.DPD_ROLE_LABEL, operator="DoesNotExist")])


def _tcp(*ports: int) -> list[k8s.NetworkPolicyPort]:
    return [k8s.NetworkPolicyPort(port=k8s.IntOrString.from_number(p), protocol="TCP") for p in ports]


def _common_egress() -> list[k8s.NetworkPolicyEgressRule]:
    """DNS to CoreDNS and HTTPS anywhere (API server, S3, STS, metrics backends), and the observability add-on."""
    dns = _namespace_peer(defaults.DNS_NAMESPACE, k8s.LabelSelector(match_labels=dict(defaults.DNS_POD_LABELS)))
    return [
        k8s.NetworkPolicyEgressRule(to=[dns], ports=[
            k8s.NetworkPolicyPort(port=k8s.IntOrString.from_number(defaults.DNS_PORT), protocol=protocol)
            for protocol in ("UDP", "TCP")]),
        k8s.NetworkPolicyEgressRule(to=[k8s.NetworkPolicyPeer(ip_block=k8s.IpBlock(cidr=defaults.ANYWHERE))],
                                    ports=_tcp(defaults.HTTPS_PORT)),
        k8s.NetworkPolicyEgressRule(to=[_namespace_peer(OBSERVABILITY_NAMESPACE)]),
    ]


def alb_deregistration_seconds(endpoint: EndpointConfig) -> int:
    """The ALB's deregistration delay: the rollout drain, within the ALB's 0-3600 s (3600 when the drain is unknown,
    so a stream is cut as late as the ALB allows)."""
    drain = endpoint.drain_seconds
    return ALB_DEREGISTRATION_MAX if drain is None else min(drain, ALB_DEREGISTRATION_MAX)


def load_balancer_cidrs(network: NetworkConfig) -> tuple[str, ...]:
    """The VPC CIDR, where the operator's load balancer (and an Ingress's ALB) has its addresses.

    Not the GPU subnet's secondary CIDR: HyperPod nodes and their pods live there, and no load balancer does.
    """
    return (network.create.cidr,) if network.create else (network.existing.cidr,) if network.existing else ()


class EndpointRouter(Construct):
    """Client Service, NetworkPolicies, PodDisruptionBudgets and optional Ingress of one DPD endpoint.

    Operator labels relied on: ``inference.sagemaker.aws.amazon.com/dpd-role`` on prefill and decode pods
    (documented), and ``app=<iec>-<namespace>-router`` on router pods (assumed; see ``defaults.router_pod_labels``).
    The objects keep their names across IEC generations; ``hpdpd rollout promote`` re-points the Ingress backend and
    the router policy's selector to the new generation before it deletes the old one.
    Because the documented pod label does not name the endpoint, the environment allows one DPD endpoint per
    namespace, so these selectors never span two endpoints.

    ``load_balancer_cidrs`` are admitted to the router's container port besides ``router.allowed_cidrs``: the VPC
    CIDR, where the operator's load balancer sends from (:func:`load_balancer_cidrs` of the environment's network).
    """

    def __init__(self, scope: Construct, id: str, *, endpoint: EndpointConfig,
                 load_balancer_cidrs: Sequence[str] = ()) -> None:
        super().__init__(scope, id)
        self.endpoint = endpoint
        self.external_cidrs = tuple(dict.fromkeys((*load_balancer_cidrs, *endpoint.router.allowed_cidrs)))
        e = endpoint
        self.client_service = k8s.KubeService(
            self, "ClientService",
            metadata=k8s.ObjectMeta(name=e.name, namespace=e.namespace),
            spec=k8s.ServiceSpec(
                type="ExternalName", external_name=e.router_host,
                ports=[k8s.ServicePort(name="http", port=ROUTER_PORT, protocol="TCP")]))
        self.router_policy: k8s.KubeNetworkPolicy | None = None
        self.worker_policy: k8s.KubeNetworkPolicy | None = None
        if e.router.network_policy:
            self.router_policy = self._router_policy()
            self.worker_policy = self._worker_policy()
        self.prefill_budget = self._budget("prefill", "PrefillBudget")
        self.decode_budget = self._budget("decode", "DecodeBudget")
        self.ingress = self._ingress() if e.router.ingress else None

    @property
    def router_pod_labels(self) -> dict[str, str]:
        """The configured generation's router pods (``hpdpd rollout promote`` widens the policy to two generations'
        routers while both run, then narrows it back to exactly this)."""
        return self.endpoint.router_pod_labels_for(self.endpoint.resource_name)

    def _router_policy(self) -> k8s.KubeNetworkPolicy:
        """Router pods: clients (the client namespaces' pods other than DPD workers) and the load balancer on the
        container port, the endpoint's prefill pods on every port (their PD proxy reports, on a port the operator does
        not document), every worker on the LMCache controller port with kvaware, metrics collection; out to the
        endpoint's workers, DNS, HTTPS and the observability add-on."""
        e = self.endpoint
        # the workers share the endpoint's namespace, the default client namespace, but never call the router's API
        clients = [_namespace_peer(ns, _not_dpd_pods()) for ns in e.client_namespaces]
        clients += [k8s.NetworkPolicyPeer(ip_block=k8s.IpBlock(cidr=cidr)) for cidr in self.external_cidrs]
        ingress = [
            k8s.NetworkPolicyIngressRule(from_=clients, ports=_tcp(defaults.ROUTER_CONTAINER_PORT)),
            # the LMCache senders' "transfer done" reports: every port, the operator's pd_proxy_port is undocumented
            # and a dropped one stalls the prefiller instead of failing (defaults.ROUTER_PD_PROXY_PORT)
            k8s.NetworkPolicyIngressRule(from_=[_namespace_peer(e.namespace, _dpd_pods("prefill"))]),
        ]
        if e.routing.strategy == "kvaware":
            ingress.append(k8s.NetworkPolicyIngressRule(from_=[_namespace_peer(e.namespace, _dpd_pods())],
                                                        ports=_tcp(defaults.LMCACHE_CONTROLLER_PORT)))
        ingress.append(k8s.NetworkPolicyIngressRule(from_=[_namespace_peer(OBSERVABILITY_NAMESPACE)]))
        return k8s.KubeNetworkPolicy(
            self, "RouterPolicy",
            metadata=k8s.ObjectMeta(name=e.router_policy_name, namespace=INFERENCE_NAMESPACE),
            spec=k8s.NetworkPolicySpec(
                pod_selector=k8s.LabelSelector(match_labels=self.router_pod_labels),
                policy_types=["Ingress", "Egress"],
                ingress=ingress,
                egress=[k8s.NetworkPolicyEgressRule(to=[_namespace_peer(e.namespace, _dpd_pods())]), *_common_egress()]))

    def _worker_policy(self) -> k8s.KubeNetworkPolicy:
        """Prefill and decode pods: the router, each other and metrics collection on any port; out to each other,
        the operator's namespace, DNS, HTTPS and the observability add-on.

        The router pods' labels are an assumption, so the operator's namespace is the router's peer here: a wrong
        guess must not cut the router off its workers, nor the prefillers off the router. Between prefill and decode,
        and from the workers to the operator's namespace, every port is open: the LMCache/NIXL side-channel ports (one
        per tensor-parallel rank) and the PD proxy port are set by the operator and undocumented, and a blocked
        report stalls the prefiller (defaults.ROUTER_PD_PROXY_PORT). The router policy, when its labels match, is what
        narrows the workers' traffic to the router (prefill on every port, decode only on the kvaware controller port).
        """
        e = self.endpoint
        workers = k8s.NetworkPolicyPeer(pod_selector=_dpd_pods())
        return k8s.KubeNetworkPolicy(
            self, "WorkerPolicy",
            metadata=k8s.ObjectMeta(name=worker_policy_name(e.name), namespace=e.namespace),
            spec=k8s.NetworkPolicySpec(
                pod_selector=_dpd_pods(), policy_types=["Ingress", "Egress"],
                ingress=[k8s.NetworkPolicyIngressRule(from_=[_namespace_peer(INFERENCE_NAMESPACE), workers,
                                                             _namespace_peer(OBSERVABILITY_NAMESPACE)])],
                egress=[k8s.NetworkPolicyEgressRule(to=[workers]),
                        k8s.NetworkPolicyEgressRule(to=[_namespace_peer(INFERENCE_NAMESPACE)]),
                        *_common_egress()]))

    def _budget(self, role: DpdRole, id: str) -> k8s.KubePodDisruptionBudget:
        e = self.endpoint
        return k8s.KubePodDisruptionBudget(
            self, id,
            metadata=k8s.ObjectMeta(name=f"{e.name}-{role}", namespace=e.namespace),
            spec=k8s.PodDisruptionBudgetSpec(
                max_unavailable=k8s.IntOrString.from_number(e.role(role).max_unavailable),
                selector=k8s.LabelSelector(match_labels={defaults.DPD_ROLE_LABEL: role})))

    def _ingress(self) -> k8s.KubeIngress:
        e = self.endpoint
        ingress = e.router.ingress
        assert ingress is not None  # noqa: S101 - called only when configured
        annotations: dict[str, str] = {}
        tls = k8s.IngressTls(hosts=[ingress.host], secret_name=ingress.tls_secret_name)
        if ingress.class_name == "alb":
            # Keys, values and defaults: kubernetes-sigs/aws-load-balancer-controller @ 00175c1e
            # docs/guide/ingress/annotations.md (group.name: at most 63 characters of a-z, 0-9, '-' and '.').
            annotations = {
                "alb.ingress.kubernetes.io/scheme": ingress.scheme,
                "alb.ingress.kubernetes.io/target-type": "ip",
                "alb.ingress.kubernetes.io/listen-ports": json.dumps([{"HTTPS": 443}]),
                "alb.ingress.kubernetes.io/backend-protocol": ingress.backend_protocol,
                "alb.ingress.kubernetes.io/healthcheck-path": e.health_check_path,
                # One load balancer per endpoint that survives a new IEC generation (only the backend changes).
                "alb.ingress.kubernetes.io/group.name": f"hpdpd-{e.namespace}-{e.name}",
                # When `rollout promote` re-points the backend, the old router's targets drain for this long before
                # the ALB closes their connections (default 300 s, range 0-3600: botocore elbv2 TargetGroupAttribute
                # deregistration_delay.timeout_seconds; annotation: kubernetes-sigs/aws-load-balancer-controller
                # @00175c1 docs/guide/ingress/annotations.md, target-group-attributes): as long as the rollout drain.
                "alb.ingress.kubernetes.io/target-group-attributes":
                    f"deregistration_delay.timeout_seconds={alb_deregistration_seconds(e)}",
            }
            if ingress.certificate_arn:
                annotations["alb.ingress.kubernetes.io/certificate-arn"] = ingress.certificate_arn
        backend = k8s.IngressBackend(service=k8s.IngressServiceBackend(
            name=e.router_service_name, port=k8s.ServiceBackendPort(number=ROUTER_PORT)))
        return k8s.KubeIngress(
            self, "Ingress",
            metadata=k8s.ObjectMeta(name=e.ingress_name, namespace=INFERENCE_NAMESPACE,
                                    annotations=annotations or None),
            spec=k8s.IngressSpec(
                ingress_class_name=ingress.class_name,
                tls=[tls],
                rules=[k8s.IngressRule(host=ingress.host, http=k8s.HttpIngressRuleValue(paths=[
                    k8s.HttpIngressPath(path="/", path_type="Prefix", backend=backend)]))]))
