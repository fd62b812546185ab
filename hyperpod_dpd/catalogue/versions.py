"""Pinned versions and minimums: EKS, core add-ons, kubectl layers, the HyperPod dependencies chart (by commit).

EKS add-on versions are pinned per Kubernetes minor; ``hpdpd preflight`` compares them with what
``DescribeAddonVersions`` offers in the target account, because AWS publishes new builds often.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import total_ordering
from types import MappingProxyType

_ADDON_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-eksbuild\.(\d+))?$")


@total_ordering
@dataclass(frozen=True)
class AddonVersion:
    """An EKS add-on version such as ``v1.14.1-eksbuild.1``, ordered numerically."""

    major: int
    minor: int
    patch: int
    build: int = 0

    def __str__(self) -> str:
        return f"v{self.major}.{self.minor}.{self.patch}-eksbuild.{self.build}"

    def _key(self) -> tuple[int, int, int, int]:
        return (self.major, self.minor, self.patch, self.build)

    def __lt__(self, other: AddonVersion) -> bool:
        return self._key() < other._key()


def parse_addon_version(text: str) -> AddonVersion:
    """Parse ``v1.2.3-eksbuild.4`` (or ``1.2.3``); ``ValueError`` names the expected form."""
    match = _ADDON_VERSION.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not an EKS add-on version like 'v1.14.1-eksbuild.1'")
    major, minor, patch, build = match.groups()
    return AddonVersion(int(major), int(minor), int(patch), int(build or 0))


# Which Kubernetes versions HyperPod supports: the "Kubernetes version support" list of the SageMaker HyperPod EKS
# prerequisites page (sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites). Its copies disagree, so each copy
# is recorded with what it lists (read 2026-12-01):
EKS_VERSION_SOURCES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "docs.aws.amazon.com .../sagemaker-hyperpod-eks-prerequisites.html (English, stored copy)":
        ("1.28", "1.29", "1.30", "1.31", "1.32"),
    "docs.amazonaws.cn/en_us/.../sagemaker-hyperpod-eks-prerequisites.html (English, China Regions)":
        ("1.28", "1.29", "1.30", "1.31", "1.32", "1.33"),
    "docs.amazonaws.cn/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.md (Chinese translation)":
        ("1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34"),
    "current prerequisites page (as recorded in the project's platform notes)":
        ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35"),
})
# The versions the toolkit accepts: those with a kubectl layer (PyPI aws-cdk.lambda-layer-kubectl-v3x) that some copy
# lists; 1.28 and 1.29 are out of EKS standard support.
EKS_VERSIONS: tuple[str, ...] = ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35")


def eks_version_sources(version: str) -> tuple[str, ...]:
    """The copies of the prerequisites page that list ``version``."""
    return tuple(source for source, listed in EKS_VERSION_SOURCES.items() if version in listed)


# The safe default: the newest version that more than one copy documents (a cluster on a version HyperPod does not
# support is rejected at deploy time). A newer accepted version is allowed with a warning (EksConfig.warnings).
DEFAULT_EKS_VERSION = max((v for v in EKS_VERSIONS if len(eks_version_sources(v)) > 1), key=lambda v: int(v.split(".")[1]))

# One kubectl/helm Lambda layer package per EKS minor (PyPI ``aws-cdk.lambda-layer-kubectl-v3x``).
KUBECTL_LAYERS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {v: (f"aws_cdk.lambda_layer_kubectl_v{v.split('.')[1]}", f"KubectlV{v.split('.')[1]}Layer") for v in EKS_VERSIONS}
)

# The Amazon VPC CNI is the only CNI HyperPod supports, from 1.18.3 on (SageMaker HyperPod EKS prerequisites page).
VPC_CNI_MINIMUM = parse_addon_version("v1.18.3-eksbuild.1")


@dataclass(frozen=True)
class CoreAddon:
    """A core EKS add-on installed on every cluster, with its pinned version per Kubernetes minor."""

    name: str
    versions: Mapping[str, str]
    minimum: AddonVersion | None = None

    def version_for(self, eks_version: str) -> str:
        return self.versions[eks_version]


def _same(version: str) -> Mapping[str, str]:
    return MappingProxyType({v: version for v in EKS_VERSIONS})


CORE_ADDONS: tuple[CoreAddon, ...] = (
    CoreAddon("vpc-cni", _same("v1.20.4-eksbuild.2"), minimum=VPC_CNI_MINIMUM),
    CoreAddon("kube-proxy", MappingProxyType({
        "1.30": "v1.30.14-eksbuild.8", "1.31": "v1.31.10-eksbuild.8", "1.32": "v1.32.6-eksbuild.8",
        "1.33": "v1.33.3-eksbuild.6", "1.34": "v1.34.0-eksbuild.4", "1.35": "v1.35.0-eksbuild.2",
    })),
    CoreAddon("coredns", MappingProxyType({
        "1.30": "v1.11.4-eksbuild.22", "1.31": "v1.11.4-eksbuild.22", "1.32": "v1.11.4-eksbuild.22",
        "1.33": "v1.12.2-eksbuild.4", "1.34": "v1.12.3-eksbuild.1", "1.35": "v1.13.1-eksbuild.1",
    })),
    CoreAddon("eks-pod-identity-agent", _same("v1.3.9-eksbuild.3")),
)

# HyperPod dependencies Helm chart (aws/sagemaker-hyperpod-cli ``helm_chart/HyperPodHelmChart``). It is published to no
# Helm repository (aws/sagemaker-hyperpod-cli, helm_chart/readme.md: install from a clone), and its Chart.yaml has said
# ``version: 0.1.0`` since it was added (2024-09-09) through all 19 commits that changed it and the 73 that changed the
# chart (git log of that repository up to this commit), so the version names no content: the commit does. The user mirrors the
# chart packaged at this commit and records the digest of what was packaged (``hyperpod.dependencies_chart.digest``).
# Commit 011ca927 of 2026-06-22 ("Add space getting-started reference (#432)"); its Chart.yaml is blob eebee375
# (infra/charts/hyperpod-helm-chart/SOURCES.md).
HYPERPOD_CHART_SOURCE = "https://github.com/aws/sagemaker-hyperpod-cli"
HYPERPOD_CHART_PATH = "helm_chart/HyperPodHelmChart"
HYPERPOD_CHART_COMMIT = "011ca927123e02b35a399935bbb3ab1905fe33c7"
HYPERPOD_CHART_NAME = "hyperpod-helm-chart"  # ``name`` of its Chart.yaml: the last path element of the OCI reference
HYPERPOD_CHART_VERSION = "0.1.0"
HYPERPOD_CHART_RELEASE = "dependencies"
HYPERPOD_CHART_NAMESPACE = "kube-system"
# A digest as OCI and ECR write it: ``sha256:`` and 64 lower-case hex digits (ECR ImageDetail.imageDigest, "the sha256
# digest of the image manifest"; the ``Digest:`` line ``helm push`` prints).
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"

# The cdk-assets CLI that the promotion pipeline's asset steps install. aws-cdk-lib 2.275.0 writes each of them as
# `npm install -g cdk-assets@${cdkAssetsCliVersion}` with `cdkAssetsCliVersion ?? "latest"` (pipelines/lib/codepipeline/
# codepipeline.js, CodePipeline.publishAssetsAction and the constructor), so it is pinned here and passed as
# stacks/pipeline_stack.py's `cdk_assets_cli_version`. 4.7.3 is the release npm's `latest` dist-tag named when it was
# pinned (registry.npmjs.org/cdk-assets, dist.integrity sha512-8RC6CdrgnM0nO/VSPkIolCtEmbVeyuaormzMOuvO30hgZJeKy7dddSxvd9h
# 7S4ZQVoAnlmmRAVnE00kkRktjGg==), so pinning changed nothing that ran.
CDK_ASSETS_VERSION = "4.7.3"
# The cloud assembly schema major that release reads: it bundles @aws-cdk/cloud-assembly-schema 54.22.0 (devDependencies
# of its package.json; `revision: 54` in its bin/cdk-assets.js), and refuses an asset manifest of a newer major with
# "Cloud assembly schema version mismatch" (Manifest.validate, called without skipVersionCheck by loadAssetManifest; the
# failure aws/aws-cdk#32744 reports for `cdk-assets@latest`). The pipeline stack warns while it is older than the
# schema aws-cdk-lib writes (aws_cdk.cloud_assembly_schema.Manifest.version()).
CDK_ASSETS_SCHEMA_MAJOR = 54
