"""HyperPodDpdPlatform: one environment's whole DPD platform from one typed configuration, for any CDK app.

The project's own stages split an environment into three stacks (network, platform, endpoints) with the
functions below; a consumer gets the same resources in the scope of its choice with one construct::

    config = load_environment("dev")                 # or parse_environment({...}, name="dev", ...)
    HyperPodDpdPlatform(stack, "Dpd", config=config)
    apply_guardrails(app)                            # cdk-nag AwsSolutions + the project's own rules

Both paths build the resources through :func:`build_platform` and :func:`build_endpoints`, so they cannot drift
apart. Construct ids inside them are part of the logical ids of deployed resources: do not rename them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
import cdk8s
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra.buckets import access_logs_bucket
from hyperpod_dpd.infra.checks_role import ChecksRole, ChecksRoleGrants, CheckTargets
from hyperpod_dpd.infra.checks_runner import ChecksRunner
from hyperpod_dpd.infra.config_warnings import annotate_warnings
from hyperpod_dpd.infra.efa_network import EfaNetwork
from hyperpod_dpd.infra.eks_cluster import HyperPodEksCluster
from hyperpod_dpd.infra.feature_flags import FEATURE_FLAGS
from hyperpod_dpd.infra.guardrails.stateful import retain_stateful_resources
from hyperpod_dpd.infra.hyperpod_cluster import HyperPodCluster
from hyperpod_dpd.infra.hyperpod_dependencies import HyperPodDependencies
from hyperpod_dpd.infra.inference_operator import InferenceOperator, ObservabilityOptions
from hyperpod_dpd.infra.monitoring import DpdMonitoring, build_monitoring
from hyperpod_dpd.infra.operations_access import OperationsAccess, bind_namespace
from hyperpod_dpd.infra.registries import node_registries
from hyperpod_dpd.k8s.charts import EndpointChart, add_environment_charts, add_namespace_charts


def removal_policy(config: EnvironmentConfig) -> cdk.RemovalPolicy:
    return cdk.RemovalPolicy.RETAIN if config.removal_policy == "retain" else cdk.RemovalPolicy.DESTROY


def availability_zones(config: EnvironmentConfig) -> list[str]:
    """The availability zone *names* the configuration gives (created VPC's zones, or the adopted subnets' zones, and
    the GPU zone when it is a name): a GPU zone given as an AZ ID is not a name, and the context below holds names."""
    return list(config.network.availability_zones)


def availability_zone_context(*configs: EnvironmentConfig) -> dict[str, list[str]]:
    """CDK context that answers the availability-zone lookup of each environment's account and Region from its
    configuration, so synthesis never needs AWS credentials or a ``cdk.context.json`` entry.

    Environments that share an account and Region contribute the union of their zones. Context given on the
    command line or in ``cdk.context.json`` takes precedence (a real lookup stays authoritative).
    """
    context: dict[str, set[str]] = {}
    for config in configs:
        key = f"availability-zones:account={config.account}:region={config.region}"
        context.setdefault(key, set()).update(availability_zones(config))
    return {key: sorted(zones) for key, zones in context.items()}


def build_network(scope: Construct, *, config: EnvironmentConfig) -> EfaNetwork:
    """The environment's EFA network (created or adopted) as the child ``Network`` of ``scope``, and with a trust
    (``config.checks_role_trust``) the pipeline's checks role next to it (``ChecksRole``, ``network.checks_role``): the
    network is deployed before the pipeline's first preflight, the platform only after it (infra/checks_role.py)."""
    network = EfaNetwork(
        scope, "Network",
        gpu_availability_zone=config.network.gpu_availability_zone,
        create=config.network.create,
        existing=config.network.existing,
        removal_policy=removal_policy(config),
    )
    trusted = config.checks_role_trust
    if trusted is not None:
        network.checks_role = ChecksRole(scope, "ChecksRole", role_name=config.checks_role_name,
                                         trusted_role_arn=trusted, targets=CheckTargets.of(config))
    return network


