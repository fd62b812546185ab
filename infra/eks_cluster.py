"""HyperPodEksCluster: the EKS control plane that orchestrates a HyperPod cluster."""

from __future__ import annotations

import hashlib
import importlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import cast

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct, IConstruct
from pydantic import TypeAdapter, ValidationError

from hyperpod_dpd.catalogue.versions import CORE_ADDONS, EKS_VERSIONS, KUBECTL_LAYERS
from hyperpod_dpd.config.base import IamPrincipalArn, addon_version_issues
from hyperpod_dpd.config.eks import ALL_LOG_TYPES, EndpointAccess, LogType, SystemNodeGroup
from hyperpod_dpd.config.eks_existing import ExistingEksCluster, kubectl_layer_problem, missing_layer_message
from hyperpod_dpd.config.hyperpod import ROLE_LABEL
from hyperpod_dpd.errors import MISSING, ConfigError, Issue
from hyperpod_dpd.infra import guardrails, nag, source_conditions
from hyperpod_dpd.infra.arns import arn

_LOG_TYPES = {
    "api": eks.ClusterLoggingTypes.API,
    "audit": eks.ClusterLoggingTypes.AUDIT,
    "authenticator": eks.ClusterLoggingTypes.AUTHENTICATOR,
    "controllerManager": eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
    "scheduler": eks.ClusterLoggingTypes.SCHEDULER,
}
CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
# Configuration values of the vpc-cni add-on that make its node agent enforce NetworkPolicies, off by default (EKS user
# guide, "Restrict Pod network traffic with Kubernetes network policies": add-on v1.14.0-eksbuild.3 or later, key
# "enableNetworkPolicy", the string "true"; network policies need VPC CNI 1.14 or later, below HyperPod's own minimum
# VPC_CNI_MINIMUM and the pinned versions). The endpoints' router chart renders NetworkPolicies.
VPC_CNI_NETWORK_POLICY = {"enableNetworkPolicy": "true"}


def kubectl_layer(scope: Construct, id: str, version: str, *, field: str = "HyperPodEksCluster.version") -> lambda_.ILayerVersion:
    """The kubectl/helm Lambda layer that matches the cluster's Kubernetes minor version.

    A configuration refuses a version whose layer this Python lacks when it loads, naming the key the user wrote
    (``eks.version`` or ``eks.existing.version``, :func:`hyperpod_dpd.config.eks_existing.kubectl_layer_problem`), and
    :class:`HyperPodEksCluster` before anything joins the tree, naming its prop; this refusal, naming ``field``, is
    for a layer that was found but does not import."""
    if version not in KUBECTL_LAYERS:
        raise ConfigError.single(None, field, version, f"must be one of {', '.join(EKS_VERSIONS)}")
    module_name, class_name = KUBECTL_LAYERS[version]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError:
        raise ConfigError.single(None, field, version, missing_layer_message(version)) from None
    return cast(lambda_.ILayerVersion, getattr(module, class_name)(scope, id))


def _validate_adoption(scope: Construct, existing: ExistingEksCluster, *, cluster_name: str, version: str,
                       system_node_group: SystemNodeGroup | None, overrides: Mapping[str, str]) -> None:
    """An adopted cluster's props must describe it: its name and version, ARNs of the stack's account and
    partition (when the stack's environment is concrete), no node group, overrides only for managed add-ons."""
    where = "HyperPodEksCluster"
    problems = []
    for key, given in (("cluster_name", cluster_name), ("version", version)):
        if given != getattr(existing, key):
            problems.append(Issue(f"{where}.{key}", given, f"must equal existing.{key} ({getattr(existing, key)!r})"))
    if system_node_group is not None:
        problems.append(Issue(f"{where}.system_node_group", system_node_group.model_dump(),
                              "conflicts with existing: an adopted cluster keeps its own node groups"))
    for name, value in overrides.items():
        if name not in existing.manage_addons:
            problems.append(Issue(f"{where}.addon_versions.{name}", value,
                                  "applies only to add-ons listed in existing.manage_addons"))
    stack = cdk.Stack.of(scope)
    account, region = (None if cdk.Token.is_unresolved(v) else v for v in (stack.account, stack.region))
    problems += existing.arn_issues(f"{where}.existing", account=account, region=region, where="the stack's")
    if problems:
        raise ConfigError(None, problems)


