"""Where the HyperPod observability add-on's metrics land: an Amazon Managed Prometheus workspace, and optionally an
Amazon Managed Grafana workspace that reads it.

The add-on (``amazon-sagemaker-hyperpod-observability``) runs an OpenTelemetry collector that remote-writes to the
workspace named in its configuration values; without one it has nowhere to send the DPD metrics. AWS's own install
(aws/sagemaker-hyperpod-cluster-setup, ``eks/cloudformation/observability-template.yaml``) creates the workspace or
takes an existing one, passes ``ampWorkspace.prometheusEndpoint``/``ampWorkspace.arn`` and the ``metricsProvider``
levels to the add-on, and gives the collector's Pod Identity role ``aps:RemoteWrite`` on that workspace only;
:func:`addon_configuration` and :func:`hyperpod_dpd.infra.policies.observability_collector` do the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
import jsonschema
from aws_cdk import aws_aps as aps
from aws_cdk import aws_grafana
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from hyperpod_dpd.catalogue.operator import (
    GRAFANA_REGIONS,
    OBSERVABILITY_CONFIGURATION_SCHEMA,
    OBSERVABILITY_METRIC_LEVELS,
    OBSERVABILITY_SCRAPE_INTERVAL,
    OBSERVABILITY_TAGS,
)
from hyperpod_dpd.config.operator import PROMETHEUS_WORKSPACE_ARN
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra import nag, policies
from hyperpod_dpd.infra.arns import arn


@dataclass(frozen=True, kw_only=True)
class ObservabilityOptions:
    """The HyperPod observability add-on (AMP/Grafana pipeline for the DPD dashboards), with its Pod Identity role.

    Args:
        addon_version: version of ``amazon-sagemaker-hyperpod-observability``. No default.
        prometheus_workspace_arn: an existing Amazon Managed Prometheus workspace of the stack's account and Region.
            Default: a new workspace, encrypted with its own KMS key.
        grafana: also create an Amazon Managed Grafana workspace (IAM Identity Center sign-in) that reads the
            Prometheus workspace. Default: no.
        logging: the add-on's CloudWatch Logs shipping (``logging.enabled``). Default: off.
    """

    addon_version: str
    prometheus_workspace_arn: str | None = None
    grafana: bool = False
    logging: bool = False


class ObservabilityDestination(Construct):
    """The Amazon Managed Prometheus workspace the observability add-on writes to, and an optional Grafana workspace.

    * ``prometheus_workspace_arn`` not given: an ``AWS::APS::Workspace`` aliased ``<name>-hyperpod-dpd``, encrypted
      with a customer managed KMS key (rotation on), tagged ``SageMaker=true`` as AWS's template tags it, removed or
      retained with ``removal_policy``; given: that workspace (no resource is created for it).
    * ``grafana``: an ``AWS::Grafana::Workspace`` (current account, IAM Identity Center sign-in, customer-managed
      permissions) whose role may query that one Prometheus workspace.

    Attributes: ``workspace_id``, ``workspace_arn`` (partition-aware), ``prometheus_endpoint`` (as the add-on takes
    it), ``workspace`` (the ``CfnWorkspace``, None when imported), ``grafana_workspace``/``grafana_name``/
    ``grafana_arn`` (None without Grafana).

    Args:
        name: the workspaces' name prefix (the EKS cluster's name). No default.
        prometheus_workspace_arn: an existing workspace of the stack's account and Region. Default: None (create one).
        grafana: also the Grafana workspace. Default: False.
        removal_policy: of the created workspace and its key. Default: DESTROY.
    """

    def __init__(self, scope: Construct, id: str, *, name: str, prometheus_workspace_arn: str | None = None,
                 grafana: bool = False, removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY) -> None:
        workspace_id = self.check(scope, prometheus_workspace_arn=prometheus_workspace_arn, grafana=grafana)
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)
        tags = [cdk.CfnTag(key=k, value=v) for k, v in OBSERVABILITY_TAGS.items()]
        self.workspace: aps.CfnWorkspace | None = None
        self.key: kms.Key | None = None
        if workspace_id is None:
            self.key = kms.Key(self, "WorkspaceKey", enable_key_rotation=True, removal_policy=removal_policy,
                               description=f"Encrypts the Amazon Managed Prometheus workspace of {name}")
            self.workspace = aps.CfnWorkspace(self, "Workspace", alias=f"{name}-hyperpod-dpd",
                                              kms_key_arn=self.key.key_arn, tags=tags)
            self.workspace.apply_removal_policy(removal_policy)
            workspace_id = self.workspace.attr_workspace_id
        self.workspace_id = workspace_id
        self.workspace_arn = arn(self, "aps", f"workspace/{workspace_id}")
        # As AWS's template writes it (no trailing slash); the URL suffix keeps it right in aws-cn.
        self.prometheus_endpoint = f"https://aps-workspaces.{stack.region}.{cdk.Aws.URL_SUFFIX}/workspaces/{workspace_id}"

        self.grafana_workspace: aws_grafana.CfnWorkspace | None = None
        self.grafana_role: iam.Role | None = None
        self.grafana_name: str | None = None
        self.grafana_arn: str | None = None
        if grafana:
            self._grafana(name, removal_policy)

    @staticmethod
    def check(scope: Construct, *, prometheus_workspace_arn: str | None, grafana: bool) -> str | None:
        """Refuse a workspace ARN of another account or Region, and Grafana where AWS's set-up does not create it,
        with one line (before anything joins the tree); return the id of an existing workspace."""
        stack = cdk.Stack.of(scope)
        where = "ObservabilityDestination"
        region = None if cdk.Token.is_unresolved(stack.region) else stack.region
        if grafana and region is not None and region not in GRAFANA_REGIONS:
            raise ConfigError.single(None, f"{where}.grafana", grafana, f"Amazon Managed Grafana is not offered in "
                                     f"{region} by the HyperPod set-up; allowed Regions: {', '.join(GRAFANA_REGIONS)}")
        if prometheus_workspace_arn is None:
            return None
        match = PROMETHEUS_WORKSPACE_ARN.fullmatch(prometheus_workspace_arn)
        if match is None:
            raise ConfigError.single(None, f"{where}.prometheus_workspace_arn", prometheus_workspace_arn,
                                     "must be an Amazon Managed Prometheus workspace ARN")
        for part, expected in (("account", stack.account), ("region", stack.region)):
            if not cdk.Token.is_unresolved(expected) and match[part] != expected:
                raise ConfigError.single(None, f"{where}.prometheus_workspace_arn", prometheus_workspace_arn,
                                         f"must be a workspace of the stack's {part} {expected}")
        return match["id"]

    def _grafana(self, name: str, removal_policy: cdk.RemovalPolicy) -> None:
        """A customer-managed-permissions workspace: its role is ours and reads the one Prometheus workspace."""
        stack = cdk.Stack.of(self)
        role = iam.Role(self, "GrafanaRole", description="Amazon Managed Grafana: reads the HyperPod DPD metrics",
                        assumed_by=iam.ServicePrincipal("grafana.amazonaws.com", conditions={
                            "StringEquals": {"aws:SourceAccount": stack.account}}))
        statements = policies.grafana_reader(self.workspace_arn)
        policy = iam.Policy(self, "GrafanaPolicy", statements=statements)
        policy.attach_to_role(role)
        nag.acknowledge_wildcards(policy, statements, policies.WILDCARD_REASONS)
        self.grafana_name = f"{name}-hyperpod-dpd"
        self.grafana_workspace = aws_grafana.CfnWorkspace(
            self, "Grafana", name=self.grafana_name, account_access_type="CURRENT_ACCOUNT",
            authentication_providers=["AWS_SSO"], permission_type="CUSTOMER_MANAGED", role_arn=role.role_arn,
            data_sources=["PROMETHEUS"], description="HyperPod DPD dashboards over the observability add-on's metrics")
        self.grafana_workspace.apply_removal_policy(removal_policy)
        self.grafana_role = role
        self.grafana_arn = arn(self, "grafana", f"/workspaces/{self.grafana_workspace.attr_id}")


def addon_configuration(destination: ObservabilityDestination, *, logging: bool = False) -> dict[str, Any]:
    """The add-on's configuration values, keyed as AWS's template passes them, checked against the derived schema.

    ``ampWorkspace`` and ``metricsProvider`` (the template's default level per category, 30 s scrapes) always;
    ``amgWorkspace`` with Grafana (AWS's add-on update Lambda adds it once the workspace exists); ``logging`` only
    when switched on (see :data:`OBSERVABILITY_CONFIGURATION_SCHEMA` for why).
    """
    values: dict[str, Any] = {
        "ampWorkspace": {"prometheusEndpoint": destination.prometheus_endpoint, "arn": destination.workspace_arn},
        "metricsProvider": {name: {"level": level, "scrapeInterval": OBSERVABILITY_SCRAPE_INTERVAL}
                            for name, (level, _) in OBSERVABILITY_METRIC_LEVELS.items()},
    }
    if destination.grafana_name is not None:
        values["amgWorkspace"] = {"workspaceName": destination.grafana_name, "arn": destination.grafana_arn}
    if logging:
        values["logging"] = {"enabled": True}
    jsonschema.validate(values, OBSERVABILITY_CONFIGURATION_SCHEMA)
    return values