@dataclass(frozen=True)
class PlatformResources:
    """What :func:`build_platform` created: EKS, the HyperPod dependencies, the HyperPod cluster and the operator."""

    access_logs: s3.Bucket
    eks: HyperPodEksCluster
    hyperpod_dependencies: HyperPodDependencies
    hyperpod: HyperPodCluster
    inference_operator: InferenceOperator
    monitoring: DpdMonitoring | None = None  # the DPD alerts (infra/monitoring.py), with endpoints only
    operations: OperationsAccess | None = None  # the operations roles' access (infra/operations_access.py)
    checks_role: ChecksRole | None = None  # the pipeline's checks role (in the network's scope), with a trust only
    checks_runner: ChecksRunner | None = None  # the checks runner in the VPC (infra/checks_runner.py), with endpoints


def build_platform(scope: Construct, *, config: EnvironmentConfig, network: EfaNetwork) -> PlatformResources:
    """EKS, the HyperPod dependencies chart, the HyperPod cluster and the inference operator, as children of ``scope``;
    the DPD alerts with endpoints; the checks runner (:meth:`EnvironmentConfig.with_checks_role` or
    :meth:`EnvironmentConfig.with_checks_runner`, with endpoints) and, for the checks role :func:`build_network` made,
    its grants on the runner and on this stack's outputs (``ChecksRoleGrants``); the operations access of every
    operations role (``config.operations_roles``, the runner's role among them)."""
    policy = removal_policy(config)
    logs = access_logs_bucket(scope, "AccessLogs", removal_policy=policy)
    eks_cfg, hp_cfg = config.eks, config.hyperpod
    eks_cluster = HyperPodEksCluster(
        scope, "Eks",
        vpc=network.vpc,
        subnets=network.eks_subnets,
        cluster_name=eks_cfg.cluster_name,
        version=eks_cfg.version,
        security_group=network.efa_security_group,
        endpoint_access=eks_cfg.endpoint_access,
        public_access_cidrs=eks_cfg.public_access_cidrs,
        admin_principals=eks_cfg.admin_principals,
        logging=eks_cfg.logging,
        system_node_group=eks_cfg.system_node_group,
        addon_versions=eks_cfg.addon_versions,  # overrides; the construct pins the rest from the catalogue
        removal_policy=policy,
        existing=eks_cfg.existing,  # adopt that cluster instead of creating one
    )
    chart = hp_cfg.dependencies_chart
    dependencies = HyperPodDependencies(
        scope, "HyperPodDependencies",
        cluster=eks_cluster.cluster,
        region=config.region,
        gpu_instance_types=[g.instance_type for g in hp_cfg.instance_groups if g.is_gpu],
        repository=chart.repository,
        local_path=config.resolve_path(chart.local_path) if chart.local_path else None,
        digest=chart.digest,  # the chart's pin (hyperpod_dpd/config/dependencies_chart.py), checked by the construct
        version=chart.version,
        timeout=cdk.Duration.minutes(chart.timeout_minutes),
        gpu_taints=[(taint.key, taint.effect) for g in hp_cfg.instance_groups if g.is_gpu for taint in g.taints],
    )
    hyperpod = HyperPodCluster(
        scope, "HyperPod",
        cluster_name=hp_cfg.cluster_name,
        eks_cluster_arn=eks_cluster.cluster_arn,
        region=config.region,
        subnet_ids=[network.gpu_subnet.subnet_id],
        security_group_ids=[network.efa_security_group.security_group_id,
                            eks_cluster.cluster.cluster_security_group_id],
        instance_groups=hp_cfg.instance_groups,
        lifecycle_bucket_name=hp_cfg.lifecycle_bucket(config.account, config.region),
        node_recovery=hp_cfg.node_recovery,
        node_provisioning_mode=hp_cfg.node_provisioning_mode,
        autoscaling=hp_cfg.autoscaling,  # HyperPod-managed Karpenter and its cluster role, when configured
        tiered_storage=hp_cfg.tiered_storage,  # the managed L2 KV tier's memory, when configured (docs/kv-cache.md)
        depends_on=[dependencies, *eks_cluster.addons.values()],
        removal_policy=policy,
        access_logs_bucket=logs,
        tags=config.tags,
        # this account's, AWS's platform registries, and the ones the endpoints' images name (infra/registries.py)
        image_registries=node_registries(region=config.region, account=config.account, images=[
            e.role_image(role) for e in config.endpoints for role in ("prefill", "decode")]),
    )
    if not config.delivery.gitops:  # gitops: the GitOps tree carries them (hyperpod_dpd/config/delivery.py)
        hand_over(config, hyperpod.add_karpenter_resources(eks_cluster.cluster).values())  # NodeClass, NodePool
    operator = config.operator
    inference_operator = InferenceOperator(
        scope, "InferenceOperator",
        eks_cluster=eks_cluster,
        hyperpod_cluster=hyperpod,
        operator_version=operator.version,
        addon_version=operator.addon_version,
        prerequisite_versions=operator.prerequisite_versions,
        execution_role_name=operator.execution_role(hp_cfg.cluster_name),
        tls_bucket_name=operator.tls_bucket(config.account, config.region),
        model_buckets=config.model_buckets,
        gated_model_access=operator.gated_model_access,
        observability=ObservabilityOptions(
            addon_version=operator.observability.addon_version,
            prometheus_workspace_arn=operator.observability.prometheus_workspace_arn,
            grafana=operator.observability.grafana, logging=operator.observability.logging)
        if operator.observability.enabled else None,
        require_dpd=bool(config.endpoints),
        gateway=any(e.routing.tier == "gateway" for e in config.endpoints),  # docs/gateway.md
        removal_policy=policy,
        access_logs_bucket=logs,
    )
    monitoring = build_monitoring(scope, config=config, hyperpod=hyperpod, inference_operator=inference_operator,
                                  removal_policy=policy)
    runner = build_checks_runner(scope, config=config, network=network, eks_cluster=eks_cluster,
                                 inference_operator=inference_operator, access_logs=logs)
    checks_role = network.checks_role
    if checks_role is not None:  # the runner, and the outputs the KvFabric step reads (the Prometheus query URL)
        ChecksRoleGrants(scope, "ChecksRoleGrants", checks_role=checks_role, runner=runner,
                         read_outputs=bool(config.endpoints) and inference_operator.observability_destination is not None)
    operations = OperationsAccess(
        scope, "OperationsAccess", cluster=eks_cluster.cluster, principals=eks_cfg.operations_principals,
        roles={config.checks_runner_role_arn: runner.role} if runner else None,
        kubernetes_version=eks_cfg.version, after=[inference_operator.resource],  # its CRD and namespace
        apply_rbac=not config.delivery.gitops,  # gitops: the RBAC is in the GitOps tree, the access entries stay here
    ) if config.operations_roles else None
    if operations is not None and operations.manifest is not None:
        hand_over(config, [operations.manifest])
    return PlatformResources(logs, eks_cluster, dependencies, hyperpod, inference_operator, monitoring,
                             operations=operations, checks_role=checks_role, checks_runner=runner)


