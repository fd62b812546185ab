"""``hpdpd preflight``: can this environment be deployed here, now?

Checks, in order: credentials, account, Region and partition; HyperPod instance quotas (per type and per cluster,
with what the account's other HyperPod clusters hold: hyperpod_dpd/ops/quotas.py); instance types offered in the
GPU AZ; free IPs in the GPU subnet; an existing EKS cluster's version and authentication mode; add-on versions; model
locations in S3; who receives the DPD alerts (``alerts``, from the configuration alone); the
configured zones resolved for the account, names and AZ IDs, and each training plan's zone
(``zones``, ``gpu-zone``, ``training-plan:<group>``: hyperpod_dpd/ops/zones.py); GPU headroom per group
(``capacity:<group>``); an existing HyperPod cluster is ``InService``. A check that cannot run (access denied, an API the
endpoint lacks, throttling after retries) is a WARN naming the permission it needs, and the others still run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.aws import ClientSource
from hyperpod_dpd.config.alerts import placeholder_subscribers
from hyperpod_dpd.config.identity import stack_name
from hyperpod_dpd.ops import capacity, eks_checks, handover, model_checks, zones
from hyperpod_dpd.ops.addons import InstalledAddon, installed_addons
from hyperpod_dpd.ops.checks import Check, Report, attempt, could_not_check, failed, guarded, passed, warned
from hyperpod_dpd.ops.clusters import FAILED, IN_SERVICE, EksState, HyperPodState, describe_eks, describe_hyperpod
from hyperpod_dpd.ops.endpoints import EndpointLike, configured_endpoints
from hyperpod_dpd.ops.quotas import QUOTA_PERMISSIONS, other_clusters_usage

if TYPE_CHECKING:
    from hyperpod_dpd.config import EnvironmentConfig


def credentials_check(env: EnvironmentConfig, sts: Any) -> Check:
    """The caller's identity, and the Region the clients ask: every other check reads the environment's account in
    its Region, so a mismatch stops them (a HyperPod cluster or a quota of another Region would answer for this one).
    Credential errors propagate (no other check can run without credentials)."""
    identity = sts.get_caller_identity()
    account, arn = identity.get("Account", ""), identity.get("Arn", "")
    where = f"environment {env.name or '?'}"
    if account != env.account:
        return failed("credentials", f"credentials are for account {account} ({arn}); {where} is account "
                                     f"{env.account}; other checks skipped",
                      fix=f"use a profile for account {env.account} (--profile or AWS_PROFILE)")
    partition = arn.split(":")[1] if arn.count(":") >= 5 else ""
    if partition != env.partition:
        return failed("credentials", f"the caller {arn or '(no ARN)'} is not in partition {env.partition} of {where} "
                                     f"({env.region}); other checks skipped",
                      fix=f"use credentials of account {env.account} in partition {env.partition}")
    region = str(getattr(sts.meta, "region_name", "") or "")
    if region != env.region:
        return failed("credentials", f"the checks would read Region {region or '(none)'}; {where} is in "
                                     f"{env.region}; other checks skipped",
                      fix=f"drop --region (or pass --region {env.region})")
    return passed("credentials", f"{arn} in account {account}, {region}")


def hyperpod_check(env: EnvironmentConfig, cluster: HyperPodState | None) -> Check:
    name, cluster_name = "hyperpod-cluster", env.hyperpod.cluster_name
    if cluster is None:
        return passed(name, f"{cluster_name} does not exist yet; the stack creates it")
    groups = ", ".join(f"{g.name} {g.current}/{g.target}" for g in cluster.groups)
    if cluster.status == FAILED:
        return failed(name, f"{cluster_name} is Failed: {cluster.failure_message or 'no failure message'}",
                      fix="fix the cause (capacity, quota, AZ, lifecycle scripts), then delete the cluster "
                          f"('aws sagemaker delete-cluster --cluster-name {cluster_name}') and deploy again")
    if cluster.status == "Deleting":
        return failed(name, f"{cluster_name} is being deleted", fix="wait for the deletion to finish, then deploy")
    if cluster.status != IN_SERVICE:
        return warned(name, f"{cluster_name} is {cluster.status} ({groups})",
                      fix="hpdpd wait --for cluster --env " + (env.name or "<env>"))
    if not cluster.complete:
        return warned(name, f"{cluster_name} is InService but not every group is full ({groups})",
                      fix="check node health with 'hpdpd status'")
    return passed(name, f"{cluster_name} is InService ({groups})")


def alerts_check(env: EnvironmentConfig) -> Check | None:
    """``alerts``: whether anyone receives the DPD alerts of an environment with endpoints (None without them, or
    with ``alerts.enabled: false``). A subscriber on a domain reserved for documentation receives nothing: when every
    subscriber is one, production fails (the alerts would reach nobody, as with the shipped placeholder
    ``oncall@example.com``), another environment warns; some among real ones, or nobody subscribed without
    ``alerts.no_subscribers_reason`` (the configuration warns of that too; production refuses it), warn."""
    alerts = env.alerts
    if not env.endpoints or not alerts.enabled:
        return None
    subscribers = (*alerts.emails, *alerts.https_endpoints)
    placeholders = [str(issue.value) for issue in placeholder_subscribers(alerts)]
    fix = f"list your on-call address in alerts.emails (or an endpoint in alerts.https_endpoints) of {env.source}"
    if placeholders and len(placeholders) == len(subscribers):
        detail = (f"every subscriber of the alert topic is on a domain reserved for documentation (RFC 2606): "
                  f"{', '.join(placeholders)}; nobody would receive the alerts")
        return failed("alerts", detail, fix=fix) if env.production else warned("alerts", detail, fix=fix)
    if placeholders:
        return warned("alerts", f"{', '.join(placeholders)}: on a domain reserved for documentation (RFC 2606), "
                                f"receive nothing; {len(subscribers) - len(placeholders)} other subscriber(s) do",
                      fix=f"replace or remove them in {env.source}")
    if not subscribers:
        if alerts.no_subscribers_reason is not None:
            return passed("alerts", f"nobody is subscribed to the alert topic, on purpose: {alerts.no_subscribers_reason}")
        return warned("alerts", "nobody is subscribed to the alert topic: the alerts reach nobody", fix=fix)
    return passed("alerts", f"{len(subscribers)} subscriber(s) of the alert topic (each confirms its subscription once)")


def run_preflight(env: EnvironmentConfig, clients: ClientSource, *,
                  endpoints: tuple[EndpointLike, ...] | None = None, strict: bool = False) -> Report:
    identity = credentials_check(env, clients.client("sts"))
    if identity.status == "fail":
        return Report(checks=(identity,), strict=strict)
    chosen = configured_endpoints(env) if endpoints is None else endpoints
    return Report(checks=(identity, *_aws_checks(env, clients, chosen)), strict=strict)


def _aws_checks(env: EnvironmentConfig, clients: ClientSource, endpoints: tuple[EndpointLike, ...]) -> Iterator[Check]:
    sagemaker, ec2, eks, s3 = (clients.client(s) for s in ("sagemaker", "ec2", "eks", "s3"))
    hyperpod = attempt(lambda: describe_hyperpod(sagemaker, env.hyperpod.cluster_name))
    known_cluster = None if isinstance(hyperpod, BaseException) else hyperpod
    counts = capacity.configured_counts(env)

    # the quotas are account-wide: what the account's other HyperPod clusters hold counts against them too
    usage = attempt(lambda: other_clusters_usage(sagemaker, env.hyperpod.cluster_name))
    yield from guarded(lambda: capacity.quota_checks(env, clients.client("service-quotas"), usage),
                       names=capacity.quota_row_names(env), permission=QUOTA_PERMISSIONS)
    yield from guarded(lambda: capacity.offering_checks(env, ec2),
                       names=[f"offering:{t}" for t in sorted(counts)], permission=capacity.OFFERING_PERMISSION)
    yield from guarded(lambda: capacity.subnet_checks(env, ec2, known_cluster),
                       names=["subnet-ips"], permission=capacity.SUBNET_PERMISSIONS)

    cluster = attempt(lambda: describe_eks(eks, env.eks.cluster_name))
    eks_state: EksState | None = None
    installed: dict[str, InstalledAddon] | BaseException | None = None
    if isinstance(cluster, BaseException):
        yield could_not_check("eks-cluster", cluster, permission="eks:DescribeCluster")
        installed = cluster  # whether add-ons are installed is unknown too
    else:
        eks_state = cluster
        yield from eks_checks.eks_checks(env, eks_state)
        if eks_state is not None:
            installed = attempt(lambda: installed_addons(eks, env.eks.cluster_name))
    yield from eks_checks.addon_checks(env, eks, eks_state, installed)

    yield from model_checks.bucket_checks(env, s3)
    yield from model_checks.endpoint_model_checks(env, s3, endpoints)
    alerts = alerts_check(env)  # from the configuration alone: no AWS call
    if alerts is not None:
        yield alerts
    # the configured zones resolved for this account, and each training plan's zone (errors become WARN rows)
    yield from guarded(lambda: zones.zone_checks(env, ec2), names=zones.ZONE_NAMES, permission=zones.ZONES_PERMISSION)
    yield from zones.plan_checks(env, sagemaker)
    # free GPUs per group after the endpoints' maximum replicas, and the nodes running now (from the cluster read above)
    yield from capacity.headroom_checks(env, endpoints, capacity.live_nodes(known_cluster))

    if isinstance(hyperpod, BaseException):
        yield could_not_check("hyperpod-cluster", hyperpod, permission="sagemaker:DescribeCluster")
    else:
        yield hyperpod_check(env, hyperpod)
    # gitops: the deployed stacks must not delete the live objects CDK applied (hyperpod_dpd/ops/handover.py)
    if env.delivery.gitops:
        yield from guarded(lambda: handover.handover_checks(env, clients.client("cloudformation")),
                           names=[f"handover:{stack_name(env, p)}" for p in handover.STACK_PARTS],
                           permission=handover.PERMISSION)
