"""The checks role against the calls ``preflight``, ``wait`` and ``status`` really make.

The three commands run against moto (STS, EC2, S3, SageMaker) and botocore's Stubber (EKS add-ons, Service Quotas:
moto does not implement them) while botocore records every request they build. Each recorded call must be one of
:data:`READ_CALLS` and be allowed by the synthesized checks role on the resource it names; and :data:`READ_CALLS`
must hold no call the commands do not make (the role grants nothing they do not use).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from botocore.stub import Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.infra.checks_role import GLOBAL_CALLS, READ_CALLS, ChecksRole, CheckTargets
from hyperpod_dpd.ops.kube import Kube
from hyperpod_dpd.ops.ownership import ownership_checks
from hyperpod_dpd.ops.preflight import run_preflight
from hyperpod_dpd.ops.status import collect_status
from hyperpod_dpd.ops.wait import addons_probe, cluster_probe, endpoint_probe
from tests.hyperpod_dpd.moto_clusters import MOTO_ACCOUNT, REGION
from tests.hyperpod_dpd.ops import conftest as operations_fixtures
from tests.hyperpod_dpd.ops.test_preflight import stub_eks as stub_preflight_eks
from tests.hyperpod_dpd.ops.test_status import create_sagemaker_endpoint, stub_addons
from tests.hyperpod_dpd.ops.test_status import stub_eks as stub_status_eks
from tests.iam_eval import Deployment, Request, role_policies

# The operations tests' fixtures: fake credentials, moto, the moto-account environment, HyperPod clusters in moto.
aws_credentials = operations_fixtures.aws_credentials
moto = operations_fixtures.moto
clients = operations_fixtures.clients
make_env = operations_fixtures.make_env
create_hyperpod = operations_fixtures.create_hyperpod

TRUSTED = "arn:aws:iam::444444444444:role/hpdpd-pipeline-checks-dev"
BUCKET, PREFIX, SAGEMAKER_NAME = "hpdpd-models-checks", "Llama-3.3-70B-Instruct", "Llama-Checks"
SERVICES = ("sts", "ec2", "eks", "s3", "sagemaker", "service-quotas", "iam")
CLUSTER_ID = "0a1b2c3d4e5f"  # SageMaker authorizes a HyperPod cluster by its ARN, which ends in the cluster's id


@pytest.fixture
def adopted_dev(make_env: Callable[..., EnvironmentConfig], base_configs: dict[str, dict[str, Any]],
                clients: ClientFactory) -> EnvironmentConfig:
    """dev in moto's account, in an existing VPC (so preflight reads the GPU subnet), with its endpoint reachable
    through SageMaker and its model in a bucket of moto's S3."""
    ec2 = clients.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.20.{i}.0/24", AvailabilityZone=zone)["Subnet"]["SubnetId"]
               for i, zone in enumerate(("us-west-2a", "us-west-2b", "us-west-2a"))]
    endpoint = copy.deepcopy(base_configs["dev"]["endpoints"][0])
    endpoint["sagemaker_endpoint_name"] = SAGEMAKER_NAME
    endpoint["model"]["s3"] = {"bucket": BUCKET, "prefix": PREFIX, "region": REGION}

    def mutate(data: dict[str, Any]) -> None:
        data["network"] = {"gpu_availability_zone": "us-west-2a", "existing": {
            "vpc_id": vpc, "cidr": "10.20.0.0/16",
            "private_subnets": [{"subnet_id": subnets[0], "availability_zone": "us-west-2a"},
                                {"subnet_id": subnets[1], "availability_zone": "us-west-2b"}],
            "gpu_subnet": {"subnet_id": subnets[2], "availability_zone": "us-west-2a"}}}
        data["endpoints"] = [endpoint]

    return make_env(mutate)


def _resource(service: str, operation: str, params: dict[str, Any]) -> str:
    """The ARN IAM authorizes the call on (Service Authorization Reference), or ``*`` for actions without one."""
    prefix = f"arn:aws:{service}:{REGION}:{MOTO_ACCOUNT}"
    if service == "eks" and operation in ("DescribeCluster", "ListAddons"):
        return f"{prefix}:cluster/{params.get('name') or params['clusterName']}"
    if service == "eks" and operation == "DescribeAddon":
        return f"{prefix}:addon/{params['clusterName']}/{params['addonName']}/0a1b2c3d-uuid"
    if service == "sagemaker" and operation in ("DescribeCluster", "ListClusterNodes", "ListTags"):
        return f"{prefix}:cluster/{CLUSTER_ID}"
    if service == "sagemaker" and operation == "DescribeEndpoint":
        return f"{prefix}:endpoint/{params['EndpointName'].lower()}"
    if service == "s3":
        return f"arn:aws:s3:::{params['Bucket']}"
    if service == "iam" and operation == "ListRoleTags":
        return f"arn:aws:iam::{MOTO_ACCOUNT}:role/{params['RoleName']}"
    return "*"