def build_checks_runner(scope: Construct, *, config: EnvironmentConfig, network: EfaNetwork,
                        eks_cluster: HyperPodEksCluster, inference_operator: InferenceOperator,
                        access_logs: s3.IBucket) -> ChecksRunner | None:
    """The checks runner (``ChecksRunner`` under ``scope``) when ``config.checks_runner``, else None: in the EKS
    subnets, admitted by the cluster security group on 443, with EKS authentication to the cluster, the Prometheus
    query on the add-on's workspace, and SageMaker invoke on the endpoints that have a SageMaker endpoint name."""
    if not config.checks_runner:
        return None
    destination = inference_operator.observability_destination
    return ChecksRunner(
        scope, "ChecksRunner", project_name=config.checks_project_name, role_name=config.checks_runner_role_name,
        environment_name=config.name, vpc=network.vpc, subnets=network.eks_subnets,
        # a created cluster's EKS-made group, or the adopted cluster's eks.existing.cluster_security_group_id: the
        # group of the API server's network interfaces in the VPC (EKS user guide, "View Amazon EKS security group
        # requirements for clusters")
        cluster_security_group_id=eks_cluster.cluster.cluster_security_group_id,
        eks_cluster_name=config.eks.cluster_name,
        prometheus_workspace_arn=destination.workspace_arn if destination is not None else None,
        sagemaker_endpoint_names=[e.sagemaker_endpoint_name for e in config.endpoints if e.sagemaker_endpoint_name],
        removal_policy=removal_policy(config), access_logs=access_logs)


