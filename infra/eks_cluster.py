"""HyperPodEksCluster: the EKS control plane that orchestrates a HyperPod cluster."""

from __future__ import annotations

import hashlib
import importlib
import re
from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from constructs import Construct

from hyperpod_dpd.catalogue.versions import CORE_ADDONS, EKS_VERSIONS, KUBECTL_LAYERS
from hyperpod_dpd.config.base import addon_version_issues
from hyperpod_dpd.config.eks import ALL_LOG_TYPES, SystemNodeGroup
from hyperpod_dpd.config.hyperpod import ROLE_LABEL
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra import nag

_LOG_TYPES = {
    "api": eks.ClusterLoggingTypes.API,
    "audit": eks.ClusterLoggingTypes.AUDIT,
    "authenticator": eks.ClusterLoggingTypes.AUTHENTICATOR,
    "controllerManager": eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
    "scheduler": eks.ClusterLoggingTypes.SCHEDULER,
}
CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"


def kubectl_layer(scope: Construct, id: str, version: str):
    """The kubectl/helm Lambda layer that matches the cluster's Kubernetes minor version."""
    if version not in KUBECTL_LAYERS:
        raise ConfigError.single(None, "eks.version", version, f"must be one of {', '.join(EKS_VERSIONS)}")
    module_name, class_name = KUBECTL_LAYERS[version]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError:
        extra = "kubectl-v" + version.split(".")[1]
        raise ConfigError.single(None, "eks.version", version, f"needs the kubectl layer package {module_name!r}: "
                                 f"pip install 'hyperpod-dpd[{extra}]'") from None
    return getattr(module, class_name)(scope, id)


def _principal_id(arn: str) -> str:
    """A stable construct id per principal, so reordering the admin list never replaces access entries."""
    name = re.sub(r"[^A-Za-z0-9]", "", arn.rsplit("/", 1)[-1])[:40]
    return f"Admin{name}{hashlib.sha256(arn.encode()).hexdigest()[:8]}"


