"""HyperPodDependencies: the HyperPod dependencies Helm chart, installed before the HyperPod cluster, pinned by digest.

Upstream publishes the chart to no Helm repository and never changes its version, so the chart is identified by the
commit it is packaged from (``HYPERPOD_CHART_COMMIT``) and by the digest of what was packaged: checked at deploy for
an ECR mirror (:class:`~hyperpod_dpd.infra.chart_digest.ChartDigestCheck`), at synth for a local directory.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from hyperpod_dpd.catalogue.instances import INSTANCE_TYPES
from hyperpod_dpd.catalogue.versions import (
    DIGEST_PATTERN,
    HYPERPOD_CHART_NAME,
    HYPERPOD_CHART_NAMESPACE,
    HYPERPOD_CHART_RELEASE,
    HYPERPOD_CHART_VERSION,
)
from hyperpod_dpd.config.dependencies_chart import ChartDirectoryError, directory_digest, ecr_chart
from hyperpod_dpd.config.hyperpod import TaintEffect
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra import guardrails, nag
from hyperpod_dpd.infra.chart_digest import ChartDigestCheck

HEALTH_TAINT_TOLERATION = {
    "key": "sagemaker.amazonaws.com/node-health-status", "operator": "Equal",
    "value": "Unschedulable", "effect": "NoSchedule",
}


@dataclass(frozen=True, kw_only=True)
class DependencyComponents:
    """Which sub-charts of the dependencies chart to run. Defaults suit an inference-only cluster.

    The health-monitoring agent and deep health checks are needed for automatic node recovery; the NVIDIA and EFA
    device plugins expose ``nvidia.com/gpu`` and ``vpc.amazonaws.com/efa`` to DPD pods. cert-manager and the
    inference operator come as EKS add-ons instead, and training components are off.

    Args:
        health_monitoring_agent: the health-monitoring agent (automatic node recovery). Default: True.
        deep_health_check: the deep health checks. Default: True.
        hyperpod_patching: HyperPod's node patching. Default: True.
        job_auto_restart: training job auto-restart. Default: False.
        training_operators: the Kubeflow training operators. Default: False.
        mpi_operator: the MPI operator. Default: False.
        neuron_device_plugin: the AWS Neuron device plugin (Trainium and Inferentia). Default: False.
    """

    health_monitoring_agent: bool = True
    deep_health_check: bool = True
    hyperpod_patching: bool = True
    job_auto_restart: bool = False
    training_operators: bool = False
    mpi_operator: bool = False
    neuron_device_plugin: bool = False


class HyperPodDependencies(Construct):
    """The HyperPod dependencies chart (``helm_chart/HyperPodHelmChart`` of aws/sagemaker-hyperpod-cli).

    The chart is published to no Helm repository, so it comes either from an ECR private registry the user mirrors
    it to (``repository``, where ``helm push`` put it; nothing is needed at synth time) or from a local chart directory
    shipped as an asset (``local_path``). ``digest`` is required with both: the manifest digest ``helm push`` printed,
    which ``DigestCheck`` compares with ECR's before Helm runs, or :func:`directory_digest` of the directory, compared
    here. Values are typed: region, and the device-plugin allow-lists generated from the declared GPU instance types
    (lists in Helm values replace, they do not merge).

    The primary child (``Resource``) is the ``HelmChart``; make the HyperPod cluster depend on this construct.

    Args:
        cluster: the EKS cluster the chart is installed on (its kubectl provider runs Helm). No default.
        region: the stack's Region (a chart value). No default.
        gpu_instance_types: the GPU types of the instance groups, from the catalogue, at least one. No default.
        repository: the chart's ECR private registry ``oci://<account>.dkr.ecr.<region>.amazonaws.com[/<path>]``;
            exactly one of ``repository`` and ``local_path``. Default: None.
        local_path: a local chart directory shipped as an asset. Default: None.
        digest: the chart's ``sha256:<64 hex>`` (helm push's, or :func:`directory_digest` of the directory). No
            usable default: None is refused.
        version: the chart version. Default: the catalogue's ``HYPERPOD_CHART_VERSION``.
        components: which sub-charts run. Default: :class:`DependencyComponents` ().
        timeout: Helm's timeout. Default: 15 minutes.
        removal_policy: of the Helm release and the digest check's log group. Default: DESTROY.
        gpu_taints: ``(key, effect)`` of the taints on the GPU groups; the device plugins must tolerate them, or no
            GPU or EFA device is advertised on those nodes (the chart's defaults tolerate only its own keys).
            Default: none.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        region: str,
        gpu_instance_types: Sequence[str],
        repository: str | None = None,
        local_path: Path | None = None,
        digest: str | None = None,
        version: str = HYPERPOD_CHART_VERSION,
        components: DependencyComponents = DependencyComponents(),
        timeout: cdk.Duration = cdk.Duration.minutes(15),
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY,
        gpu_taints: Sequence[tuple[str, TaintEffect]] = (),
    ) -> None:
        if (repository is None) == (local_path is None):
            given = [name for name, value in (("repository", repository), ("local_path", local_path)) if value is not None]
            raise ConfigError.single(None, "HyperPodDependencies", given, "pass exactly one of 'repository' or 'local_path'")
        ecr = ecr_chart(repository) if repository is not None else None
        if repository is not None and ecr is None:
            raise ConfigError.single(None, "HyperPodDependencies.repository", repository,
                                     "must be an ECR private registry, oci://<account>.dkr.ecr.<region>.amazonaws.com"
                                     "[/<path>]: the chart's digest is checked at deploy through ECR")
        if digest is None or not re.fullmatch(DIGEST_PATTERN, digest):
            raise ConfigError.single(None, "HyperPodDependencies.digest", digest,
                                     "must be the chart's sha256:<64 hex> digest (helm push's for a repository, the "
                                     "directory's for local_path)")
        if local_path is not None:
            _check_directory(local_path, digest)
        unknown = [t for t in gpu_instance_types if t not in INSTANCE_TYPES or not INSTANCE_TYPES[t].is_gpu]
        if unknown or not gpu_instance_types:
            raise ConfigError.single(None, "HyperPodDependencies.gpu_instance_types", list(gpu_instance_types),
                                     "must list at least one GPU instance type from the catalogue")
        super().__init__(scope, id)
        self.gpu_instance_types = tuple(dict.fromkeys(gpu_instance_types))
        self.values = self.chart_values(region, self.gpu_instance_types, components, gpu_taints)

        source: dict[str, Any]
        if ecr is not None:
            # aws-cdk-lib's Helm handler pulls ``Repository`` itself (helm pull <Repository> --version <Version>) and
            # reads no ``Chart`` for an oci:// repository, so Repository is the chart's own reference.
            source = {"chart": HYPERPOD_CHART_NAME, "repository": ecr.reference, "version": version}
        else:
            assert local_path is not None
            source = {"chart_asset": s3_assets.Asset(self, "ChartAsset", path=str(local_path))}
        self.chart = eks.HelmChart(
            self, "Resource", cluster=cluster, release=HYPERPOD_CHART_RELEASE, namespace=HYPERPOD_CHART_NAMESPACE,
            values=self.values, timeout=timeout, wait=False, atomic=False, removal_policy=removal_policy, **source)
        self.digest = digest
        self.digest_check: ChartDigestCheck | None = None
        if ecr is not None:
            self.digest_check = ChartDigestCheck(
                self, "DigestCheck", chart=ecr, tag=version, digest=digest, removal_policy=removal_policy,
                chart_properties={"release": HYPERPOD_CHART_RELEASE, "namespace": HYPERPOD_CHART_NAMESPACE,
                                  "repository": ecr.reference, "version": version, "values": self.values,
                                  "timeout": timeout.to_seconds()})
            self.chart.node.add_dependency(self.digest_check.resource)
        if local_path is not None:
            self._acknowledge_asset_read(cluster)

    @staticmethod
    def _acknowledge_asset_read(cluster: eks.ICluster) -> None:
        """A local chart is an S3 asset that aws-cdk-lib lets the kubectl handler read: its generated grant covers the
        asset objects (``s3:GetObject*``/``List*`` on the bootstrap assets bucket) and writes that bucket's ARN."""
        provider = cluster.kubectl_provider
        role = provider.role if provider is not None else None
        policy = role.node.try_find_child("DefaultPolicy") if role is not None else None
        if policy is None:  # an imported role: the grant lands on the role's owner, outside these templates
            return
        why = "aws-cdk-lib's grant of the chart asset to the kubectl handler, which downloads the local chart"
        nag.acknowledge_generated_policy(policy, f"{why}; scoped to the CDK bootstrap assets bucket")
        guardrails.acknowledge(policy, "HPDPD-IAM1", f"{why}; aws-cdk-lib writes the bootstrap bucket's ARN with the "
                               "partition of the stack's Region")

    @staticmethod
    def chart_values(region: str, gpu_types: Sequence[str], components: DependencyComponents,
                     gpu_taints: Sequence[tuple[str, TaintEffect]] = ()) -> dict[str, Any]:
        gpu = list(gpu_types)
        extra = [{"key": key, "operator": "Exists", "effect": effect} for key, effect in dict.fromkeys(gpu_taints)
                 if effect != "PreferNoSchedule"]
        efa = [t for t in gpu if INSTANCE_TYPES[t].efa_interfaces > 0]
        return {
            "global": {"region": region},
            "namespace": {"create": True, "name": "aws-hyperpod"},
            "health-monitoring-agent": {"enabled": components.health_monitoring_agent, "region": region},
            "deep-health-check": {"enabled": components.deep_health_check},
            "hyperpod-patching": {"enabled": components.hyperpod_patching},
            "job-auto-restart": {"enabled": components.job_auto_restart},
            "trainingOperators": {"enabled": components.training_operators},
            "mpi-operator": {"enabled": components.mpi_operator},
            "neuron-device-plugin": {"devicePlugin": {"enabled": components.neuron_device_plugin}},
            "cert-manager": {"enabled": False},
            "inferenceOperators": {"enabled": False},
            "nvidia-device-plugin": {
                "devicePlugin": {"enabled": True},
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": gpu}]}
                ]}}},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                                HEALTH_TAINT_TOLERATION, *extra],
            },
            "aws-efa-k8s-device-plugin": {
                "devicePlugin": {"enabled": True},
                "supportedInstanceLabels": {"values": efa},
                "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                                {"key": "aws.amazon.com/efa", "operator": "Exists", "effect": "NoSchedule"},
                                HEALTH_TAINT_TOLERATION, *extra],
            },
        }


def _check_directory(local_path: Path, digest: str) -> None:
    """The local chart is what was reviewed: its directory digest is the recorded one (at synth, before the asset)."""
    try:
        found = directory_digest(local_path)
    except (ChartDirectoryError, OSError) as error:
        raise ConfigError.single(None, "HyperPodDependencies.local_path", str(local_path), str(error)) from error
    if found != digest:
        raise ConfigError.single(None, "HyperPodDependencies.digest", digest,
                                 f"{local_path} hashes to {found}: the chart changed since its digest was recorded")