# A property of the kubectl handler's custom resource that it does not read (custom-resource-handlers/dist/aws-eks-v2/
# kubectl-handler/apply/__init__.py reads ClusterName, Manifest, PruneLabel, Overwrite, SkipValidation only): set by
# delivery.handover so that the deploy that adds DeletionPolicy Retain is a real update of every handed-over
# resource, not a template change CloudFormation might skip [? whether a DeletionPolicy-only change is stored is not
# stated by "DeletionPolicy attribute"]. An update keeps the physical id (custom-resources/lib/provider-framework/
# runtime/framework.js, defaultPhysicalResourceId: Update returns req.PhysicalResourceId), so nothing is replaced.
HANDOVER_PROPERTY = "HpdpdDeliveryHandover"


def hand_over(config: EnvironmentConfig, manifests: Iterable[eks.KubernetesManifest]) -> None:
    """With ``delivery.handover``: DeletionPolicy Retain on each manifest, so that switching the environment to
    ``delivery.endpoints: gitops`` removes it from the template without the handler's ``kubectl delete``."""
    if not config.delivery.handover:
        return
    for manifest in manifests:
        resource = manifest.node.find_child("Resource")  # aws-eks-v2/lib/k8s-manifest.js: CustomResource "Resource"
        assert isinstance(resource, cdk.CustomResource), manifest.node.path
        resource.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
        cfn = resource.node.default_child
        assert isinstance(cfn, cdk.CfnResource), manifest.node.path
        cfn.add_property_override(HANDOVER_PROPERTY, "retain")


def build_endpoints(scope: Construct, *, config: EnvironmentConfig, eks_cluster: HyperPodEksCluster,
                    inference_operator: InferenceOperator) -> tuple[list[EndpointChart], dict[str, eks.KubernetesManifest]]:
    """One ``KubernetesManifest`` per endpoint chart (the IEC and its router resources), applied after the
    inference add-on: the IEC needs the operator's CRD and the router objects need its namespace. ``prune``
    deletes objects dropped from a chart, e.g. the old IEC after a new generation. Each endpoint namespace (reserved
    ones are refused by the configuration) is its own ``Namespace-<name>`` manifest, retained and never pruned, that
    the endpoint manifests depend on: removing an endpoint never deletes a namespace. With operations roles
    (``eks.operations_principals`` or the checks runner's role), each endpoint namespace also gets the operations
    RoleBinding (``Operations-<chart id>``), applied after the chart that creates the namespace.

    With ``delivery.endpoints: gitops`` the charts are rendered (and validated) but no manifest is created: the
    GitOps tree (hyperpod_dpd.k8s.gitops) carries those objects, and the stack keeps its placeholder. With
    ``delivery.handover`` every manifest is retained (:func:`hand_over`).
    """
    app = cdk8s.App()
    charts = add_environment_charts(app, config, declare_namespaces=False)
    if config.delivery.gitops:
        for chart in charts:
            chart.to_json()  # validated as in cdk mode: a bad endpoint fails synthesis, not the controller's sync
        return charts, {}
    namespaces: dict[str, eks.KubernetesManifest] = {}
    for namespace_chart in add_namespace_charts(app, config):  # retained, never pruned: see NamespaceChart
        namespaces[namespace_chart.namespace_name] = eks.KubernetesManifest(
            scope, namespace_chart.node.id, cluster=eks_cluster.cluster, manifest=namespace_chart.to_json(),
            overwrite=True, prune=False, removal_policy=cdk.RemovalPolicy.RETAIN)
    manifests: dict[str, eks.KubernetesManifest] = {}
    for chart in charts:
        manifest = eks.KubernetesManifest(
            scope, f"Endpoint-{chart.node.id}", cluster=eks_cluster.cluster, manifest=chart.to_json(),
            overwrite=True, prune=True)
        manifest.node.add_dependency(inference_operator.resource)
        if chart.namespace in namespaces:
            manifest.node.add_dependency(namespaces[chart.namespace])
        manifests[chart.node.id] = manifest
    hand_over(config, manifests.values())
    if config.operations_roles:  # the endpoint rules of the operations access, in each endpoint's namespace
        bound: set[str] = set()
        for chart in charts:
            namespace = chart.namespace or "default"
            if namespace not in bound:
                bound.add(namespace)
                hand_over(config, [bind_namespace(
                    scope, f"Operations-{chart.node.id}", cluster=eks_cluster.cluster, namespace=namespace,
                    kubernetes_version=config.eks.version, after=[manifests[chart.node.id]])])
    return charts, manifests


