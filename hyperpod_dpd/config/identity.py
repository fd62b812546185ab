"""Who an environment is in AWS: its stack names and the physical names its stacks create or take over, and the
check that no two environments of one configuration directory claim the same one.

Names are unique in different places, each as its service documents it:

* **S3 buckets** in the whole partition: "Bucket names must be unique across all AWS accounts in all the AWS Regions
  within a partition" (Amazon S3 User Guide, "General purpose bucket naming rules"), so every environment is compared
  with every other, whatever its account and Region.
* **IAM roles** in the account, across Regions (IAM is a global service of the account), and without case: "Names are
  not distinguished by case" (IAM API Reference, CreateRole, RoleName).
* **CloudFormation stacks, EKS clusters, HyperPod clusters, CodeBuild projects** in one account and Region.

Every name is compared without case: where a service tells case apart (stack names) this refuses more than it must,
never less. A bucket an environment only reads (``operator.model_buckets`` with ``create: false``, an endpoint's
``model.s3.bucket``) is shared on purpose (one copy of the weights for several environments) and not a claim; an
adopted EKS cluster is (the inference operator add-on and the dependencies chart exist once per cluster).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from hyperpod_dpd.config.base import join
from hyperpod_dpd.config.stack_names import MANIFEST_STACK_PARTS as MANIFEST_STACK_PARTS  # re-exported
from hyperpod_dpd.config.stack_names import MAX_STACK_NAME as MAX_STACK_NAME
from hyperpod_dpd.config.stack_names import MAX_STACK_PREFIX as MAX_STACK_PREFIX
from hyperpod_dpd.config.stack_names import PROJECT as PROJECT
from hyperpod_dpd.config.stack_names import STACK_PARTS as STACK_PARTS
from hyperpod_dpd.config.stack_names import StackNamePrefix as StackNamePrefix
from hyperpod_dpd.config.stack_names import default_stack_prefix as default_stack_prefix
from hyperpod_dpd.errors import ConfigError, Issue

if TYPE_CHECKING:
    from hyperpod_dpd.config.environment import EnvironmentConfig

__all__ = ["OWNED_KINDS", "OWNER_TAG", "STACK_PARTS", "PhysicalName", "StackNamePrefix", "check_identity",
           "default_stack_prefix", "identity_issues", "owned_names", "physical_names", "stack_name"]

# The toolkit's tag on the IAM roles of each stack, with the stack's name: CloudFormation adds its own
# aws:cloudformation:stack-name tag to the resources it creates, but "The propagation of stack-level tags to
# resources, including tags with the aws: prefix, varies by resource type" (CloudFormation Template Reference,
# "CloudFormation resource tagging"), and AWS::IAM::Role gets none (aws-cloudformation/cloudformation-coverage-roadmap
# issues 277 and 1159, open). hpdpd preflight reads it where that tag is missing (hyperpod_dpd/ops/ownership.py).
OWNER_TAG = "hyperpod-dpd:stack-name"
# The kinds of name whose owner hpdpd preflight reads (hyperpod_dpd/ops/ownership.py, which holds each kind's read and
# its IAM actions) and that the pipeline's checks role is granted to read (hyperpod_dpd/infra/checks_role.py). Here,
# on the ground both wings stand on, so that neither imports the other.
OWNED_KINDS = ("EKS cluster", "HyperPod cluster", "S3 bucket", "IAM role")

Scope = Literal["partition", "account", "region"]
SCOPE_TEXT = {"partition": "in partition {partition}, where bucket names are unique across all accounts and Regions",
              "account": "in account {account} (IAM names are unique in an account, in every Region)",
              "region": "in account {account}, Region {region}"}


def stack_name(config: EnvironmentConfig, part: str) -> str:
    """``<stack_name_prefix>-<part>`` (default ``hpdpd-<env>-<part>``): explicit, so that neither a refactoring of
    construct paths nor, with ``stack_name_prefix``, a renamed file renames a stack."""
    return f"{config.stack_prefix}-{part}"


@dataclass(frozen=True, kw_only=True)
class PhysicalName:
    """One name an environment's stacks create (or, for an adopted EKS cluster, take over).

    ``path`` is the field that sets it; ``derived_from`` what its default is made of when that field is unset;
    ``root`` the field a conflict is reported once for (a derived name such as the lifecycle bucket shares its root
    with the HyperPod cluster name it is derived from); ``part`` the stack that creates it, None when it is adopted."""

    kind: str
    name: str
    path: str
    root: str
    scope: Scope
    part: str | None
    derived_from: str | None = None

    def key(self, config: EnvironmentConfig) -> tuple[str, ...]:
        where = {"partition": (config.partition,), "account": (config.partition, config.account),
                 "region": (config.partition, config.account, config.region)}[self.scope]
        return (self.kind, *where, self.name.casefold())


def physical_names(config: EnvironmentConfig) -> Iterator[PhysicalName]:
    """Every name the environment claims, root causes before the names derived from them."""
    prefix = "stack_name_prefix"
    for part in STACK_PARTS:
        yield PhysicalName(kind="CloudFormation stack", name=stack_name(config, part), path=prefix, root=prefix,
                           scope="region", part=part)
    adopted = config.eks.existing is not None
    yield PhysicalName(kind="EKS cluster", name=config.eks.cluster_name,
                       path="eks.existing.cluster_name" if adopted else "eks.cluster_name", root="eks.cluster_name",
                       scope="region", part=None if adopted else "platform")
    hyperpod, operator = config.hyperpod, config.operator
    cluster = "hyperpod.cluster_name"
    yield PhysicalName(kind="HyperPod cluster", name=hyperpod.cluster_name, path=cluster, root=cluster,
                       scope="region", part="platform")
    lifecycle = "hyperpod.lifecycle_bucket_name"
    yield PhysicalName(kind="S3 bucket", name=hyperpod.lifecycle_bucket(config.account, config.region), path=lifecycle,
                       root=lifecycle if hyperpod.lifecycle_bucket_name else cluster, scope="partition", part="platform",
                       derived_from=None if hyperpod.lifecycle_bucket_name else f"{cluster}, the account and Region")
    tls = "operator.tls_bucket_name"
    yield PhysicalName(kind="S3 bucket", name=operator.tls_bucket(config.account, config.region), path=tls, root=tls,
                       scope="partition", part="platform",
                       derived_from=None if operator.tls_bucket_name else "the account and Region")
    for index, bucket in enumerate(operator.model_buckets):
        if bucket.create:  # a bucket that is only read is shared on purpose (module docstring)
            where = join(join("operator.model_buckets", index), "name")
            yield PhysicalName(kind="S3 bucket", name=bucket.name, path=where, root=where, scope="partition",
                               part="platform")
    execution = "operator.execution_role_name"
    yield PhysicalName(kind="IAM role", name=operator.execution_role(hyperpod.cluster_name), path=execution,
                       root=execution if operator.execution_role_name else cluster, scope="account", part="platform",
                       derived_from=None if operator.execution_role_name else cluster)
    # The pipeline's checks role and the checks runner (created when the pipeline promotes the environment) follow the
    # prefix too; compared whether or not they are created, which refuses only two environments that share a prefix.
    yield PhysicalName(kind="IAM role", name=config.checks_role_name, path=prefix, root=prefix, scope="account",
                       part="network")
    yield PhysicalName(kind="IAM role", name=config.checks_runner_role_name, path=prefix, root=prefix,
                       scope="account", part="platform")
    yield PhysicalName(kind="CodeBuild project", name=config.checks_project_name, path=prefix, root=prefix,
                       scope="region", part="platform")


def owned_names(config: EnvironmentConfig) -> list[PhysicalName]:
    """The names whose owner preflight checks: those a stack of the environment creates, of :data:`OWNED_KINDS`."""
    return [n for n in physical_names(config) if n.part is not None and n.kind in OWNED_KINDS]


def _fix(name: PhysicalName) -> str:
    if name.root == "stack_name_prefix":
        return ("set a different stack_name_prefix in one of them (a copied file keeps the deployed stacks of the "
                "original only through stack_name_prefix: docs/configuration.md, \"Renaming an environment\")")
    if name.derived_from is not None and name.root != name.path:
        return f"give one of them its own {name.root}, or set {name.path} (derived from {name.derived_from})"
    if name.derived_from is not None:
        return f"set {name.path} in one of them (by default it is derived from {name.derived_from})"
    return f"give one of them another {name.path}"


def identity_issues(selected: Sequence[EnvironmentConfig],
                    others: Iterable[EnvironmentConfig] = ()) -> list[Issue]:
    """One issue per pair of environments and root field that claim the same name, at least one of them ``selected``
    (``others``: the directory's environments that are not, compared with the selected ones only). Each issue names
    a selected environment's file and field (the later one's when both are selected), the value, and the other file
    and field."""
    environments = [*selected, *others]
    chosen = {id(e) for e in selected}
    claimed: dict[tuple[str, ...], tuple[EnvironmentConfig, PhysicalName]] = {}
    issues: list[Issue] = []
    reported: set[tuple[int, int, str]] = set()
    for env in environments:
        for name in physical_names(env):
            key = name.key(env)
            first = claimed.setdefault(key, (env, name))
            other, other_name = first
            if other is env or not ({id(env), id(other)} & chosen):
                continue
            subject, claim = (env, name) if id(env) in chosen else first  # said of an environment being loaded
            if subject is other:
                other, other_name = env, name
            pair = (id(other), id(subject), claim.root)
            if pair in reported:
                continue
            reported.add(pair)
            where = SCOPE_TEXT[claim.scope].format(partition=subject.partition, account=subject.account,
                                                   region=subject.region)
            issues.append(Issue(f"{subject.source}: {claim.path}", claim.name,
                                f"{claim.kind} name also claimed by {other.source} ({other_name.path}) {where}: "
                                f"{_fix(claim)}"))
    return issues


def check_identity(selected: Sequence[EnvironmentConfig], others: Iterable[EnvironmentConfig] = ()) -> None:
    """Raise one :class:`ConfigError` with a line per conflict (:func:`identity_issues`), before anything is
    synthesized."""
    issues = identity_issues(selected, others)
    if issues:
        raise ConfigError(None, issues)
