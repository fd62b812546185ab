"""EndpointRouter: what a team needs around the router the operator creates for a DPD endpoint.

The operator already creates, per IEC (SageMaker HyperPod DPD documentation): the prefill and decode Deployments and pods, the router
Deployment and its ``<iec>-<namespace>-routing-service`` Service in ``hyperpod-inference-system``, the load balancer
of ``spec.loadBalancer`` and, with ``endpointName``, a SageMaker endpoint. This construct adds only what is missing:

* ``ClientService``: a stable ``ExternalName`` Service ``<name>`` in the endpoint's namespace that points at the
  operator's router Service, so clients keep one address while the IEC name changes with its generation;
* ``RouterPolicy`` / ``WorkerPolicy``: NetworkPolicies admitting only the declared client namespaces to the router,
  and only the router, the other DPD role and metrics collection to the prefill and decode pods;
* ``PrefillBudget`` / ``DecodeBudget``: PodDisruptionBudgets so a node drain takes at most ``max_unavailable`` pods
  of a role at a time;
* ``Ingress`` (optional): exposure of the router outside the cluster with TLS at the load balancer.
"""

from __future__ import annotations

import json

from cdk8s_plus_35 import k8s
from constructs import Construct

from hyperpod_dpd.catalogue.operator import INFERENCE_NAMESPACE, OBSERVABILITY_NAMESPACE, ROUTER_PORT
from hyperpod_dpd.config.endpoints import DpdRole, EndpointConfig
from hyperpod_dpd.k8s import defaults


def _namespace_peer(namespace: str) -> k8s.NetworkPolicyPeer:
    return k8s.NetworkPolicyPeer(
        namespace_selector=k8s.LabelSelector(match_labels={defaults.NAMESPACE_NAME_LABEL: namespace}))


def _dpd_pods() -> k8s.LabelSelector:
    return k8s.LabelSelector(match_expressions=[k8s.LabelSelectorRequirement(
        key=defaults.DPD_ROLE_LABEL, operator="In", values=list(defaults.DPD_ROLES))])


class EndpointRouter(Construct):
    """Client Service, NetworkPolicies, PodDisruptionBudgets and optional Ingress of one DPD endpoint.

    Operator labels relied on: ``inference.sagemaker.aws.amazon.com/dpd-role`` on prefill and decode pods
    (documented), and ``app=<iec>-<namespace>-router`` on router pods (assumed; see ``defaults.router_pod_labels``).
    Because the documented pod label does not name the endpoint, the environment allows one DPD endpoint per
    namespace, so these selectors never span two endpoints.
    """

    def __init__(self, scope: Construct, id: str, *, endpoint: EndpointConfig) -> None:
        super().__init__(scope, id)
        self.endpoint = endpoint
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
        return dict(self.endpoint.router.router_pod_labels
                    or defaults.router_pod_labels(self.endpoint.resource_name, self.endpoint.namespace))

    def _router_policy(self) -> k8s.KubeNetworkPolicy:
        e = self.endpoint
        peers = [_namespace_peer(ns) for ns in e.client_namespaces]
        peers += [k8s.NetworkPolicyPeer(ip_block=k8s.IpBlock(cidr=cidr)) for cidr in e.router.allowed_cidrs]
        return k8s.KubeNetworkPolicy(
            self, "RouterPolicy",
            metadata=k8s.ObjectMeta(name=f"{e.name}-{e.namespace}-router", namespace=INFERENCE_NAMESPACE),
            spec=k8s.NetworkPolicySpec(
                pod_selector=k8s.LabelSelector(match_labels=self.router_pod_labels),
                policy_types=["Ingress"],
                ingress=[k8s.NetworkPolicyIngressRule(
                    from_=peers,
                    ports=[k8s.NetworkPolicyPort(port=k8s.IntOrString.from_number(ROUTER_PORT), protocol="TCP")])]))

    def _worker_policy(self) -> k8s.KubeNetworkPolicy:
        e = self.endpoint
        # The router pods' labels are an assumption, so the operator's namespace is admitted as a whole; prefill <->
        # decode admits LMCache/NIXL control traffic (the RDMA data path over EFA is not IP traffic).
        peers = [_namespace_peer(INFERENCE_NAMESPACE), k8s.NetworkPolicyPeer(pod_selector=_dpd_pods()),
                 _namespace_peer(OBSERVABILITY_NAMESPACE)]
        peers += [k8s.NetworkPolicyPeer(ip_block=k8s.IpBlock(cidr=cidr)) for cidr in e.router.allowed_cidrs]
        return k8s.KubeNetworkPolicy(
            self, "WorkerPolicy",
            metadata=k8s.ObjectMeta(name=f"{e.name}-dpd-workers", namespace=e.namespace),
            spec=k8s.NetworkPolicySpec(pod_selector=_dpd_pods(), policy_types=["Ingress"],
                                       ingress=[k8s.NetworkPolicyIngressRule(from_=peers)]))

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
            annotations = {
                "alb.ingress.kubernetes.io/scheme": ingress.scheme,
                "alb.ingress.kubernetes.io/target-type": "ip",
                "alb.ingress.kubernetes.io/listen-ports": json.dumps([{"HTTPS": 443}]),
                "alb.ingress.kubernetes.io/backend-protocol": ingress.backend_protocol,
                "alb.ingress.kubernetes.io/healthcheck-path": e.health_check_path,
                # One load balancer per endpoint that survives a new IEC generation (only the backend changes).
                "alb.ingress.kubernetes.io/group.name": f"hpdpd-{e.namespace}-{e.name}",
            }
            if ingress.certificate_arn:
                annotations["alb.ingress.kubernetes.io/certificate-arn"] = ingress.certificate_arn
        backend = k8s.IngressBackend(service=k8s.IngressServiceBackend(
            name=e.router_service_name, port=k8s.ServiceBackendPort(number=ROUTER_PORT)))
        return k8s.KubeIngress(
            self, "Ingress",
            metadata=k8s.ObjectMeta(name=f"{e.name}-{e.namespace}", namespace=INFERENCE_NAMESPACE,
                                    annotations=annotations or None),
            spec=k8s.IngressSpec(
                ingress_class_name=ingress.class_name,
                tls=[tls],
                rules=[k8s.IngressRule(host=ingress.host, http=k8s.HttpIngressRuleValue(paths=[
                    k8s.HttpIngressPath(path="/", path_type="Prefix", backend=backend)]))]))