class HyperPodDpdPlatform(Construct):
    """Everything one environment needs for DPD serving, in one construct: the EFA network (created or adopted),
    the EKS cluster, the HyperPod dependencies, the HyperPod cluster with its GPU groups, the inference operator,
    and (unless ``endpoints=False``) the configured DPD endpoints.

    Args:
        config: a validated :class:`~hyperpod_dpd.config.EnvironmentConfig` (from ``load_environment`` or
            ``parse_environment``): the one typed props object. Its account and Region must match the stack's
            environment when the stack has a concrete one.
        endpoints: also apply the configured endpoints' manifests. Default: True. With ``delivery.endpoints:
            gitops`` in ``config`` no endpoint, operations RBAC or Karpenter manifest is created whatever this says:
            the GitOps tree (``python -m hyperpod_dpd.k8s.gitops``, docs/gitops.md) carries them.
        checks_trusted_role_arn: create the checks runner ``hpdpd-<env>-checks`` inside the VPC (its role gets the
            operations access) and the checks role ``hpdpd-<env>-checks`` that starts it, trusted by this one role ARN
            only (docs/library.md). Default: none, unless ``config`` already carries a trust
            (``config.with_checks_role(...)``).

    The aws-cdk-lib feature flags the constructs are tested with (:data:`~hyperpod_dpd.infra.feature_flags.FEATURE_FLAGS`)
    apply to this construct's subtree whatever the app's ``cdk.json`` says; the rest of the app keeps its own.

    Attributes: ``network``, ``eks``, ``hyperpod``, ``inference_operator``, ``access_logs``, ``monitoring`` (the DPD
    alerts, None without endpoints), ``operations`` (the access of the operations roles, None without any; its
    RoleBinding in each endpoint namespace is ``Operations-<chart id>``), ``checks_role`` and ``checks_runner`` (None
    without a trust),
    ``charts`` and ``endpoint_manifests`` (by chart id); ``model_buckets`` (name -> ``s3.IBucket``, read-only) and
    :meth:`model_bucket`; ``connections`` (the EKS cluster security group). Grants for your own principals:
    :meth:`grant_model_read`, :meth:`grant_cluster_admin` (docs/library.md, "Wiring your own constructs"). Apply the
    guardrails to the app with :func:`hyperpod_dpd.infra.apply_guardrails`.
    """

    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig, endpoints: bool = True,
                 checks_trusted_role_arn: str | None = None) -> None:
        if checks_trusted_role_arn is not None:
            config = config.with_checks_role(checks_trusted_role_arn)  # one line naming the problem, before any child
        _check_environment(scope, config)
        super().__init__(scope, id)
        for flag, value in FEATURE_FLAGS.items():  # before the first child: the whole subtree sees them
            self.node.set_context(flag, value)
        self.config = config
        retain_stateful_resources(self, removal_policy(config))  # retain: every stateful resource, HyperPod included
        self.network = build_network(self, config=config)
        parts = build_platform(self, config=config, network=self.network)
        self.access_logs = parts.access_logs
        self.eks = parts.eks
        self.hyperpod_dependencies = parts.hyperpod_dependencies
        self.hyperpod = parts.hyperpod
        self.inference_operator = parts.inference_operator
        self.monitoring = parts.monitoring
        self.operations = parts.operations
        self.checks_role = parts.checks_role
        self.checks_runner = parts.checks_runner
        self.charts: list[EndpointChart] = []
        self.endpoint_manifests: dict[str, eks.KubernetesManifest] = {}
        if endpoints and config.endpoints:
            self.charts, self.endpoint_manifests = build_endpoints(
                self, config=config, eks_cluster=self.eks, inference_operator=self.inference_operator)
        # The configuration's warnings, each once, as annotations a consumer's `cdk synth` shows and acknowledges: an
        # endpoint's on its manifest (on this construct without one), the environment's on this construct.
        annotate_warnings(config, environment=self, endpoints=self.endpoint_manifests)

    @property
    def model_buckets(self) -> Mapping[str, s3.IBucket]:
        """The model buckets by name (``config.model_buckets``: the operator's and those endpoints load from)."""
        return self.inference_operator.model_buckets

    def model_bucket(self, name: str) -> s3.IBucket:
        """One model bucket by name; an unknown name is a one-line :class:`ConfigError` naming the configured ones."""
        return self.inference_operator.model_bucket(name)

    def grant_model_read(self, grantee: iam.IGrantable, bucket: str | None = None) -> iam.Grant:
        """Read of one model bucket (``bucket``, by name) or of all of them (default) for ``grantee``, through each
        bucket's ``grant_read`` (KMS included when a bucket has a key); its cdk-nag IAM5 findings are acknowledged on
        the grantee by exact id (:meth:`InferenceOperator.grant_model_read`)."""
        return self.inference_operator.grant_model_read(grantee, bucket)

    def grant_cluster_admin(self, principal_arn: str) -> eks.AccessEntry:
        """Cluster admin for one IAM role or user ARN, as ``eks.admin_principals`` gets it
        (:meth:`HyperPodEksCluster.grant_cluster_admin`). An operations role of the configuration is refused: EKS
        allows one access entry per principal, and that one has the operations entry."""
        if principal_arn in self.config.operations_roles:
            raise ConfigError.single(self.config.source, "grant_cluster_admin.principal_arn", principal_arn,
                                     "is an operations role (eks.operations_principals or the checks runner's role), "
                                     "which has its own access entry; an IAM principal has one")
        return self.eks.grant_cluster_admin(principal_arn)

    @property
    def connections(self) -> ec2.Connections:
        """The EKS cluster security group as ``ec2.Connections`` (:attr:`HyperPodEksCluster.connections`): the HyperPod
        nodes and the Kubernetes API's network interfaces are in it, so ``platform.connections.allow_from(peer, port)``
        admits ``peer`` to them, as aws-cdk's ``Connections`` does (an ingress rule on the group, the matching egress
        rule on ``peer``'s). The EFA security group is not in it: it admits only its own members (rule HPDPD-HP3)."""
        return self.eks.connections


def _check_environment(scope: Construct, config: EnvironmentConfig) -> None:
    """A stack deployed to another account or Region than the configuration describes is refused up front."""
    stack = cdk.Stack.of(scope)
    problems: list[tuple[str, Any, str]] = []
    for field, actual in (("account", stack.account), ("region", stack.region)):
        expected = getattr(config, field)
        if not cdk.Token.is_unresolved(actual) and actual != expected:
            problems.append((field, expected, f"does not match the {field} of stack {stack.node.path} ({actual})"))
    if problems:
        field, value, message = problems[0]
        raise ConfigError.single(config.source or config.name, field, value, message)  # the file, as every config error