class HyperPodEksCluster(Construct):
    """An ``aws_eks_v2`` cluster prepared for HyperPod.

    * API authentication (hard-coded by ``aws_eks_v2``; HyperPod rejects ``CONFIG_MAP``), no Auto Mode, no
      default capacity: HyperPod brings the GPU nodes, an optional small managed node group runs system pods.
    * ``bootstrap_self_managed_addons`` off, and the core add-ons (``vpc-cni`` >= 1.18.3, ``kube-proxy``, ``coredns``,
      ``eks-pod-identity-agent``) installed as pinned managed add-ons.
    * Secrets encrypted with a customer-managed KMS key, all control-plane log types on, the IAM OIDC provider
      (the inference add-on's roles use IRSA), the kubectl provider, and admin access entries.

    Attributes: ``cluster`` (the L2), ``addons`` (name -> ``CfnAddon``), ``secrets_key``, ``oidc_provider``.
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
        endpoint_access: str = "public_and_private",
        public_access_cidrs: Sequence[str] = ("0.0.0.0/0",),
        admin_principals: Sequence[str] = (),
        logging: Sequence[str] = ALL_LOG_TYPES,
        system_node_group: SystemNodeGroup | None = None,
        addon_versions: Mapping[str, str] | None = None,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY,
    ) -> None:
        self._validate(version, endpoint_access, logging, addon_versions or {})  # before anything joins the tree
        versions = {a.name: a.version_for(version) for a in CORE_ADDONS} | dict(addon_versions or {})
        super().__init__(scope, id)

        self.secrets_key = kms.Key(
            self, "SecretsKey", enable_key_rotation=True, removal_policy=removal_policy,
            description=f"Envelope encryption of Kubernetes secrets in EKS cluster {cluster_name}")
        if endpoint_access == "private":
            access = eks.EndpointAccess.PRIVATE
        else:
            access = eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*public_access_cidrs)
        self.cluster = eks.Cluster(
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
        self.oidc_provider = self.cluster.open_id_connect_provider
        self._acknowledge_cluster_internals()

        self.addons: dict[str, eks.CfnAddon] = {}
        for addon in CORE_ADDONS:
            self.addons[addon.name] = eks.CfnAddon(
                self, f"Addon-{addon.name}",
                cluster_name=self.cluster.cluster_name,
                addon_name=addon.name,
                addon_version=versions[addon.name],
                resolve_conflicts="OVERWRITE",
            )
        # CoreDNS needs the CNI to schedule; both wait for the cluster.
        self.addons["coredns"].add_resource_dependency(self.addons["vpc-cni"])

        for arn in dict.fromkeys(admin_principals):
            self.cluster.grant_access(_principal_id(arn), arn, [
                eks.AccessPolicy.from_access_policy_name(CLUSTER_ADMIN_POLICY, access_scope_type=eks.AccessScopeType.CLUSTER)])

        self.system_nodegroup: eks.Nodegroup | None = None
        if system_node_group is not None:
            self.system_nodegroup = self.cluster.add_nodegroup_capacity(
                "SystemNodes",
                instance_types=[ec2.InstanceType(system_node_group.instance_type)],
                min_size=system_node_group.min_size,
                desired_size=system_node_group.desired_size,
                max_size=system_node_group.max_size,
                disk_size=system_node_group.disk_size_gb,
                subnets=ec2.SubnetSelection(subnets=list(subnets)),
                labels={ROLE_LABEL: "system"},
            )
            for addon in self.addons.values():
                self.system_nodegroup.node.add_dependency(addon)

    def _acknowledge_cluster_internals(self) -> None:
        """Findings on what aws_eks_v2 creates itself: the cluster role and the kubectl provider's handlers."""
        nag.acknowledge_managed_policies(self.cluster.role, {
            "AmazonEKSClusterPolicy": "EKS requires this AWS managed policy on the cluster service role"})
        provider = self.cluster.node.find_child("KubectlProvider")
        handler = provider.node.find_child("Handler")
        why = "aws_eks_v2's kubectl provider applies Helm charts and manifests"
        nag.acknowledge_managed_policies(handler, {
            "service-role/AWSLambdaBasicExecutionRole": f"{why}; it writes its logs",
            "service-role/AWSLambdaVPCAccessExecutionRole": f"{why} from inside the VPC, to reach a private endpoint",
            "AmazonEC2ContainerRegistryReadOnly": f"{why}; it pulls OCI Helm charts from ECR",
        })
        condition = handler.node.find_child("HasEcrPublic")
        public_ecr = {"Fn::If": [cdk.Stack.of(self).get_logical_id(condition), {"Fn::Join": ["", [
            "arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},
            {"Ref": "AWS::NoValue"}]}
        nag.acknowledge(handler, f"AwsSolutions-IAM4[Policy::{nag.compact_json(public_ecr)}]",
                        f"{why}; it pulls OCI Helm charts from ECR Public where that partition has it")
        nag.acknowledge_generated_function(handler, f"{why}; its runtime is chosen and bumped by aws-cdk-lib")
        framework = provider.node.find_child("Provider")
        nag.acknowledge_generated_policy(
            framework.node.find_child("framework-onEvent").node.find_child("ServiceRole").node.find_child("DefaultPolicy"),
            f"{why}; the custom-resource framework invokes every version of the kubectl handler")
        nag.acknowledge_managed_policies(framework, {
            "service-role/AWSLambdaBasicExecutionRole": f"{why}; the custom-resource framework writes its logs",
            "service-role/AWSLambdaVPCAccessExecutionRole": f"{why}; the framework runs inside the VPC"})
        nag.acknowledge_generated_function(framework, f"{why}; the framework's runtime is chosen by aws-cdk-lib")

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

    @property
    def cluster_arn(self) -> str:
        return self.cluster.cluster_arn

    @property
    def cluster_name(self) -> str:
        return self.cluster.cluster_name