def _check_principal(principal_arn: str, field: str) -> None:
    """An IAM role or user ARN as ``eks.admin_principals`` accepts it (hyperpod_dpd.config.base.IamPrincipalArn); a
    token (a role's ``role_arn``) is the role's own."""
    if cdk.Token.is_unresolved(principal_arn):
        return
    try:
        TypeAdapter(IamPrincipalArn).validate_python(principal_arn)
    except ValidationError as exc:
        raise ConfigError.single(None, field, principal_arn,
                                 str(exc.errors()[0]["msg"]).removeprefix("Value error, ")) from None


def principal_id(arn: str, prefix: str = "Admin") -> str:
    """A stable construct id per principal, so reordering a list of principals never replaces access entries."""
    name = re.sub(r"[^A-Za-z0-9]", "", arn.rsplit("/", 1)[-1])[:40]
    return f"{prefix}{name}{hashlib.sha256(arn.encode()).hexdigest()[:8]}"


class HyperPodEksCluster(Construct):
    """An ``aws_eks_v2`` cluster prepared for HyperPod.

    * API authentication (hard-coded by ``aws_eks_v2``; HyperPod rejects ``CONFIG_MAP``), no Auto Mode, no
      default capacity: HyperPod brings the GPU nodes, an optional small managed node group runs system pods.
    * ``bootstrap_self_managed_addons`` off, and the core add-ons (``vpc-cni`` >= 1.18.3, ``kube-proxy``, ``coredns``,
      ``eks-pod-identity-agent``) installed as pinned managed add-ons; ``vpc-cni`` enforces NetworkPolicies
      (:data:`VPC_CNI_NETWORK_POLICY`) unless ``network_policy`` is False.
    * Secrets encrypted with a customer-managed KMS key, all control-plane log types on, the IAM OIDC provider
      (the inference add-on's roles use IRSA), the kubectl provider, and admin access entries.

    With ``existing``, the cluster is adopted instead (:class:`ExistingEksCluster`, no lookups): imported with
    ``Cluster.from_cluster_attributes`` and a kubectl provider whose handler runs as ``existing.kubectl_role_arn``,
    the OIDC provider imported from its ARN; no cluster, KMS key or node group is created, and only the core
    add-ons listed in ``existing.manage_addons`` (creating an add-on the cluster already has fails). The creation
    settings (``endpoint_access``, ``public_access_cidrs``, ``logging``, ``security_group``) do not apply;
    ``cluster_name`` and ``version`` must be the adopted cluster's; ``admin_principals`` still get access entries.

    Args:
        vpc: the VPC of the cluster (``EfaNetwork.vpc``). No default.
        subnets: the control plane's and the kubectl handler's private subnets (``EfaNetwork.eks_subnets``). No default.
        cluster_name: the EKS cluster's name. No default.
        version: the Kubernetes minor, one of ``hyperpod_dpd.catalogue.versions.EKS_VERSIONS`` whose kubectl layer
            package is installed. No default.
        security_group: the extra security group of the control plane (the EFA group, so HyperPod nodes reach it).
            No default.
        endpoint_access: ``"public_and_private"`` (default) or ``"private"``.
        public_access_cidrs: who may reach a public endpoint; required with ``"public_and_private"``. Default: none.
        admin_principals: IAM role or user ARNs given cluster admin (:meth:`grant_cluster_admin`). Default: none.
        logging: the control-plane log types. Default: all five.
        system_node_group: a managed node group for system pods. Default: None.
        addon_versions: overrides of the core add-ons' pinned versions by name. Default: the catalogue's pins.
        removal_policy: of the cluster and its secrets key. Default: DESTROY.
        existing: adopt this cluster instead of creating one. Default: None.
        network_policy: vpc-cni enforces NetworkPolicies. Default: True.

    Attributes: ``cluster`` (the L2, imported when adopted), ``cluster_arn``, ``cluster_name``, ``addons``
    (name -> ``CfnAddon``), ``secrets_key`` (None when adopted), ``oidc_provider``, ``system_nodegroup``,
    ``existing``, ``admin_entries`` (principal -> ``AccessEntry``), ``connections``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        cluster_name: str,
        version: str,
        security_group: ec2.ISecurityGroup,
        endpoint_access: EndpointAccess = "public_and_private",
        public_access_cidrs: Sequence[str] = (),
        admin_principals: Sequence[str] = (),
        logging: Sequence[LogType] = ALL_LOG_TYPES,
        system_node_group: SystemNodeGroup | None = None,
        addon_versions: Mapping[str, str] | None = None,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY,
        existing: ExistingEksCluster | None = None,
        network_policy: bool = True,
    ) -> None:
        # Validation first: bad props leave nothing in the tree.
        self._validate(version, endpoint_access, logging, addon_versions or {})
        if existing is None and endpoint_access == "public_and_private" and not public_access_cidrs:
            raise ConfigError.single(None, "HyperPodEksCluster.public_access_cidrs", MISSING,
                                     "is required with a public endpoint: the CIDRs that may reach the Kubernetes API")
        if existing is not None:
            _validate_adoption(scope, existing, cluster_name=cluster_name, version=version,
                               system_node_group=system_node_group, overrides=addon_versions or {})
        if (layer := kubectl_layer_problem(version)) is not None:  # before the tree, as the configuration does
            field = "HyperPodEksCluster.existing.version" if existing is not None else "HyperPodEksCluster.version"
            raise ConfigError.single(None, field, version, layer)
        for index, principal in enumerate(admin_principals):
            _check_principal(principal, f"HyperPodEksCluster.admin_principals[{index}]")
        versions = {a.name: a.version_for(version) for a in CORE_ADDONS} | dict(addon_versions or {})
        super().__init__(scope, id)
        self.existing = existing
        self.secrets_key: kms.Key | None = None
        self.cluster: eks.ICluster
        self.oidc_provider: iam.IOpenIdConnectProvider
        self.system_nodegroup: eks.Nodegroup | None = None
        created: eks.Cluster | None = None
        adopted_provider: eks.KubectlProvider | None = None
        if existing is None:
            created = self._create(vpc=vpc, subnets=subnets, cluster_name=cluster_name, version=version,
                                   security_group=security_group, endpoint_access=endpoint_access,
                                   public_access_cidrs=public_access_cidrs, logging=logging, removal_policy=removal_policy)
            managed: Sequence[str] = [a.name for a in CORE_ADDONS]
        else:
            adopted_provider = self._adopt(existing, vpc)
            managed = existing.manage_addons

        self.addons: dict[str, eks.CfnAddon] = {}
        for addon in CORE_ADDONS:
            if addon.name not in managed:
                continue  # an adopted cluster keeps the add-ons it has
            self.addons[addon.name] = eks.CfnAddon(
                self, f"Addon-{addon.name}",
                cluster_name=self.cluster.cluster_name,
                addon_name=addon.name,
                addon_version=versions[addon.name],
                configuration_values=json.dumps(VPC_CNI_NETWORK_POLICY)
                if addon.name == "vpc-cni" and network_policy else None,
                resolve_conflicts="OVERWRITE",
                # Deleting the stack must not take the network or DNS away from a cluster that outlives it.
                preserve_on_delete=True if existing is not None else None,
            )
        # CoreDNS needs the CNI to schedule; both wait for the cluster.
        if "coredns" in self.addons and "vpc-cni" in self.addons:
            self.addons["coredns"].add_resource_dependency(self.addons["vpc-cni"])

        self._created = created
        self._connections: ec2.Connections | None = None
        self._adopted_provider = adopted_provider
        self.admin_entries: dict[str, eks.AccessEntry] = {}
        for principal in admin_principals:
            self.grant_cluster_admin(principal)

        if created is not None and system_node_group is not None:
            self.system_nodegroup = created.add_nodegroup_capacity(
                "SystemNodes",
                instance_types=[ec2.InstanceType(system_node_group.instance_type)],
                min_size=system_node_group.min_size,
                desired_size=system_node_group.desired_size,
                max_size=system_node_group.max_size,
                disk_size=system_node_group.disk_size_gb,
                subnets=ec2.SubnetSelection(subnets=list(subnets)),
                labels={ROLE_LABEL: "system"},
            )
            for resource in self.addons.values():
                self.system_nodegroup.node.add_dependency(resource)

    def _create(self, *, vpc: ec2.IVpc, subnets: Sequence[ec2.ISubnet], cluster_name: str, version: str,
                security_group: ec2.ISecurityGroup, endpoint_access: str, public_access_cidrs: Sequence[str],
                logging: Sequence[str], removal_policy: cdk.RemovalPolicy) -> eks.Cluster:
        self.secrets_key = kms.Key(
            self, "SecretsKey", enable_key_rotation=True, removal_policy=removal_policy,
            description=f"Envelope encryption of Kubernetes secrets in EKS cluster {cluster_name}")
        if endpoint_access == "private":
            access = eks.EndpointAccess.PRIVATE
        else:
            access = eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*public_access_cidrs)
        cluster = eks.Cluster(
            self, "Resource",
            cluster_name=cluster_name,
            version=eks.KubernetesVersion.of(version),
            vpc=vpc,
            vpc_subnets=[ec2.SubnetSelection(subnets=list(subnets))],
            security_group=security_group,
            endpoint_access=access,
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            bootstrap_self_managed_addons=False,
            cluster_logging=[_LOG_TYPES[t] for t in logging],
            secrets_encryption_key=self.secrets_key,
            removal_policy=removal_policy,
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=kubectl_layer(self, "KubectlLayer", version),
                private_subnets=list(subnets),  # the handler reaches a private endpoint from inside the VPC
            ),
        )
        self.cluster = cast(eks.ICluster, cluster)  # jsii's typing does not see that a Cluster is an ICluster
        self.oidc_provider = cluster.open_id_connect_provider
        nag.acknowledge_managed_policies(cluster.role, {
            "AmazonEKSClusterPolicy": "EKS requires this AWS managed policy on the cluster service role"})
        # The role aws_eks_v2 creates, bound to this cluster in place (a new role would replace the cluster).
        source_conditions.bind_trust(cluster.role, "eks.amazonaws.com", source_conditions.eks_cluster(self, cluster_name))
        self._acknowledge_kubectl_provider(cluster.node.find_child("KubectlProvider"))
        return cluster

    def _adopt(self, existing: ExistingEksCluster, vpc: ec2.IVpc) -> eks.KubectlProvider:
        """Import the cluster and its OIDC provider; a kubectl provider whose handler runs as the given role."""
        layer = kubectl_layer(self, "KubectlLayer", existing.version, field="HyperPodEksCluster.existing.version")
        role = iam.Role.from_role_arn(self, "KubectlRole", existing.kubectl_role_arn)
        name, group_id = existing.cluster_name, existing.cluster_security_group_id
        # The provider needs a cluster to reach (ARN, VPC, security group) before the cluster can name the provider.
        target = eks.Cluster.from_cluster_attributes(self, "KubectlTarget", cluster_name=name, vpc=vpc,
                                                     cluster_security_group_id=group_id)
        subnets = [ec2.Subnet.from_subnet_attributes(self, f"KubectlSubnet{i}", subnet_id=subnet_id)
                   for i, subnet_id in enumerate(existing.kubectl_private_subnet_ids)]
        groups = [ec2.SecurityGroup.from_security_group_id(self, "KubectlSecurityGroup", existing.kubectl_security_group_id,
                                                           mutable=False)] if existing.kubectl_security_group_id else None
        provider = eks.KubectlProvider(self, "KubectlProvider", cluster=target, kubectl_layer=layer, role=role,
                                       private_subnets=subnets or None, security_groups=groups)
        self.oidc_provider = iam.OpenIdConnectProvider.from_open_id_connect_provider_arn(
            self, "OidcProvider", existing.oidc_provider_arn)
        self.cluster = eks.Cluster.from_cluster_attributes(
            self, "Resource", cluster_name=name, vpc=vpc, cluster_security_group_id=group_id, kubectl_provider=provider,
            open_id_connect_provider=self.oidc_provider)
        # The provider adds managed policies to its role and a condition for one of them; an imported role takes
        # none of them (the role must carry its own, see docs/adopting.md), so the condition would dangle.
        self.node.try_remove_child("HasEcrPublic")
        cdk.Annotations.of(role).acknowledge_warning(
            "@aws-cdk/aws-iam:IRoleCantBeUsedWithIManagedPolicy",
            "The adopted cluster's kubectl role brings its own Lambda, VPC and ECR permissions (docs/adopting.md)")
        guardrails.acknowledge(role, "HPDPD-IAM1", "aws-cdk-lib's kubectl provider grants its handler role "
                               "eks:DescribeCluster on the imported cluster, whose ARN it writes with the partition of "
                               "the stack's Region")
        for subnet in subnets:
            cdk.Annotations.of(subnet).acknowledge_warning(
                "@aws-cdk/aws-ec2:noSubnetRouteTableId", "Only the kubectl handler's network interfaces use this subnet")
        self._acknowledge_kubectl_provider(provider, role_is_imported=True)
        return provider

    def _acknowledge_kubectl_provider(self, provider: IConstruct, *, role_is_imported: bool = False) -> None:
        """Findings on the kubectl provider's handlers, which aws_eks_v2 creates itself."""
        handler = provider.node.find_child("Handler")
        why = "aws_eks_v2's kubectl provider applies Helm charts and manifests"
        framework = provider.node.find_child("Provider")
        nag.acknowledge_generated_function(handler, f"{why}; its runtime is chosen and bumped by aws-cdk-lib")
        nag.acknowledge_generated_policy(
            framework.node.find_child("framework-onEvent").node.find_child("ServiceRole").node.find_child("DefaultPolicy"),
            f"{why}; the custom-resource framework invokes every version of the kubectl handler")
        nag.acknowledge_managed_policies(framework, {
            "service-role/AWSLambdaBasicExecutionRole": f"{why}; the custom-resource framework writes its logs",
            "service-role/AWSLambdaVPCAccessExecutionRole": f"{why}; the framework runs inside the VPC"})
        nag.acknowledge_generated_function(framework, f"{why}; the framework's runtime is chosen by aws-cdk-lib")
        if role_is_imported:
            return
        nag.acknowledge_managed_policies(handler, {
            "service-role/AWSLambdaBasicExecutionRole": f"{why}; it writes its logs",
            "service-role/AWSLambdaVPCAccessExecutionRole": f"{why} from inside the VPC, to reach a private endpoint",
            "AmazonEC2ContainerRegistryReadOnly": f"{why}; it pulls OCI Helm charts from ECR",
        })
        condition = cast(cdk.CfnElement, handler.node.find_child("HasEcrPublic"))
        public_ecr = {"Fn::If": [cdk.Stack.of(self).get_logical_id(condition), {"Fn::Join": ["", [
            "arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},
            {"Ref": "AWS::NoValue"}]}
        nag.acknowledge(handler, f"AwsSolutions-IAM4[Policy::{nag.compact_json(public_ecr)}]",
                        f"{why}; it pulls OCI Helm charts from ECR Public where that partition has it")

    @staticmethod
    def _validate(version: str, endpoint_access: str, logging: Sequence[str], overrides: Mapping[str, str]) -> None:
        if version not in EKS_VERSIONS:
            raise ConfigError.single(None, "HyperPodEksCluster.version", version, f"must be one of {', '.join(EKS_VERSIONS)}")
        if endpoint_access not in ("public_and_private", "private"):
            raise ConfigError.single(None, "HyperPodEksCluster.endpoint_access", endpoint_access,
                                     "must be 'public_and_private' or 'private'")
        unknown = [t for t in logging if t not in _LOG_TYPES]
        if unknown:
            raise ConfigError.single(None, "HyperPodEksCluster.logging", unknown, f"allowed: {', '.join(_LOG_TYPES)}")
        problems = list(addon_version_issues("HyperPodEksCluster.addon_versions", overrides,
                                             {a.name: a.minimum for a in CORE_ADDONS}, kind="core", why="HyperPod needs"))
        if problems:
            raise ConfigError(None, problems)

    def grant_cluster_admin(self, principal_arn: str) -> eks.AccessEntry:
        """Cluster-admin access for one IAM role or user, through the path ``admin_principals`` takes: an EKS access
        entry with ``AmazonEKSClusterAdminPolicy`` at cluster scope (id :func:`principal_id`, so the order of the calls
        never replaces an entry). A created cluster makes it with ``Cluster.grant_access``; an adopted one gets an
        ``AccessEntry`` that its kubectl provider waits for. Granting the same principal twice returns the entry made
        first (EKS allows one access entry per principal). Returns the access entry.

        Args:
            principal_arn: the IAM role or user ARN (``arn:aws:iam::111111111111:role/PlatformAdmin``), or a token
                (a role's ``role_arn``). No default.
        """
        _check_principal(principal_arn, "HyperPodEksCluster.grant_cluster_admin.principal_arn")
        key = cdk.Stack.of(self).resolve(principal_arn)
        key = key if isinstance(key, str) else nag.compact_json(key)
        if key in self.admin_entries:
            return self.admin_entries[key]
        admin = [eks.AccessPolicy.from_access_policy_name(CLUSTER_ADMIN_POLICY, access_scope_type=eks.AccessScopeType.CLUSTER)]
        entry_id = principal_id(key)
        if self._created is not None:
            self._created.grant_access(entry_id, principal_arn, admin)
            entry = cast(eks.AccessEntry, self._created.node.find_child(entry_id))  # aws-eks-v2 cluster.ts addToAccessEntry
        else:
            assert self._adopted_provider is not None
            entry = eks.AccessEntry(self, entry_id, cluster=self.cluster, principal=principal_arn, access_policies=admin)
            self._adopted_provider.node.add_dependency(entry)  # charts and manifests wait for the entries
        self.admin_entries[key] = entry
        return entry

    @property
    def connections(self) -> ec2.Connections:
        """The cluster security group as ``ec2.Connections``, default port 443: the group EKS makes for the cluster
        (aws_eks_v2's ``cluster_security_group``; an adopted cluster's ``existing.cluster_security_group_id``), which
        the API server's network interfaces and the HyperPod nodes are in. ``eks.connections.allow_from(peer,
        ec2.Port.tcp(443))`` admits a client to the Kubernetes API (and to what listens on the nodes). Unlike aws_eks_v2's
        own ``cluster.connections`` it leaves out the ``security_group`` given (the EFA group): that group admits only
        its own members (rule HPDPD-HP3, infra/guardrails/rules/hyperpod.py)."""
        if self._connections is None:
            self._connections = ec2.Connections(security_groups=[self.cluster.cluster_security_group],
                                                default_port=ec2.Port.tcp(443))
        return self._connections

    @property
    def cluster_arn(self) -> str:
        """The cluster's ARN; an adopted cluster's is built with ``${AWS::Partition}``."""
        if self.existing is not None:
            return arn(self, "eks", f"cluster/{self.existing.cluster_name}")
        return self.cluster.cluster_arn

    @property
    def cluster_name(self) -> str:
        return self.cluster.cluster_name
