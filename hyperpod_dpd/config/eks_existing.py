"""``eks.existing``: adopt an EKS cluster the toolkit did not create, without lookups (synthesis stays offline).

Everything the stacks need from the cluster is written down here: its name and Kubernetes version, its IAM OIDC
provider (IRSA trust of the inference operator's roles), the cluster security group (HyperPod nodes join it), and
an IAM role with cluster-admin access that the kubectl provider's Lambda handler runs as (it applies the Helm charts
and manifests). The toolkit never takes over the cluster's core add-ons unless they are listed in ``manage_addons``.

The endpoints' NetworkPolicies take effect only where the vpc-cni add-on runs with ``enableNetworkPolicy: "true"``.
The toolkit sets that on the add-ons it manages; on an adopted cluster it cannot, so endpoints with NetworkPolicies
are refused there unless ``network_policy_enforced`` says the cluster enforces them (or ``manage_addons`` lists
``vpc-cni``), or the endpoints drop the policies (``router.network_policy: false``).
"""

from __future__ import annotations

import importlib.machinery
import re
import sys
from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from hyperpod_dpd.catalogue.versions import CORE_ADDONS, DEFAULT_EKS_VERSION, EKS_VERSIONS, KUBECTL_LAYERS
from hyperpod_dpd.config.base import Model, join, pattern, quoted_choice
from hyperpod_dpd.config.names import EksClusterName
from hyperpod_dpd.errors import Issue

CORE_ADDON_NAMES: tuple[str, ...] = tuple(a.name for a in CORE_ADDONS)
_PARTITION = r"arn:(?P<partition>aws|aws-cn|aws-us-gov)"
_OIDC_ARN = re.compile(_PARTITION + r":iam::(?P<account>\d{12}):oidc-provider/"
                       r"(?P<issuer>oidc\.eks\.(?P<region>[a-z]{2}(-gov)?-[a-z]+-\d)\.amazonaws\.com(\.cn)?/id/[0-9A-Za-z]{1,64})")
ROLE_ARN = re.compile(_PARTITION + r":iam::(?P<account>\d{12}):role/(?P<path>([\w+=,.@-]+/)*)(?P<name>[\w+=,.@-]{1,64})")

EksVersion = Annotated[str, quoted_choice(
    EKS_VERSIONS, example=DEFAULT_EKS_VERSION, rule=f"must be one of {', '.join(EKS_VERSIONS)} (the versions HyperPod supports)")]
OidcProviderArn = Annotated[str, pattern(
    _OIDC_ARN.pattern, "an IAM OIDC provider ARN of an EKS cluster such as "
    "'arn:aws:iam::111111111111:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF'")]
RoleArn = Annotated[str, pattern(
    ROLE_ARN.pattern, "an IAM role ARN such as 'arn:aws:iam::111111111111:role/eks-kubectl' (names of at most 64 characters)")]
SecurityGroupId = Annotated[str, pattern(r"sg-[0-9a-f]{8,17}", "a security group id such as 'sg-0123456789abcdef0'")]
SubnetId = Annotated[str, pattern(r"subnet-[0-9a-f]{8,17}", "a subnet id such as 'subnet-0123456789abcdef0'")]