@pytest.fixture
def recorded(clients: ClientFactory) -> Iterator[list[tuple[str, str, dict[str, Any]]]]:
    """Every request the commands build, as (service, operation, parameters), on the clients they share."""
    calls: list[tuple[str, str, dict[str, Any]]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        calls.append((model.service_model.service_name, model.name, dict(params)))

    for service in SERVICES:
        clients.client(service).meta.events.register("before-parameter-build", record)
    yield calls


def test_every_call_of_the_checks_is_allowed_and_nothing_more_is_granted(
        adopted_dev: EnvironmentConfig, clients: ClientFactory, create_hyperpod: Callable[..., None],
        recorded: list[tuple[str, str, dict[str, Any]]], tmp_path: Any) -> None:
    env = adopted_dev
    # GIVEN the environment deployed in moto: its HyperPod cluster, its SageMaker endpoint, its model weights
    create_hyperpod(clients.client("sagemaker"), env, subnet=env.network.existing.gpu_subnet.subnet_id)  # type: ignore[union-attr]
    (endpoint,) = env.endpoints
    assert endpoint.rendered_sagemaker_endpoint_name is not None
    create_sagemaker_endpoint(clients.client("sagemaker"), endpoint.rendered_sagemaker_endpoint_name)
    clients.client("s3").create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    clients.client("s3").put_object(Bucket=BUCKET, Key=f"{PREFIX}/config.json", Body=b"{}")
    recorded.clear()  # the set-up's own calls are not the commands'
    kube = Kube(kubeconfig=None)
    # WHEN preflight (no applied quota: the AWS defaults are read too), status and the three waits run
    with Stubber(clients.client("eks")) as eks, Stubber(clients.client("service-quotas")) as quotas:
        stub_preflight_eks(eks, env)
        quotas.add_response("list_service_quotas", {"Quotas": []}, {"ServiceCode": "sagemaker"})
        quotas.add_response("list_aws_default_service_quotas", {"Quotas": [
            {"QuotaName": f"{g.instance_type} for cluster usage", "QuotaCode": f"L-{i}", "Value": 8.0}
            for i, g in enumerate(env.hyperpod.instance_groups)]}, {"ServiceCode": "sagemaker"})
        run_preflight(env, clients)
        stub_status_eks(eks, env)
        collect_status(env, clients, kubectl=kube)
        stub_addons(eks, env)
        addons_probe(clients.client("eks"), env)()
        eks.assert_no_pending_responses()
    ownership_checks(env, clients)  # preflight's ownership rows (hyperpod_dpd/cli/preflight.py adds them to the report)
    cluster_probe(clients.client("sagemaker"), env.hyperpod.cluster_name)()
    endpoint_probe(clients.client("sagemaker"), env.endpoints, kube)()
    # AND the checks role of this environment, synthesized
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "Checks", env=cdk.Environment(account=MOTO_ACCOUNT, region=REGION))
    role = ChecksRole(stack, "ChecksRole", role_name="hpdpd-dev-checks", trusted_role_arn=TRUSTED,
                      targets=CheckTargets.of(env))
    template = assertions.Template.from_stack(stack).to_json()
    policies = role_policies(template, stack.get_logical_id(role.role.node.default_child),  # type: ignore[arg-type]
                             Deployment(account=MOTO_ACCOUNT, region=REGION, partition="aws"))
    # THEN every call they made is a known call, allowed on the resource it names
    made = {(service, operation) for service, operation, _ in recorded}
    assert made <= set(READ_CALLS), made - set(READ_CALLS)
    for service, operation, params in recorded:
        action = READ_CALLS[(service, operation)]
        if action is not None:
            resource = _resource(service, operation, params)
            assert policies.evaluate(Request(action, resource)).allowed, (service, operation, resource)
    # AND every call the role is made for is one they made (the pipeline step's describe-stacks aside, granted on the
    # platform stack by ChecksRoleGrants), so the role grants nothing they do not use
    assert set(READ_CALLS) - made == {("cloudformation", "DescribeStacks")}
    actions = {a for d in policies.documents for s in d["Statement"]
               for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert actions == ({a for a in READ_CALLS.values() if a is not None} - {"cloudformation:DescribeStacks"}
                       | set(GLOBAL_CALLS.values()))  # the global checks' calls: tests/hyperpod_dpd/ops/test_global_preflight.py
    # AND the same actions on another account's or another cluster's resources are refused
    for action, resource in [
        ("eks:DescribeCluster", f"arn:aws:eks:{REGION}:{MOTO_ACCOUNT}:cluster/other"),
        ("eks:DescribeAddon", f"arn:aws:eks:{REGION}:{MOTO_ACCOUNT}:addon/other/vpc-cni/0a1b"),
        ("sagemaker:DescribeCluster", f"arn:aws:sagemaker:{REGION}:999999999999:cluster/{CLUSTER_ID}"),
        ("sagemaker:DescribeEndpoint", f"arn:aws:sagemaker:{REGION}:{MOTO_ACCOUNT}:endpoint/other"),
        ("s3:ListBucket", "arn:aws:s3:::someone-elses-bucket"), ("s3:GetObject", f"arn:aws:s3:::{BUCKET}/{PREFIX}/x"),
        ("s3:GetBucketTagging", "arn:aws:s3:::someone-elses-bucket"),
        ("iam:ListRoleTags", f"arn:aws:iam::{MOTO_ACCOUNT}:role/someone-elses-role"),
    ]:
        assert not policies.evaluate(Request(action, resource)).allowed, (action, resource)
