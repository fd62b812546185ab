"""The ECR registries a HyperPod node may pull images from: this account's, AWS's that the platform's own pods come
from, and those the configuration's images name. Nothing else: the nodes' role may not read any other account's
repositories.

The kubelet on a HyperPod node pulls private ECR images with the node's role (the instance groups' execution role),
so every registry a pod on it uses must be listed, or the pod never starts. The AWS registries, per Region, each from
the source that names it:

* EKS add-ons (vpc-cni, kube-proxy, CoreDNS, the Pod Identity agent, the S3 and FSx CSI drivers, metrics-server,
  cert-manager): "The images are pulled from an Amazon EKS Amazon ECR private repository ... replicates the images to
  a repository in each Amazon EKS supported AWS Region" (EKS user guide, "View Amazon container image registries for
  Amazon EKS add-ons", awsdocs/amazon-eks-user-guide latest/ug/workloads/add-ons-images.adoc @1cc6ebb4).
  HyperPod's observability exporters come from the same account (``602401143452.dkr.ecr.us-west-2.amazonaws.com/
  hyperpod/dcgm_exporter`` in aws-samples/awsome-distributed-training 1.architectures/5.sagemaker-hyperpod/
  LifecycleScripts/base-config/observability/Notes.md) [? the observability add-on's own image list was not found].
* The EFA device plugin of the HyperPod dependencies chart: its default image is
  ``602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin`` in every Region (aws/eks-charts
  stable/aws-efa-k8s-device-plugin/values.yaml @050f81ee) [? read at that commit, not at chart 0.5.20].
* The HyperPod health-monitoring agent: the chart's Region map, and us-east-1's account for a Region not in it
  (aws/sagemaker-hyperpod-cli @011ca927, helm_chart/HyperPodHelmChart/charts/health-monitoring-agent/templates/
  _helpers.tpl).
* The HyperPod inference operator's images: ``image.repositoryDomainMap`` of the chart's inference-operator values
  (same commit, charts/inference-operator/values.yaml) [? the EKS add-on is taken to pull from the same accounts].
* AWS Deep Learning Containers, for a worker image from a DLC registry (aws/deep-learning-containers
  available_images.md @00819950: 763104351884, Jakarta 907027046896).

A Region missing from the EKS table is refused rather than opened to every account.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from constructs import IConstruct

from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra.arns import arn

EKS = "602401143452"
EKS_ADDON_REGISTRIES: Mapping[str, str] = {
    "ap-northeast-1": EKS, "ap-northeast-2": EKS, "ap-south-1": EKS, "ap-south-2": "900889452093",
    "ap-southeast-1": EKS, "ap-southeast-2": EKS, "ap-southeast-3": "296578399912", "ap-southeast-4": "491585149902",
    "ca-central-1": EKS, "eu-central-1": EKS, "eu-north-1": EKS, "eu-south-2": "455263428931", "eu-west-1": EKS,
    "eu-west-2": EKS, "sa-east-1": EKS, "us-east-1": EKS, "us-east-2": EKS, "us-west-1": EKS, "us-west-2": EKS,
}
EFA_DEVICE_PLUGIN = ("us-west-2", EKS)
HEALTH_AGENT_REGISTRIES: Mapping[str, str] = {
    "us-east-1": "767398015722", "us-west-2": "905418368575", "us-east-2": "851725546812", "us-west-1": "011528288828",
    "eu-central-1": "211125453373", "eu-north-1": "654654141839", "eu-west-1": "533267293120",
    "eu-west-2": "011528288831", "eu-south-2": "626887787726", "ap-northeast-1": "533267052152",
    "ap-south-1": "011528288864", "ap-southeast-1": "905418428165", "ap-southeast-2": "851725636348",
    "ap-southeast-3": "971422672635", "ap-southeast-4": "084375568333", "ca-central-1": "843976229209",
    "sa-east-1": "025066253954",
}
HEALTH_AGENT_FALLBACK = "us-east-1"  # "Region not in map - fallback both region and account to us-east-1"
INFERENCE_OPERATOR_REGISTRIES: Mapping[str, str] = {
    "us-east-2": "061051259071", "eu-north-1": "850995554027", "eu-central-1": "491085393763",
    "us-west-2": "861276088053", "us-east-1": "557690614651", "eu-west-2": "337909760000",
    "ap-northeast-1": "724772091842", "ap-southeast-2": "147997151819", "ap-south-1": "522814713546",
    "eu-west-1": "537124951544", "sa-east-1": "495599735358", "us-west-1": "183295454132",
    "ap-southeast-1": "474668384327", "ap-southeast-4": "311141544681", "ap-southeast-3": "158128612970",
    "eu-south-2": "025050981094",
}
DLC_REGISTRIES: Mapping[str, str] = {
    **{r: "763104351884" for r in ("us-east-1", "us-east-2", "us-west-1", "us-west-2", "ap-south-1", "ap-northeast-1",
                                   "ap-northeast-2", "ap-southeast-1", "ap-southeast-2", "ca-central-1", "eu-central-1",
                                   "eu-west-1", "eu-west-2", "eu-north-1", "sa-east-1")},
    "ap-southeast-3": "907027046896",
}
# <account>.dkr.ecr[-fips].<region>.amazonaws.com[.cn]/<repository>[:tag|@digest] (ECR user guide, "Private registry
# concepts": the registry URL is https://aws_account_id.dkr.ecr.region.amazonaws.com).
ECR_IMAGE = re.compile(r"(?P<account>\d{12})\.dkr\.ecr(-fips)?\.(?P<region>[a-z]{2}(-[a-z]+)+-\d)\.amazonaws\.com(\.cn)?/")


@dataclass(frozen=True, order=True, kw_only=True)
class Registry:
    """One private ECR registry: an account's repositories in one Region.

    Args:
        region: the registry's Region. No default.
        account: the registry's 12-digit account. No default.
    """

    region: str
    account: str


def image_registry(image: str) -> Registry | None:
    """The private ECR registry of an image reference, or None (ECR Public, Docker Hub, another registry)."""
    match = ECR_IMAGE.match(image)
    return Registry(region=match["region"], account=match["account"]) if match else None


def platform_registries(region: str) -> tuple[Registry, ...]:
    """AWS's registries the platform's own pods pull from in ``region`` (see the module docstring)."""
    if region not in EKS_ADDON_REGISTRIES:
        raise ConfigError.single(None, "region", region, "has no catalogue of AWS's image registries (infra/registries.py); "
                                 f"allowed: {', '.join(sorted(EKS_ADDON_REGISTRIES))}")
    agent_region = region if region in HEALTH_AGENT_REGISTRIES else HEALTH_AGENT_FALLBACK
    found = {Registry(region=region, account=EKS_ADDON_REGISTRIES[region]),
             Registry(region=EFA_DEVICE_PLUGIN[0], account=EFA_DEVICE_PLUGIN[1]),
             Registry(region=agent_region, account=HEALTH_AGENT_REGISTRIES[agent_region])}
    for table in (INFERENCE_OPERATOR_REGISTRIES, DLC_REGISTRIES):
        if region in table:
            found.add(Registry(region=region, account=table[region]))
    return tuple(sorted(found))


def node_registries(*, region: str, account: str, images: Iterable[str] = ()) -> tuple[Registry, ...]:
    """Every registry a node of this environment pulls from: this account's in its Region, AWS's platform registries,
    and the private ECR registries the configured images name."""
    if cdk.Token.is_unresolved(region) or cdk.Token.is_unresolved(account):
        raise ConfigError.single(None, "region", region, "must be concrete: the nodes' image registries depend on it")
    named = {r for r in (image_registry(i) for i in images) if r is not None}
    return tuple(sorted({Registry(region=region, account=account), *platform_registries(region), *named}))


def repository_arns(scope: IConstruct, registries: Sequence[Registry]) -> list[str]:
    """``arn:${Partition}:ecr:<region>:<account>:repository/*`` for each registry."""
    return [arn(scope, "ecr", "repository/*", region=r.region, account=r.account) for r in registries]
