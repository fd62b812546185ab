"""HyperPodCluster: ``AWS::SageMaker::Cluster`` with the EKS orchestrator and prefill/decode/system groups."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct, IDependable

from hyperpod_dpd.catalogue.instances import INSTANCE_TYPES
from hyperpod_dpd.config.hyperpod import ClusterAutoScaling, InstanceGroup, TieredStorage
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra import guardrails, nag, source_conditions
from hyperpod_dpd.infra.arns import arn
from hyperpod_dpd.infra.autoscaling_ready import AutoScalingReady
from hyperpod_dpd.infra.buckets import secure_bucket
from hyperpod_dpd.infra.registries import Registry, node_registries, repository_arns
from hyperpod_dpd.k8s.karpenter import karpenter_manifests

LIFECYCLE_DIR = Path(__file__).parent / "lifecycle"
LIFECYCLE_PREFIX = "lifecycle"
ON_CREATE = "on_create.sh"
INSTANCE_ROLE_POLICY = "AmazonSageMakerClusterInstanceRolePolicy"
E3644 = "E3644"
# The values HyperPodConfig.node_recovery and .node_provisioning_mode accept (hyperpod_dpd/config/hyperpod.py), which
# are those of AWS::SageMaker::Cluster's NodeRecovery and NodeProvisioningMode (cfn-lint 1.58.0's registry schema).
NodeRecovery = Literal["Automatic", "None"]
NodeProvisioningMode = Literal["Continuous"]

# HyperPod-managed Karpenter (SageMaker docs, "Autoscaling on SageMaker HyperPod EKS" and its "Create an IAM role",
# "Create a NodeClass" and "Create a NodePool" pages). HyperPod installs the controller and both CRDs once AutoScaling
# is InService; the toolkit applies one HyperpodNodeClass and one NodePool per autoscaled group, after a waiter
# (infra/autoscaling_ready.py) has seen AutoScaling.Status InService.
AUTOSCALER_TYPE = "Karpenter"
CLUSTER_ROLE_PRINCIPAL = "hyperpod.sagemaker.amazonaws.com"
# KMS grant operations the documented cluster-role policy allows HyperPod to create for node volumes
KMS_GRANT_OPERATIONS = ("CreateGrant", "Decrypt", "DescribeKey", "GenerateDataKeyWithoutPlaintext", "ReEncryptTo",
                        "ReEncryptFrom", "RetireGrant")

class HyperPodCluster(Construct):
    """A SageMaker HyperPod cluster orchestrated by EKS, sized for disaggregated prefill/decode.

    * One instance group per configured group, all in the GPU AZ's subnet with the EFA security group, EFA
      interfaces attached by HyperPod, automatic node recovery and deep health checks on GPU groups.
    * Kubernetes labels ``hyperpod-dpd/role`` and ``hyperpod-dpd/instance-group`` on every node, so endpoints
      select prefill and decode nodes by role.
    * A least-privilege execution role and an encrypted, TLS-only ``sagemaker-*`` lifecycle-script bucket.
    * With ``autoscaling``: ``AutoScaling`` (autoscaler type Karpenter, mode Enable, or Disable when switched off) and
      the ``ClusterRole`` HyperPod assumes to add and remove nodes; groups with ``autoscaling`` start at 0 nodes, and
      :meth:`add_karpenter_resources` applies their HyperpodNodeClass and NodePool through the kubectl provider once
      :class:`AutoScalingReady` has seen HyperPod report the autoscaling ``InService``.

    Capacity-block types that cfn-lint's pricing-based list omits (rule E3644) are acknowledged on this resource
    only, with the reason; the config requires a training plan for them.

    The primary child ``Resource`` is the ``CfnCluster``. ``ClusterName``, ``VpcConfig`` and the orchestrator are
    create-only; counts, labels and groups update in place.

    Args:
        cluster_name: the HyperPod cluster's name, 1-63 characters. No default.
        eks_cluster_arn: the orchestrating EKS cluster (``HyperPodEksCluster.cluster_arn``). No default.
        region: the stack's Region (instance offerings, registries). No default.
        subnet_ids: 1-16 private subnets, the GPU subnet (``EfaNetwork.gpu_subnet``). No default.
        security_group_ids: 1-5 groups: the EFA group and the EKS cluster security group. No default.
        instance_groups: the groups (``InstanceGroup`` of the configuration), at least one, unique names. No default.
        lifecycle_bucket_name: the ``sagemaker-*`` bucket of the lifecycle scripts. No default.
        node_recovery: ``"Automatic"`` (default) or ``"None"`` (``hyperpod.node_recovery``).
        node_provisioning_mode: ``"Continuous"`` (default) or None (``hyperpod.node_provisioning_mode``).
        autoscaling: HyperPod-managed Karpenter; default: None (no autoscaling).
        tiered_storage: the cluster's ``TieredStorageConfig`` (mode and ``InstanceMemoryAllocationPercentage``), the
            memory of the managed ``tieredstorage`` L2 KV cache (docs/kv-cache.md); default: None (not rendered).
            Not create-only: changing the share updates the cluster in place.
        depends_on: what the cluster waits for (the dependencies chart, the core add-ons). Default: nothing.
        removal_policy: of the lifecycle bucket, and RETAIN keeps the cluster. Default: DESTROY.
        access_logs_bucket: where the lifecycle bucket logs its access. Default: none.
        tags: tags of the cluster. Default: none.
        image_registries: the ECR registries the nodes may pull from (infra/registries.py); default: this account's
            and AWS's platform registries of ``region``.

    Attributes: ``resource`` (the ``CfnCluster``), ``cluster_arn``, ``cluster_name``, ``execution_role``,
    ``node_policy``, ``lifecycle_bucket``, ``cluster_role`` (with autoscaling), ``instance_groups``,
    ``karpenter_manifests``, ``autoscaling_ready``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster_name: str,
        eks_cluster_arn: str,
        region: str,
        subnet_ids: Sequence[str],
        security_group_ids: Sequence[str],
        instance_groups: Sequence[InstanceGroup],
        lifecycle_bucket_name: str,
        node_recovery: NodeRecovery = "Automatic",
        node_provisioning_mode: NodeProvisioningMode | None = "Continuous",
        autoscaling: ClusterAutoScaling | None = None,
        tiered_storage: TieredStorage | None = None,
        depends_on: Sequence[IDependable] = (),
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY,
        access_logs_bucket: s3.IBucket | None = None,
        tags: Mapping[str, str] | None = None,
        image_registries: Sequence[Registry] | None = None,
    ) -> None:
        self._validate(cluster_name, instance_groups, subnet_ids, security_group_ids, node_recovery)
        self._validate_autoscaling(instance_groups, autoscaling, node_recovery, node_provisioning_mode)
        if tiered_storage is not None and not isinstance(tiered_storage, TieredStorage):
            raise ConfigError.single(None, "hyperpod.tiered_storage", tiered_storage,
                                     "must be a TieredStorage (hyperpod_dpd.config.hyperpod)")
        super().__init__(scope, id)
        self.tiered_storage = tiered_storage
        self.autoscaling = autoscaling
        self.cluster_name = cluster_name
        self.removal_policy = removal_policy
        self.lifecycle_bucket = secure_bucket(self, "LifecycleBucket", bucket_name=lifecycle_bucket_name,
                                              removal_policy=removal_policy, access_logs=access_logs_bucket)
        self.lifecycle_scripts = s3deploy.BucketDeployment(
            self, "LifecycleScripts", sources=[s3deploy.Source.asset(str(LIFECYCLE_DIR))],
            destination_bucket=self.lifecycle_bucket, destination_key_prefix=LIFECYCLE_PREFIX, prune=True)

        self.execution_role = iam.Role(
            self, "ExecutionRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"HyperPod instance role of {cluster_name}: VPC CNI ENIs, image pulls, lifecycle scripts",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(INSTANCE_ROLE_POLICY)])
        source_conditions.mark_unbound(self.execution_role, "hyperpod-instance-role")
        account = cdk.Stack.of(self).account
        self._grant_node_permissions(eks_cluster_arn, image_registries if image_registries is not None else
                                     node_registries(region=region, account=account))
        self.cluster_role: iam.Role | None = None
        self.cluster_policy: iam.Policy | None = None
        if autoscaling is not None:
            self.cluster_role, self.cluster_policy = self._cluster_role(cluster_name)

        source_uri = f"s3://{lifecycle_bucket_name}/{LIFECYCLE_PREFIX}/"
        self.resource = sagemaker.CfnCluster(
            self, "Resource",
            cluster_name=cluster_name,
            orchestrator=sagemaker.CfnCluster.OrchestratorProperty(
                eks=sagemaker.CfnCluster.ClusterOrchestratorEksConfigProperty(cluster_arn=eks_cluster_arn)),
            vpc_config=sagemaker.CfnCluster.VpcConfigProperty(
                security_group_ids=list(security_group_ids), subnets=list(subnet_ids)),
            node_recovery=node_recovery,
            node_provisioning_mode=node_provisioning_mode,
            auto_scaling=sagemaker.CfnCluster.ClusterAutoScalingConfigProperty(
                mode="Enable" if autoscaling.enabled else "Disable", auto_scaler_type=AUTOSCALER_TYPE)
            if autoscaling is not None else None,
            cluster_role=self.cluster_role.role_arn if self.cluster_role is not None else None,
            tiered_storage_config=sagemaker.CfnCluster.TieredStorageConfigProperty(
                mode=tiered_storage.mode, instance_memory_allocation_percentage=tiered_storage.memory_percent)
            if tiered_storage is not None else None,
            instance_groups=[self._group(g, source_uri) for g in instance_groups],
            tags=[cdk.CfnTag(key=k, value=v) for k, v in sorted((tags or {}).items())] or None,
        )
        if removal_policy == cdk.RemovalPolicy.RETAIN:  # the GPU capacity (and a training plan's reservation) outlives the stack
            self.resource.apply_removal_policy(removal_policy)
        self.resource.node.add_dependency(self.lifecycle_scripts, self.execution_role, *depends_on)
        if self.cluster_policy is not None:  # HyperPod may scale as soon as autoscaling is enabled
            self.resource.node.add_dependency(self.cluster_policy)
        self._acknowledge_script_copier()
        self._acknowledge_capacity_block_types(region, instance_groups)
        self._acknowledge_autoscaled_health_checks(instance_groups)
        self.instance_groups = tuple(instance_groups)
        self.karpenter_manifests: dict[str, eks.KubernetesManifest] = {}
        self.autoscaling_ready: AutoScalingReady | None = None

    @property
    def cluster_arn(self) -> str:
        """The HyperPod cluster's ARN (``Fn::GetAtt <Resource>.ClusterArn``, the CfnCluster's ``ClusterArn``
        attribute: cfn-lint's registry schema of AWS::SageMaker::Cluster lists it among readOnlyProperties)."""
        return self.resource.attr_cluster_arn

    @property
    def autoscaled_groups(self) -> tuple[InstanceGroup, ...]:
        return tuple(g for g in self.instance_groups if g.autoscaled)

    def add_karpenter_resources(self, cluster: eks.ICluster) -> dict[str, eks.KubernetesManifest]:
        """One manifest per autoscaled group (its HyperpodNodeClass and NodePool) on ``cluster``, applied once HyperPod
        reports AutoScaling InService (it installs their CRDs then): each depends on :attr:`autoscaling_ready`, which
        exists only when some group autoscales. Returns the manifests by group name."""
        groups = self.autoscaled_groups
        if not groups:
            return self.karpenter_manifests
        # _validate_autoscaling: autoscaled groups need autoscaling, which comes with the cluster role
        assert self.autoscaling is not None and self.cluster_role is not None
        if self.autoscaling_ready is None:
            self.autoscaling_ready = AutoScalingReady(
                self, "AutoScalingReady", cluster_arn=self.cluster_arn,
                cluster_name=self.cluster_name, removal_policy=self.removal_policy,
                # the cluster's AutoScaling and role as rendered above, and the groups that need Karpenter
                configuration={"AutoScaling": {"Mode": "Enable", "AutoScalerType": AUTOSCALER_TYPE},
                               "ClusterRole": self.cluster_role.role_arn,
                               "AutoscaledGroups": sorted(g.name for g in groups)})
        for group in groups:
            manifest = eks.KubernetesManifest(
                self, f"Karpenter-{group.name}", cluster=cluster, overwrite=True,
                manifest=karpenter_manifests(group, consolidate_after_minutes=self.autoscaling.consolidate_after_minutes))
            manifest.node.add_dependency(self.resource, self.autoscaling_ready.resource)
            self.karpenter_manifests[group.name] = manifest
        return self.karpenter_manifests

    # -- pieces ----------------------------------------------------------------------------------------------------

    def _group(self, group: InstanceGroup, source_uri: str) -> sagemaker.CfnCluster.ClusterInstanceGroupProperty:
        checks = list(group.effective_deep_health_checks)
        taints = [sagemaker.CfnCluster.ClusterKubernetesTaintProperty(key=t.key, value=t.value, effect=t.effect)
                  for t in group.taints]
        return sagemaker.CfnCluster.ClusterInstanceGroupProperty(
            instance_group_name=group.name,
            instance_type=group.instance_type,
            instance_count=group.count,
            min_instance_count=group.min_count,
            execution_role=self.execution_role.role_arn,
            life_cycle_config=sagemaker.CfnCluster.ClusterLifeCycleConfigProperty(
                source_s3_uri=source_uri, on_create=ON_CREATE),
            instance_storage_configs=[sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                ebs_volume_config=sagemaker.CfnCluster.ClusterEbsVolumeConfigProperty(volume_size_in_gb=group.ebs_volume_gb))],
            on_start_deep_health_checks=checks or None,
            training_plan_arn=group.training_plan_arn,
            threads_per_core=group.threads_per_core,
            kubernetes_config=sagemaker.CfnCluster.ClusterKubernetesConfigProperty(
                labels=dict(sorted(group.node_labels.items())), taints=taints or None),
        )

    def _grant_node_permissions(self, eks_cluster_arn: str, registries: Sequence[Registry]) -> None:
        """What the VPC CNI and kubelet on a HyperPod node need beyond the managed instance policy; image pulls only
        from ``registries``.

        The actions are those of AWS's execution role for HyperPod on EKS (aws/sagemaker-hyperpod-cluster-setup
        @ 2259297, ``eks/cloudformation/sagemaker-iam-role-template.yaml``, ``ExecutionRole``: its
        ``<prefix>_AmazonEKS_CNI_Policy`` and ``<prefix>-Policy`` statements), less ``cloudwatch:DescribeAlarms``
        (nothing on the nodes reads alarms), with each action on the resource types the Service Authorization
        Reference lists for it instead of AWS's ``*``: the ENI calls on this account's and Region's interfaces,
        subnets, security groups and instances, the image pulls on the registries' repositories,
        ``eks-auth:AssumeRoleForPodIdentity`` on this cluster, the lifecycle scripts on their bucket and prefix.
        """
        def ec2_arn(resource: str) -> str:
            return arn(self, "ec2", f"{resource}/*")

        statements = [
            iam.PolicyStatement(
                sid="VpcCniEniManagement",
                actions=["ec2:AssignPrivateIpAddresses", "ec2:AttachNetworkInterface", "ec2:CreateNetworkInterface",
                         "ec2:DeleteNetworkInterface", "ec2:DetachNetworkInterface", "ec2:ModifyNetworkInterfaceAttribute",
                         "ec2:UnassignPrivateIpAddresses", "ec2:CreateNetworkInterfacePermission",
                         "ec2:DeleteNetworkInterfacePermission"],
                resources=[ec2_arn("network-interface"), ec2_arn("subnet"), ec2_arn("security-group"), ec2_arn("instance")]),
            iam.PolicyStatement(
                sid="VpcCniTagEnis", actions=["ec2:CreateTags"], resources=[ec2_arn("network-interface")]),
            iam.PolicyStatement(
                sid="DescribeNetworking",  # EC2 Describe* actions support no resource-level permissions
                actions=["ec2:DescribeInstances", "ec2:DescribeTags", "ec2:DescribeNetworkInterfaces",
                         "ec2:DescribeInstanceTypes", "ec2:DescribeSubnets", "ec2:DescribeVpcs",
                         "ec2:DescribeDhcpOptions", "ec2:DescribeSecurityGroups"],
                resources=["*"]),
            iam.PolicyStatement(
                sid="PullImages", actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
                resources=repository_arns(self, registries)),
            iam.PolicyStatement(sid="EcrToken", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
            iam.PolicyStatement(
                sid="PodIdentity", actions=["eks-auth:AssumeRoleForPodIdentity"], resources=[eks_cluster_arn]),
            iam.PolicyStatement(
                sid="ListLifecycleScripts", actions=["s3:ListBucket"], resources=[self.lifecycle_bucket.bucket_arn]),
            iam.PolicyStatement(
                sid="ReadLifecycleScripts", actions=["s3:GetObject"],
                resources=[self.lifecycle_bucket.arn_for_objects(f"{LIFECYCLE_PREFIX}/*")]),
        ]
        policy = iam.Policy(self, "NodePolicy", statements=statements)
        policy.attach_to_role(self.execution_role)
        self.node_policy = policy
        nag.acknowledge_wildcards(policy, statements, {
            "VpcCniEniManagement": "The VPC CNI creates, attaches and deletes ENIs whose ids are not known in advance; "
                                   "scoped to this account and Region",
            "VpcCniTagEnis": "The VPC CNI tags the ENIs it creates; their ids are not known in advance",
            "DescribeNetworking": "EC2 Describe* actions support no resource-level permissions",
            "PullImages": "Any repository of the registries the nodes' images come from (infra/registries.py: this "
                          "account's, AWS's registries of the platform's pods, those the configured images name); "
                          "the repository names are the images', chosen by AWS and the endpoints",
            "EcrToken": "ecr:GetAuthorizationToken supports no resource-level permissions",
            "ReadLifecycleScripts": "HyperPod reads every lifecycle script under the prefix it is given",
        })
        nag.acknowledge_managed_policies(self.execution_role, {
            INSTANCE_ROLE_POLICY: "HyperPod requires this AWS managed policy on every instance-group execution role"})

    def _cluster_role(self, cluster_name: str) -> tuple[iam.Role, iam.Policy]:
        """The role HyperPod's Karpenter assumes to add and remove nodes: the documented policy ("Create an IAM role
        for HyperPod autoscaling with Karpenter"), narrowed from any account and Region to this stack's."""
        role = iam.Role(
            self, "ClusterRole", assumed_by=iam.ServicePrincipal(CLUSTER_ROLE_PRINCIPAL),
            description=f"HyperPod autoscaling (Karpenter) of {cluster_name}: adds and removes cluster nodes")
        source_conditions.mark_unbound(role, "hyperpod-cluster-role")
        statements = [
            iam.PolicyStatement(
                sid="ScaleClusterNodes", actions=["sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes"],
                resources=[arn(self, "sagemaker", "cluster/*")]),
            iam.PolicyStatement(
                sid="NodeVolumeKeyGrants", actions=["kms:CreateGrant", "kms:DescribeKey"],
                resources=[arn(self, "kms", "key/*")],
                conditions={"StringLike": {"kms:ViaService": f"sagemaker.{cdk.Stack.of(self).region}.{cdk.Aws.URL_SUFFIX}"},
                            "Bool": {"kms:GrantIsForAWSResource": "true"},
                            "ForAllValues:StringEquals": {"kms:GrantOperations": list(KMS_GRANT_OPERATIONS)}}),
        ]
        policy = iam.Policy(self, "ClusterPolicy", statements=statements)
        policy.attach_to_role(role)
        nag.acknowledge_wildcards(policy, statements, {
            "ScaleClusterNodes": "The HyperPod cluster ARN ends in an id assigned at creation, and the role must be "
                                 "usable when the cluster is created; scoped to clusters of this account and Region",
            "NodeVolumeKeyGrants": "Grants on whichever key encrypts the node volumes, only through SageMaker in this "
                                   "Region and only for AWS resources (the documented conditions)",
        })
        return role, policy

    def _acknowledge_autoscaled_health_checks(self, groups: Sequence[InstanceGroup]) -> None:
        """HPDPD-HP2 wants deep health checks on GPU groups; Karpenter-managed groups cannot run them."""
        scaled = [g.name for g in groups if g.autoscaled and g.is_gpu]
        if scaled:
            guardrails.acknowledge(self.resource, "HPDPD-HP2", f"{', '.join(scaled)} are scaled by HyperPod's "
                                   "Karpenter, which does not support instance groups with deep health checks (a "
                                   "check takes 60-90 minutes while the pods that asked for the node stay pending)")

    def _acknowledge_script_copier(self) -> None:
        """The BucketDeployment handler (aws-cdk-lib) that copies the lifecycle scripts into the bucket."""
        role = self.lifecycle_scripts.handler_role
        why = "aws-cdk-lib's BucketDeployment handler copies the lifecycle scripts from the CDK asset bucket"
        policy = role.node.try_find_child("DefaultPolicy")
        nag.acknowledge_generated_policy(policy, f"{why}; it needs these S3 actions on both buckets")
        assert policy is not None  # acknowledge_generated_policy raised otherwise
        guardrails.acknowledge(policy, "HPDPD-IAM1", f"{why}; aws-cdk-lib writes the asset bucket ARN with the partition "
                                                     "of the stack's Region")
        nag.acknowledge_managed_policies(role, {"service-role/AWSLambdaBasicExecutionRole": f"{why}; it writes its logs"})
        function = next(c for c in cdk.Stack.of(self).node.children if c.node.id.startswith("Custom::CDKBucketDeployment"))
        nag.acknowledge_generated_function(function, f"{why}; its runtime is chosen and bumped by aws-cdk-lib")

    def _acknowledge_capacity_block_types(self, region: str, groups: Sequence[InstanceGroup]) -> None:
        """Acknowledge rule E3644 on this resource only, for exactly the types and validators that need it."""
        types = sorted({g.instance_type for g in groups})
        unpriced = [t for t in types if region not in INSTANCE_TYPES[t].priced_regions]
        lagging = [t for t in types if region in INSTANCE_TYPES[t].cdk_validator_lags]
        reasons = []
        if unpriced:
            reasons.append(f"{', '.join(unpriced)} in {region} is sold through capacity blocks/training plans, which "
                           "the pricing-based instance list of E3644 omits; the config requires a training plan for it")
            self.resource.add_metadata("cfn-lint", {"config": {"ignore_checks": [E3644]}})
        if lagging:
            reasons.append(f"{', '.join(lagging)} is offered in {region} (cfn-lint 1.58 pricing data) but the older "
                           "copy of that list bundled with aws-cdk-lib's validator does not have it yet")
        if reasons:
            cdk.Validations.of(self.resource).acknowledge(
                cdk.Acknowledgment(id=f"CloudFormation-Validate::{E3644}", reason="; ".join(reasons)))

    @staticmethod
    def _validate_autoscaling(groups: Sequence[InstanceGroup], autoscaling: ClusterAutoScaling | None,
                              node_recovery: str, node_provisioning_mode: str | None) -> None:
        where = "HyperPodCluster"
        scaled = [g.name for g in groups if g.autoscaled]
        if scaled and (autoscaling is None or not autoscaling.enabled):
            raise ConfigError.single(None, f"{where}.autoscaling", None if autoscaling is None else autoscaling.enabled,
                                     f"groups {', '.join(scaled)} autoscale: enable cluster autoscaling")
        if autoscaling is None or not autoscaling.enabled:
            return
        if node_provisioning_mode != "Continuous":
            raise ConfigError.single(None, f"{where}.node_provisioning_mode", node_provisioning_mode,
                                     "must be 'Continuous' for Karpenter autoscaling")
        if node_recovery != "Automatic":
            raise ConfigError.single(None, f"{where}.node_recovery", node_recovery,
                                     "must be 'Automatic' for Karpenter autoscaling")
        for group in groups:
            if group.autoscaled and (group.count or group.role == "system"):
                raise ConfigError.single(None, f"{where}.instance_groups", group.name,
                                         "an autoscaled group must be a prefill or decode group with count 0")

    @staticmethod
    def _validate(name: str, groups: Sequence[InstanceGroup], subnets: Sequence[str], sgs: Sequence[str],
                  node_recovery: str) -> None:
        where = "HyperPodCluster"
        if not groups:
            raise ConfigError.single(None, f"{where}.instance_groups", [], "needs at least one instance group")
        names = [g.name for g in groups]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError.single(None, f"{where}.instance_groups", duplicates, "instance group names must be unique")
        if not 1 <= len(subnets) <= 16:
            raise ConfigError.single(None, f"{where}.subnet_ids", list(subnets), "needs 1-16 private subnets")
        if not 1 <= len(sgs) <= 5:
            raise ConfigError.single(None, f"{where}.security_group_ids", list(sgs), "needs 1-5 security groups")
        if node_recovery not in ("Automatic", "None"):
            raise ConfigError.single(None, f"{where}.node_recovery", node_recovery, "must be 'Automatic' or 'None'")
        if not cdk.Token.is_unresolved(name) and not (1 <= len(name) <= 63):
            raise ConfigError.single(None, f"{where}.cluster_name", name, "must be 1-63 characters")