def partition_of(region: str) -> str:
    """The partition of a Region code: ``aws-cn`` for ``cn-*``, ``aws-us-gov`` for ``us-gov-*``, else ``aws``."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def kubectl_layer_problem(version: str) -> str | None:
    """Why the kubectl/helm Lambda layer of Kubernetes ``version`` cannot be used here, or None.

    aws_eks_v2 needs that layer package (PyPI ``aws-cdk.lambda-layer-kubectl-v3x``; only the newest ones are
    dependencies of hyperpod-dpd, the older ones are extras). It is looked up the way ``import`` would find it, without
    running it: importing ``aws_cdk`` starts the CDK's Node process, and loading a configuration imports no CDK. A
    module the import system blocks (``None`` in ``sys.modules``) counts as absent, as ``import`` treats it. A layer
    found here that then fails to import is still refused when the cluster is built (infra/eks_cluster.py).
    """
    if version not in KUBECTL_LAYERS:
        return None  # not a version at all: the EksVersion rule reports it
    return None if _module_found(KUBECTL_LAYERS[version][0]) else missing_layer_message(version)


def missing_layer_message(version: str) -> str:
    """What to install for the kubectl layer of ``version`` (a version of ``KUBECTL_LAYERS``)."""
    minor = version.split(".")[1]
    extra, package = f"kubectl-v{minor}", f"aws-cdk.lambda-layer-kubectl-v{minor}"  # pyproject.toml's extras
    return (f"needs the kubectl layer package {package} (module {KUBECTL_LAYERS[version][0]}), which this Python "
            f"environment lacks: pip install 'hyperpod-dpd[{extra}]'")


def _module_found(name: str) -> bool:
    """Whether ``import name`` would find a module, without executing it or its parent package."""
    if name in sys.modules:
        return sys.modules[name] is not None
    parent_name, _, _ = name.rpartition(".")
    parent = sys.modules.get(parent_name)
    locations = list(getattr(parent, "__path__", None) or [])
    if parent is None:
        spec = importlib.machinery.PathFinder.find_spec(parent_name)
        if spec is None or not spec.submodule_search_locations:
            return False
        locations = list(spec.submodule_search_locations)
    return bool(locations) and importlib.machinery.PathFinder.find_spec(name, locations) is not None


def _core_addon(value: str) -> str:
    if value not in CORE_ADDON_NAMES:
        raise ValueError(f"must be a core add-on: {', '.join(CORE_ADDON_NAMES)}")
    return value


CoreAddonName = Annotated[str, AfterValidator(_core_addon)]


class ExistingEksCluster(Model):
    """An EKS cluster that already runs (authentication mode API or API_AND_CONFIG_MAP), adopted as it is.

    The toolkit installs the HyperPod dependencies chart, the HyperPod cluster, the inference operator and the
    endpoints on it; it never changes the cluster itself (logging, encryption, endpoint, node groups) and manages
    only the core add-ons listed in ``manage_addons`` (creating an add-on that already exists fails).
    """

    cluster_name: EksClusterName
    version: EksVersion
    oidc_provider_arn: OidcProviderArn
    kubectl_role_arn: RoleArn
    cluster_security_group_id: SecurityGroupId
    kubectl_private_subnet_ids: tuple[SubnetId, ...] = ()
    kubectl_security_group_id: SecurityGroupId | None = None
    manage_addons: tuple[CoreAddonName, ...] = Field(default=())
    # The cluster's vpc-cni add-on already enforces NetworkPolicies (configuration value enableNetworkPolicy "true").
    network_policy_enforced: bool = False

    @property
    def oidc_issuer(self) -> str:
        """``oidc.eks.<region>.amazonaws.com/id/<id>``: the issuer the IRSA trust conditions name."""
        match = _OIDC_ARN.fullmatch(self.oidc_provider_arn)
        assert match is not None
        return match["issuer"]

    def arn_issues(self, path: str, *, account: str | None, region: str | None,
                   where: str = "the environment's") -> Iterator[Issue]:
        """The ARNs must be of ``account`` and of the partition of ``region``, the OIDC provider of ``region``
        (None: not known, not checked)."""
        for key, regex in (("oidc_provider_arn", _OIDC_ARN), ("kubectl_role_arn", ROLE_ARN)):
            value = getattr(self, key)
            match = regex.fullmatch(value)
            assert match is not None
            if account is not None and match["account"] != account:
                yield Issue(join(path, key), value, f"must be in {where} account {account}")
            elif region is not None and match["partition"] != partition_of(region):
                yield Issue(join(path, key), value,
                            f"must be in partition '{partition_of(region)}' (the partition of region {region})")
            elif region is not None and key == "oidc_provider_arn" and match["region"] != region:
                yield Issue(join(path, key), value, f"must be the OIDC provider of a cluster in region {region}")

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        if (problem := kubectl_layer_problem(self.version)) is not None:
            yield Issue(join(path, "version"), self.version, problem)  # the key the user wrote: eks.existing.version
        yield from self.arn_issues(path, account=root.account, region=root.region)
        if self.kubectl_security_group_id and not self.kubectl_private_subnet_ids:
            yield Issue(join(path, "kubectl_security_group_id"), self.kubectl_security_group_id,
                        f"applies only with {join(path, 'kubectl_private_subnet_ids')} (the kubectl handler in the VPC)")
        if len(set(self.kubectl_private_subnet_ids)) != len(self.kubectl_private_subnet_ids):
            yield Issue(join(path, "kubectl_private_subnet_ids"), list(self.kubectl_private_subnet_ids), "lists a subnet twice")
        if len(set(self.manage_addons)) != len(self.manage_addons):
            yield Issue(join(path, "manage_addons"), list(self.manage_addons), "lists an add-on twice")
        yield from self._network_policy_issues(root, path)

    def _network_policy_issues(self, root: Any, path: str) -> Iterator[Issue]:
        """Endpoints whose NetworkPolicies nothing would enforce: refused, with the three ways out."""
        if self.network_policy_enforced or "vpc-cni" in self.manage_addons:
            return
        unenforced = [i for i, e in enumerate(getattr(root, "endpoints", None) or ()) if e.router.network_policy]
        if unenforced:
            where = ", ".join(f"endpoints[{i}]" for i in unenforced)
            verb = "renders" if len(unenforced) == 1 else "render"
            yield Issue(join(path, "network_policy_enforced"), False,
                        f"{where} {verb} NetworkPolicies, which the adopted cluster enforces only if its vpc-cni add-on "
                        "has the configuration value enableNetworkPolicy \"true\": set that and this key to true, list "
                        "vpc-cni in manage_addons (hyperpod-dpd then sets it), or set router.network_policy: false there")
