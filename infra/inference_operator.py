"""InferenceOperator: the HyperPod Inference Operator (3.2+, for DPD) as an EKS add-on with everything it needs.

Order on deploy: prerequisite add-ons (S3 CSI, FSx CSI, metrics-server, cert-manager) -> HyperPod cluster ->
``amazon-sagemaker-hyperpod-inference`` (its init container refuses to start without the CSI drivers and the
cert-manager CRDs; ``hyperpodClusterArn`` must name a cluster that exists). The IAM roles and the TLS bucket have no
ordering constraint beyond the add-on referring to them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hyperpod_dpd.catalogue.gateway import (
    ADDON_GATEWAY_KEY,
    ADDON_OPERATOR_KEY,
    GATEWAY_MANAGED_POLICY,
    GATEWAY_MINIMUM_ADDON,
    GATEWAY_MINIMUM_ADDON_VERSION,
    GATEWAY_SUBJECT,
)
from hyperpod_dpd.catalogue.operator import (
    DPD_MINIMUM_ADDON,
    DPD_MINIMUM_OPERATOR,
    EXECUTION_ROLE_MANAGED_POLICY,
    EXECUTION_ROLE_PREFIX,
    GATED_MODEL_MANAGED_POLICY,
    INFERENCE_ADDON,
    INFERENCE_NAMESPACE,
    OBSERVABILITY_ADDON,
    OBSERVABILITY_NAMESPACE,
    OBSERVABILITY_SERVICE_ACCOUNT,
    OBSERVABILITY_TAGS,
    OPERATOR_RELEASES,
    PREREQUISITE_ADDONS,
    TLS_BUCKET_PREFIX,
    operator_for_addon,
)
from hyperpod_dpd.catalogue.versions import parse_addon_version
from hyperpod_dpd.config.base import addon_version_issues
from hyperpod_dpd.config.operator import ModelBucket, bucket_name_problem
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra import nag, policies, source_conditions
from hyperpod_dpd.infra.arns import arn
from hyperpod_dpd.infra.buckets import secure_bucket
from hyperpod_dpd.infra.eks_cluster import HyperPodEksCluster
from hyperpod_dpd.infra.hyperpod_cluster import HyperPodCluster
from hyperpod_dpd.infra.observability import ObservabilityDestination, ObservabilityOptions, addon_configuration

# IRSA subjects (SageMaker HyperPod inference setup documentation): namespace:service-account of each controller.
OPERATOR_SERVICE_ACCOUNT = f"system:serviceaccount:{INFERENCE_NAMESPACE}:hyperpod-inference-controller-manager"
ALB_SERVICE_ACCOUNT = f"system:serviceaccount:{INFERENCE_NAMESPACE}:aws-load-balancer-controller"
KEDA_SERVICE_ACCOUNT = f"system:serviceaccount:{INFERENCE_NAMESPACE}:keda-operator"
GATED_MODEL_SERVICE_ACCOUNTS = "system:serviceaccount:*:hyperpod-inference-service-account*"
CSI_SERVICE_ACCOUNTS = {p.name: f"system:serviceaccount:{p.service_account}" for p in PREREQUISITE_ADDONS if p.service_account}


class InferenceOperator(Construct):
    """Install the HyperPod Inference Operator on an environment's EKS and HyperPod clusters.

    * ``amazon-sagemaker-hyperpod-inference`` at the catalogue version of ``operator_version`` (or ``addon_version``),
      configured with the execution role, TLS bucket, HyperPod cluster ARN, load balancer controller and KEDA
      roles (and the gated-model role when asked for).
    * The prerequisite add-ons at or above their minimums; both CSI drivers always, because the operator's init
      container checks for both.
    * IAM roles with IRSA trust on the cluster's OIDC provider: the execution role (name starts with
      ``SageMakerHyperPodInference``), ALB controller, KEDA, S3 CSI (read-only on the model buckets), FSx CSI.
    * The TLS certificate bucket ``hyperpod-tls-...``: encrypted, TLS-only, public access blocked, retained when the
      removal policy says so; optional model buckets, created or imported.
    * With ``observability``: the observability add-on, configured to write to an Amazon Managed Prometheus workspace
      (created or existing, :class:`~hyperpod_dpd.infra.observability.ObservabilityDestination`, optionally with
      Grafana), and its collector's Pod Identity role, which may remote-write to that workspace only.

    ``require_dpd`` (set when the environment declares DPD endpoints) refuses operators older than 3.2.
    The primary child ``Resource`` is the inference ``CfnAddon``.

    Args:
        eks_cluster: the cluster the add-ons go on (its OIDC provider trusts the IRSA roles). No default.
        hyperpod_cluster: the HyperPod cluster the operator serves (``hyperpodClusterArn``); the add-on waits for it.
            No default.
        operator_version: an operator release of the catalogue (``hyperpod_dpd.catalogue.operator.OPERATOR_RELEASES``,
            the configuration's ``operator.version``). No default.
        execution_role_name: the execution role's name, ``SageMakerHyperPodInference...``, at most 64 characters.
            No default (the configuration derives it from the cluster name).
        tls_bucket_name: the TLS certificate bucket, ``hyperpod-tls...``. No default.
        addon_version: the add-on version; default: the release's own, never older than it.
        prerequisite_versions: overrides of the prerequisite add-ons' versions by name; default: the catalogue's pins.
        model_buckets: the buckets the model weights come from, created or imported, each in the stack's Region, each
            name once; default: none.
        gated_model_access: also the role that downloads gated JumpStart models. Default: False.
        observability: the observability add-on and its Prometheus destination; default: None (no add-on).
        require_dpd: refuse an operator older than DPD needs. Default: False.
        gateway: also the Inference Gateway (an add-on build from v2.0.0-eksbuild.2): its controller's IRSA role,
            created before the add-on and passed as ``inferenceGateway.serviceAccount.roleArn``. Default: False.
        removal_policy: of the buckets and the observability workspace. Default: DESTROY.
        access_logs_bucket: where the created buckets write their access logs; default: none.

    Attributes: ``model_buckets`` (a read-only mapping of bucket name to ``s3.IBucket``, in configuration order),
    ``tls_bucket``, ``execution_role``, ``resource`` (the add-on), ``prerequisites``, ``observability_destination``.
    Read access to model weights for a role of your own: :meth:`grant_model_read`.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        eks_cluster: HyperPodEksCluster,
        hyperpod_cluster: HyperPodCluster,
        operator_version: str,
        execution_role_name: str,
        tls_bucket_name: str,
        addon_version: str | None = None,
        prerequisite_versions: Mapping[str, str] | None = None,
        model_buckets: Sequence[ModelBucket] = (),
        gated_model_access: bool = False,
        observability: ObservabilityOptions | None = None,
        require_dpd: bool = False,
        gateway: bool = False,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY,
        access_logs_bucket: s3.IBucket | None = None,
    ) -> None:
        region = cdk.Stack.of(scope).region
        versions = self._resolve_versions(operator_version, addon_version, prerequisite_versions or {}, require_dpd)
        if gateway and parse_addon_version(versions[0]) < GATEWAY_MINIMUM_ADDON:
            raise ConfigError.single(None, "InferenceOperator.addon_version", versions[0],
                                     f"has no Inference Gateway: the add-on bundles it from {GATEWAY_MINIMUM_ADDON_VERSION}")
        self._validate_names(execution_role_name, tls_bucket_name, model_buckets, region)
        if observability is not None:
            ObservabilityDestination.check(scope, prometheus_workspace_arn=observability.prometheus_workspace_arn,
                                           grafana=observability.grafana)
        super().__init__(scope, id)
        self.addon_version, self.prerequisite_versions = versions
        self.release = OPERATOR_RELEASES[operator_version]
        cluster = eks_cluster.cluster
        self._provider = eks_cluster.oidc_provider

        self._access_logs = access_logs_bucket
        self.tls_bucket = secure_bucket(self, "TlsBucket", bucket_name=tls_bucket_name, removal_policy=removal_policy,
                                        access_logs=access_logs_bucket)
        self.model_buckets: Mapping[str, s3.IBucket] = MappingProxyType(
            {b.name: self._model_bucket(i, b, removal_policy) for i, b in enumerate(model_buckets)})

        self.execution_role = iam.Role(
            self, "ExecutionRole", role_name=execution_role_name,
            assumed_by=iam.CompositePrincipal(self._sagemaker(),
                                              self._irsa("ExecutionRole", OPERATOR_SERVICE_ACCOUNT, like=True)),
            description="HyperPod Inference Operator execution role (SageMaker models/endpoints, TLS certificates)",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(EXECUTION_ROLE_MANAGED_POLICY)])
        self._grant_tls_bucket()
        self.alb_role = self._irsa_role("LoadBalancerControllerRole", ALB_SERVICE_ACCOUNT,
                                        policies.load_balancer_controller(self), "AWS Load Balancer Controller of the inference add-on")
        self.keda_role = self._irsa_role("KedaRole", KEDA_SERVICE_ACCOUNT, policies.keda_operator(self),
                                         "KEDA of the inference add-on: reads autoscaling metrics")
        self.s3_csi_role = self._irsa_role(
            "S3CsiRole", CSI_SERVICE_ACCOUNTS["aws-mountpoint-s3-csi-driver"],
            policies.s3_model_reader([b.bucket_arn for b in self.model_buckets.values()]), "Mountpoint for S3 CSI driver: model buckets, read-only",
            exact=True)
        self.fsx_csi_role = self._irsa_role(
            "FsxCsiRole", CSI_SERVICE_ACCOUNTS["aws-fsx-csi-driver"],
            policies.fsx_csi_controller(self, [b.bucket_arn for b in self.model_buckets.values()]), "FSx for Lustre CSI controller",
            exact=True)
        self.gated_model_role: iam.Role | None = None
        if gated_model_access:
            self.gated_model_role = iam.Role(
                self, "GatedModelRole",
                assumed_by=iam.CompositePrincipal(self._sagemaker(),
                                                  self._irsa("GatedModelRole", GATED_MODEL_SERVICE_ACCOUNTS, like=True)),
                description="Downloads gated JumpStart models for the inference operator",
                managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(GATED_MODEL_MANAGED_POLICY)])
            nag.acknowledge_managed_policies(self.gated_model_role, {
                GATED_MODEL_MANAGED_POLICY: "The inference add-on expects this AWS managed policy for gated JumpStart models"})

        self.gateway_role: iam.Role | None = None
        if gateway:  # GATEWAY_PAGE: "Create the role before you install the add-on"
            self.gateway_role = iam.Role(
                self, "GatewayControllerRole", assumed_by=self._irsa("GatewayControllerRole", GATEWAY_SUBJECT, like=False),
                description="Inference Gateway controller: imports, tags and deletes the TLS certificates it issues",
                managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(GATEWAY_MANAGED_POLICY)])
            nag.acknowledge_managed_policies(self.gateway_role, {
                GATEWAY_MANAGED_POLICY: "The inference add-on's gateway controller expects this AWS managed policy "
                                        "(ACM import, tag, describe and delete of the certificates it creates)"})

        self.prerequisites: dict[str, eks.CfnAddon] = {}
        roles = {"aws-mountpoint-s3-csi-driver": self.s3_csi_role, "aws-fsx-csi-driver": self.fsx_csi_role}
        for addon in PREREQUISITE_ADDONS:
            role = roles.get(addon.name)
            resource = eks.CfnAddon(
                self, f"Addon-{addon.name}", cluster_name=cluster.cluster_name, addon_name=addon.name,
                addon_version=self.prerequisite_versions[addon.name], resolve_conflicts="OVERWRITE",
                service_account_role_arn=role.role_arn if role else None)
            for core in eks_cluster.addons.values():
                resource.add_resource_dependency(core)
            self.prerequisites[addon.name] = resource
        # Prerequisites first, so HyperPod nodes come up with the CSI drivers and cert-manager in place.
        for resource in self.prerequisites.values():
            hyperpod_cluster.resource.add_resource_dependency(resource)

        self.resource = eks.CfnAddon(
            self, "Resource", cluster_name=cluster.cluster_name, addon_name=INFERENCE_ADDON,
            addon_version=self.addon_version, resolve_conflicts="OVERWRITE",
            configuration_values=cdk.Stack.of(self).to_json_string(self._configuration(hyperpod_cluster)))
        self.resource.add_resource_dependency(hyperpod_cluster.resource)
        for resource in self.prerequisites.values():
            self.resource.add_resource_dependency(resource)
        if self.gateway_role is not None:  # the controller reads its role when it starts
            self.resource.node.add_dependency(self.gateway_role)

        self.observability_addon: eks.CfnAddon | None = None
        self.observability_destination: ObservabilityDestination | None = None
        if observability is not None:
            self._observability(eks_cluster, hyperpod_cluster, observability, removal_policy)

    def model_bucket(self, name: str) -> s3.IBucket:
        """The model bucket named ``name``; an unknown name is a :class:`ConfigError` naming the configured ones."""
        if name not in self.model_buckets:
            raise ConfigError.single(None, "InferenceOperator.model_bucket", name, "is not a model bucket of this "
                                     f"operator: {', '.join(self.model_buckets) or 'none are configured'}")
        return self.model_buckets[name]

    def grant_model_read(self, grantee: iam.IGrantable, bucket: str | None = None) -> iam.Grant:
        """Read access for ``grantee`` to one model bucket (``bucket``, its name) or, by default, to all of them,
        through each bucket's own ``grant_read`` (aws-cdk-lib aws-s3/lib/bucket.ts: ``s3:GetObject*``,
        ``s3:GetBucket*``, ``s3:List*`` on the bucket and its objects, and the key's read actions when the bucket has
        a KMS key). The IAM5 findings the grant adds to the grantee's policy are acknowledged on the grantee by exact
        id (:func:`~hyperpod_dpd.infra.nag.acknowledge_grant`), so the caller names no logical id of this construct.
        No model bucket (or an unknown name) is a :class:`ConfigError`: a grant of nothing is a mistake.
        """
        if bucket is None and not self.model_buckets:
            raise ConfigError.single(None, "InferenceOperator.grant_model_read", None,
                                     "there is no model bucket to grant: configure operator.model_buckets")
        names = [bucket] if bucket is not None else list(self.model_buckets)
        grant: iam.Grant | None = None
        for name in names:
            one = self.model_bucket(name).grant_read(grantee)
            nag.acknowledge_grant(grantee, one, f"Read of the model weights in bucket {name} (aws-cdk-lib's "
                                  "Bucket.grant_read: its read actions on the bucket and every object in it), "
                                  "granted with grant_model_read")
            grant = one if grant is None else grant.combine(one)
        assert grant is not None
        return grant

    # -- validation ------------------------------------------------------------------------------------------------

    @staticmethod
    def _resolve_versions(operator_version: str, addon_version: str | None, prerequisites: Mapping[str, str],
                          require_dpd: bool) -> tuple[str, dict[str, str]]:
        where = "InferenceOperator"
        if operator_version not in OPERATOR_RELEASES:
            raise ConfigError.single(None, f"{where}.operator_version", operator_version,
                                     f"must be a known operator release: {', '.join(OPERATOR_RELEASES)}")
        release = OPERATOR_RELEASES[operator_version]
        addon = addon_version or release.addon_version
        try:
            parsed = parse_addon_version(addon)
        except ValueError as exc:
            raise ConfigError.single(None, f"{where}.addon_version", addon, str(exc)) from None
        if parsed < release.addon:
            raise ConfigError.single(None, f"{where}.addon_version", addon,
                                     f"is older than operator {operator_version} ({release.addon_version})")
        if require_dpd and parsed < DPD_MINIMUM_ADDON:
            found = operator_for_addon(addon)
            raise ConfigError.single(
                None, f"{where}.addon_version", addon,
                f"DPD endpoints need inference operator {DPD_MINIMUM_OPERATOR} or newer (this is "
                f"{found.operator if found else 'older than 3.0'}); set the add-on to {DPD_MINIMUM_ADDON} or newer")
        problems = list(addon_version_issues(
            f"{where}.prerequisite_versions", prerequisites, {p.name: p.minimum_version for p in PREREQUISITE_ADDONS},
            kind="prerequisite", why="the inference operator needs"))
        if problems:
            raise ConfigError(None, problems)
        resolved = {p.name: prerequisites.get(p.name, p.pinned) for p in PREREQUISITE_ADDONS}
        return addon, resolved

    @staticmethod
    def _validate_names(role_name: str, tls_bucket: str, model_buckets: Sequence[ModelBucket], region: str) -> None:
        where = "InferenceOperator"
        if not cdk.Token.is_unresolved(role_name) and (not role_name.startswith(EXECUTION_ROLE_PREFIX) or len(role_name) > 64):
            raise ConfigError.single(None, f"{where}.execution_role_name", role_name,
                                     f"must start with '{EXECUTION_ROLE_PREFIX}' and have at most 64 characters")
        if not cdk.Token.is_unresolved(tls_bucket):
            problem = bucket_name_problem(tls_bucket)
            if problem or not tls_bucket.startswith(TLS_BUCKET_PREFIX):
                raise ConfigError.single(None, f"{where}.tls_bucket_name", tls_bucket,
                                         problem or f"must start with '{TLS_BUCKET_PREFIX}'")
        names = [b.name for b in model_buckets]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ConfigError.single(None, f"{where}.model_buckets", twice, "each bucket name once")
        for index, bucket in enumerate(model_buckets):
            bucket_region = bucket.region or region
            if not cdk.Token.is_unresolved(region) and bucket_region != region:
                raise ConfigError.single(None, f"{where}.model_buckets[{index}].region", bucket.region,
                                         f"must be the cluster's Region {region}")

    # -- pieces ----------------------------------------------------------------------------------------------------

    def _sagemaker(self) -> iam.IPrincipal:
        """SageMaker, for resources of this account and Region only (the operator's published trust,
        :func:`hyperpod_dpd.infra.source_conditions.sagemaker`)."""
        return source_conditions.service_principal("sagemaker.amazonaws.com", source_conditions.sagemaker(self))

    def _irsa(self, id: str, subject: str, *, like: bool) -> iam.IPrincipal:
        """Web-identity trust on the cluster's OIDC provider for one service account (``like`` allows wildcards).

        The issuer is a token, so the condition keys go through ``CfnJson`` (keys cannot be tokens).
        """
        issuer = self._provider.open_id_connect_provider_issuer
        audience = {f"{issuer}:aud": "sts.amazonaws.com"}
        subject_key = {f"{issuer}:sub": subject}
        if like:
            conditions = {"StringEquals": cdk.CfnJson(self, f"{id}Audience", value=audience),
                          "StringLike": cdk.CfnJson(self, f"{id}Subject", value=subject_key)}
        else:
            conditions = {"StringEquals": cdk.CfnJson(self, f"{id}Trust", value={**audience, **subject_key})}
        return iam.OpenIdConnectPrincipal(self._provider, conditions)

    def _irsa_role(self, id: str, subject: str, statements: list[iam.PolicyStatement], description: str,
                   *, exact: bool = False) -> iam.Role:
        role = iam.Role(self, id, assumed_by=self._irsa(id, subject, like=not exact), description=description)
        if statements:
            policy = iam.Policy(self, f"{id}Policy", statements=statements)
            policy.attach_to_role(role)
            nag.acknowledge_wildcards(policy, statements, policies.WILDCARD_REASONS)
        return role

    def _grant_tls_bucket(self) -> None:
        """The managed policy covers ``hyperpod-tls*`` buckets; the inline grant keeps the role working if the
        managed policy changes, and limits object access to the caller's own account.

        Objects: the inline policy SageMaker asks for a TLS bucket of another name (SageMaker developer guide,
        sagemaker-hyperpod-model-deployment-setup.html); ListBucket: the managed policy's own; ACM: the certificate an
        endpoint names (``tlsConfig.customCertificateConfig``, k8s/endpoint.py), which no AWS page grants.
        """
        same_account = {"StringEquals": {"aws:ResourceAccount": cdk.Aws.ACCOUNT_ID}}
        statements = [
            iam.PolicyStatement(sid="ListTlsBucket", actions=["s3:ListBucket"], resources=[self.tls_bucket.bucket_arn]),
            iam.PolicyStatement(sid="ReadWriteTlsCertificates",
                                actions=["s3:GetObject", "s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject"],
                                resources=[self.tls_bucket.arn_for_objects("*")], conditions=same_account),
            iam.PolicyStatement(sid="ReadCustomCertificates", actions=["acm:DescribeCertificate", "acm:GetCertificate"],
                                resources=[arn(self, "acm", "certificate/*")]),
        ]
        policy = iam.Policy(self, "ExecutionRoleTlsPolicy", statements=statements)
        policy.attach_to_role(self.execution_role)
        nag.acknowledge_wildcards(policy, statements, policies.WILDCARD_REASONS)
        nag.acknowledge_managed_policies(self.execution_role, {
            EXECUTION_ROLE_MANAGED_POLICY: "The inference add-on expects this AWS managed policy on its execution role "
                                           "(SageMaker models and endpoints, ACM, ELB, tagged TLS objects)"})

    def _model_bucket(self, index: int, bucket: ModelBucket, removal_policy: cdk.RemovalPolicy) -> s3.IBucket:
        if not bucket.create:
            # from_bucket_arn keeps ${AWS::Partition}; from_bucket_name would write a literal partition
            return s3.Bucket.from_bucket_arn(self, f"ModelBucket{index}", f"arn:{cdk.Aws.PARTITION}:s3:::{bucket.name}")
        return secure_bucket(self, f"ModelBucket{index}", bucket_name=bucket.name, removal_policy=removal_policy,
                             access_logs=self._access_logs)

    def _configuration(self, hyperpod_cluster: HyperPodCluster) -> dict[str, Any]:
        """The add-on's configuration values (keys as in the add-on schema, not the Helm chart's)."""
        values: dict[str, Any] = {
            "executionRoleArn": self.execution_role.role_arn,
            "tlsCertificateS3Bucket": self.tls_bucket.bucket_name,
            "hyperpodClusterArn": hyperpod_cluster.cluster_arn,
            "alb": {"enabled": True, "serviceAccount": {"create": True, "roleArn": self.alb_role.role_arn}},
            "keda": {"enabled": True, "auth": {"aws": {"irsa": {"enabled": True, "roleArn": self.keda_role.role_arn}}}},
        }
        if self.gated_model_role is not None:
            values["jumpstartGatedModelDownloadRoleArn"] = self.gated_model_role.role_arn
        if self.gateway_role is not None:  # GATEWAY_PAGE, "Install the add-on"
            values[ADDON_OPERATOR_KEY] = {"enabled": True}
            values[ADDON_GATEWAY_KEY] = {"enabled": True, "serviceAccount": {"roleArn": self.gateway_role.role_arn}}
        return values

    def _observability(self, eks_cluster: HyperPodEksCluster, hyperpod_cluster: HyperPodCluster,
                       options: ObservabilityOptions, removal_policy: cdk.RemovalPolicy) -> None:
        """The metrics' destination (infra/observability.py), the add-on configured to write there, and Pod Identity
        (not IRSA) for its collector, through a standalone association as AWS recommends."""
        cluster = eks_cluster.cluster
        stack = cdk.Stack.of(self)
        destination = ObservabilityDestination(
            self, "ObservabilityDestination", name=cluster.cluster_name,
            prometheus_workspace_arn=options.prometheus_workspace_arn, grafana=options.grafana,
            removal_policy=removal_policy)
        self.observability_destination = destination
        role = iam.Role(
            self, "ObservabilityRole",
            assumed_by=iam.ServicePrincipal("pods.eks.amazonaws.com", conditions={
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnEquals": {"aws:SourceArn": eks_cluster.cluster_arn}}).with_session_tags(),
            description="HyperPod observability collector: remote-writes DPD metrics to Amazon Managed Prometheus")
        statements = policies.observability_collector(self, destination.workspace_arn)
        policy = iam.Policy(self, "ObservabilityPolicy", statements=statements)
        policy.attach_to_role(role)
        nag.acknowledge_wildcards(policy, statements, policies.WILDCARD_REASONS)
        self.observability_role = role
        self.observability_addon = eks.CfnAddon(
            self, "ObservabilityAddon", cluster_name=cluster.cluster_name, addon_name=OBSERVABILITY_ADDON,
            addon_version=options.addon_version, resolve_conflicts="OVERWRITE",
            configuration_values=stack.to_json_string(addon_configuration(destination, logging=options.logging)),
            tags=[cdk.CfnTag(key=k, value=v) for k, v in OBSERVABILITY_TAGS.items()])
        self.observability_addon.add_resource_dependency(hyperpod_cluster.resource)
        association = eks.CfnPodIdentityAssociation(
            self, "ObservabilityPodIdentity", cluster_name=cluster.cluster_name, namespace=OBSERVABILITY_NAMESPACE,
            service_account=OBSERVABILITY_SERVICE_ACCOUNT, role_arn=role.role_arn)
        # An adopted cluster that keeps its own pod identity agent has none here (docs/adopting.md: a prerequisite).
        agent = eks_cluster.addons.get("eks-pod-identity-agent")
        if agent is not None:
            self.observability_addon.add_resource_dependency(agent)
            association.add_resource_dependency(agent)
