"""``hpdpd preflight``'s ownership checks (hyperpod_dpd/ops/ownership.py) against moto: a name the environment's stacks will
create passes when it is free or already theirs, fails when another stack holds it, and warns without a stack tag.

moto keeps the tags it is given, the ``aws:cloudformation:*`` ones on EKS and SageMaker clusters included; S3 refuses
system tags from a caller (moto as AWS: "System tags cannot be added/updated by requester"), so a bucket that
CloudFormation tagged is answered by botocore's Stubber.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.cli import preflight as preflight_cli
from hyperpod_dpd.cli.main import main
from hyperpod_dpd.config import EnvironmentConfig, parse_environment
from hyperpod_dpd.config.identity import OWNER_TAG
from hyperpod_dpd.ops.checks import Check, Report, failed, passed
from hyperpod_dpd.ops.ownership import STACK_TAG, check_name, owned_names, ownership_checks, with_ownership
from tests.hyperpod_dpd.moto_clusters import MOTO_ACCOUNT, REGION
from tests.paths import ROOT

MODEL_BUCKET = "hpdpd-models-ownership"


@pytest.fixture
def owned(make_env: Callable[..., EnvironmentConfig]) -> EnvironmentConfig:
    """dev in moto's account, creating one model bucket of its own."""
    return make_env(lambda d: d.__setitem__("operator", {"model_buckets": [{"name": MODEL_BUCKET, "create": True}]}))


def _rows(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def _lifecycle(env: EnvironmentConfig) -> str:
    return env.hyperpod.lifecycle_bucket(env.account, env.region)


def test_in_a_fresh_account_every_name_is_free(owned: EnvironmentConfig, clients: ClientFactory) -> None:
    # GIVEN an account where nothing of the environment exists, WHEN the ownership checks run
    rows = _rows(ownership_checks(owned, clients))
    # THEN one passing row per name its stacks create: clusters, buckets and roles, naming the stack that creates it
    execution = owned.operator.execution_role(owned.hyperpod.cluster_name)
    assert set(rows) == {
        f"owner:eks:{owned.eks.cluster_name}", f"owner:hyperpod:{owned.hyperpod.cluster_name}",
        f"owner:s3:{_lifecycle(owned)}", f"owner:s3:{owned.operator.tls_bucket(owned.account, owned.region)}",
        f"owner:s3:{MODEL_BUCKET}", f"owner:iam-role:{execution}", f"owner:iam-role:{owned.checks_role_name}",
        f"owner:iam-role:{owned.checks_runner_role_name}"}
    assert all(r.status == "pass" and "does not exist yet" in r.detail for r in rows.values())
    assert rows[f"owner:iam-role:{owned.checks_role_name}"].detail.endswith("hpdpd-dev-network creates it")


def test_names_held_by_this_environments_stacks_pass(owned: EnvironmentConfig, clients: ClientFactory,
                                                     create_hyperpod: Callable[..., None]) -> None:
    # GIVEN the environment deployed: its clusters with CloudFormation's stack tag, its roles with the toolkit's
    eks = clients.client("eks")
    eks.create_cluster(name=owned.eks.cluster_name, roleArn=f"arn:aws:iam::{MOTO_ACCOUNT}:role/eks",
                       resourcesVpcConfig={"subnetIds": []}, tags={STACK_TAG: "hpdpd-dev-platform"})
    sagemaker = clients.client("sagemaker")
    create_hyperpod(sagemaker, owned)
    arn = sagemaker.describe_cluster(ClusterName=owned.hyperpod.cluster_name)["ClusterArn"]
    sagemaker.add_tags(ResourceArn=arn, Tags=[{"Key": STACK_TAG, "Value": "hpdpd-dev-platform"}])
    clients.client("iam").create_role(RoleName=owned.checks_role_name, AssumeRolePolicyDocument="{}",
                                      Tags=[{"Key": OWNER_TAG, "Value": "hpdpd-dev-network"}])
    # WHEN the ownership checks run, THEN those names belong to the stacks that create them
    rows = _rows(ownership_checks(owned, clients))
    for name in (f"owner:eks:{owned.eks.cluster_name}", f"owner:hyperpod:{owned.hyperpod.cluster_name}"):
        assert rows[name].status == "pass" and rows[name].detail.endswith("belongs to hpdpd-dev-platform")
    assert rows[f"owner:iam-role:{owned.checks_role_name}"].detail.endswith("belongs to hpdpd-dev-network")


def test_a_role_of_the_same_environment_under_its_old_name_fails_with_the_prefix_fix(
        base_configs: dict[str, dict[str, Any]], clients: ClientFactory) -> None:
    # GIVEN the HyperPod execution role created by hpdpd-dev-platform, and dev's file renamed to devel.yaml (no key)
    data = {**copy.deepcopy(base_configs["dev"]), "account": MOTO_ACCOUNT, "operator": {}}
    data.pop("endpoints", None)
    renamed = parse_environment(data, name="devel", source="devel.yaml", base_dir=ROOT)
    role = renamed.operator.execution_role(renamed.hyperpod.cluster_name)
    clients.client("iam").create_role(RoleName=role, AssumeRolePolicyDocument="{}",
                                      Tags=[{"Key": OWNER_TAG, "Value": "hpdpd-dev-platform"}])
    # WHEN the renamed environment is checked
    row = _rows(ownership_checks(renamed, clients))[f"owner:iam-role:{role}"]
    # THEN it fails: the role is another stack's; the fix names the key that keeps the deployed stacks
    assert row.status == "fail"
    assert row.detail == (f"IAM role {role} already belongs to stack hpdpd-dev-platform, not to hpdpd-devel-platform "
                          "(operator.execution_role_name)")
    assert row.fix is not None and "set stack_name_prefix: hpdpd-dev" in row.fix


def test_a_bucket_cloudformation_created_for_another_stack_fails(owned: EnvironmentConfig,
                                                                 clients: ClientFactory) -> None:
    # GIVEN S3 answering that the model bucket carries another stack's aws:cloudformation:stack-name (Stubber: moto,
    # like S3, refuses system tags from a caller), and nothing else of the environment existing
    s3 = clients.client("s3")
    with Stubber(s3) as stub:
        for name in owned_names(owned):
            if name.kind != "S3 bucket":
                continue
            if name.name == MODEL_BUCKET:
                stub.add_response("get_bucket_tagging", {"TagSet": [{"Key": STACK_TAG, "Value": "team-b-data"},
                                                                    {"Key": "project", "Value": "x"}]},
                                  {"Bucket": name.name})
            else:
                stub.add_client_error("get_bucket_tagging", "NoSuchBucket", "The specified bucket does not exist",
                                      http_status_code=404, expected_params={"Bucket": name.name})
        rows = _rows(ownership_checks(owned, clients))
        stub.assert_no_pending_responses()
    # THEN that bucket fails, the others are free; the fix is another name (team-b-data is no stack of this toolkit)
    row = rows[f"owner:s3:{MODEL_BUCKET}"]
    assert row.status == "fail" and "already belongs to stack team-b-data" in row.detail
    assert row.fix == "give this environment another operator.model_buckets[0].name, or delete team-b-data"
    assert rows[f"owner:s3:{_lifecycle(owned)}"].status == "pass"


def test_a_name_without_a_stack_tag_warns(owned: EnvironmentConfig, clients: ClientFactory) -> None:
    # GIVEN the TLS bucket and the checks runner's role created by hand (no tags)
    tls = owned.operator.tls_bucket(owned.account, owned.region)
    clients.client("s3").create_bucket(Bucket=tls, CreateBucketConfiguration={"LocationConstraint": REGION})
    clients.client("iam").create_role(RoleName=owned.checks_runner_role_name, AssumeRolePolicyDocument="{}")
    # WHEN checked, THEN both warn: maybe adopted, and the stack cannot create them while they exist
    rows = _rows(ownership_checks(owned, clients))
    for name in (f"owner:s3:{tls}", f"owner:iam-role:{owned.checks_runner_role_name}"):
        assert rows[name].status == "warn" and "carries no stack tag" in rows[name].detail
        assert rows[name].fix is not None and "CloudFormation resource import" in rows[name].fix


def test_a_read_that_is_denied_warns_with_the_permission(owned: EnvironmentConfig, clients: ClientFactory) -> None:
    # GIVEN IAM refusing ListRoleTags
    with Stubber(clients.client("iam")) as stub:
        for _ in [n for n in owned_names(owned) if n.kind == "IAM role"]:
            stub.add_client_error("list_role_tags", "AccessDenied", "not authorized", http_status_code=403)
        rows = _rows(ownership_checks(owned, clients))
    # THEN each role's row warns and names the action the caller needs; the other rows still ran
    role = rows[f"owner:iam-role:{owned.checks_role_name}"]
    assert role.status == "warn" and "iam:ListRoleTags" in (role.fix or "")
    assert rows[f"owner:eks:{owned.eks.cluster_name}"].status == "pass"


def test_role_tags_are_read_across_pages(owned: EnvironmentConfig, clients: ClientFactory) -> None:
    # GIVEN IAM answering each role's tags on two pages, another stack's tag on the second
    roles = [n.name for n in owned_names(owned) if n.kind == "IAM role"]
    with Stubber(clients.client("iam")) as stub:
        for role in roles:
            stub.add_response("list_role_tags", {"Tags": [], "IsTruncated": True, "Marker": "m"}, {"RoleName": role})
            stub.add_response("list_role_tags", {"Tags": [{"Key": STACK_TAG, "Value": "other-network"}],
                                                 "IsTruncated": False}, {"RoleName": role, "Marker": "m"})
        # WHEN the ownership checks run
        rows = _rows(ownership_checks(owned, clients))
        stub.assert_no_pending_responses()
    # THEN every role's row fails on the tag of the second page (the first page alone would read "no stack tag")
    assert all(rows[f"owner:iam-role:{r}"].status == "fail" for r in roles)
    assert "already belongs to stack other-network" in rows[f"owner:iam-role:{owned.checks_role_name}"].detail


def test_nothing_is_checked_after_the_credentials_failed(owned: EnvironmentConfig, clients: ClientFactory) -> None:
    # GIVEN a report whose credentials check failed, and one whose passed
    refused = Report(checks=(failed("credentials", "account 999999999999"),))
    accepted = Report(checks=(passed("credentials", "ok"),), strict=True)
    # THEN the first is returned as it is; the second gains one row per owned name, keeping strict
    assert with_ownership(refused, owned, clients) is refused
    extended = with_ownership(accepted, owned, clients)
    assert extended.strict and [c.name for c in extended.checks] == ["credentials", *map(check_name, owned_names(owned))]


def test_preflight_reports_a_name_of_another_stack_and_exits_1(
        monkeypatch: pytest.MonkeyPatch, clients: ClientFactory, write_config: Callable[..., Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN dev's EKS cluster name taken by another stack, and the command's clients on moto (EKS and Service Quotas
    # stubbed as the other preflight tests do: moto does not implement their add-on and quota calls)
    def for_moto(data: dict[str, Any]) -> None:
        data["account"] = MOTO_ACCOUNT
        data.pop("endpoints", None)
        data["operator"] = {}

    config_dir = write_config(for_moto)
    monkeypatch.setattr(preflight_cli, "factory_from_args", lambda args, default_region, **_: clients)
    # WHEN preflight runs with JSON output
    with Stubber(clients.client("service-quotas")) as quotas, Stubber(clients.client("eks")) as eks:
        quotas.add_client_error("list_service_quotas", "AccessDeniedException", "not authorized")
        eks.add_client_error("describe_cluster", "ResourceNotFoundException", "No cluster found", http_status_code=404)
        for _ in range(9):  # one DescribeAddonVersions per add-on of the default operator
            eks.add_client_error("describe_addon_versions", "AccessDeniedException", "not authorized")
        eks.add_response("describe_cluster", {"cluster": {"name": "hpdpd-dev", "tags": {STACK_TAG: "hpdpd-qa-platform"}}},
                         {"name": "hpdpd-dev"})
        code = main(["preflight", "--env", "dev", "--config-dir", str(config_dir), "--output", "json"])
    data = json.loads(capsys.readouterr().out)
    # THEN the ownership row fails with the prefix fix, and the command exits 1
    row = next(c for c in data["checks"] if c["name"] == "owner:eks:hpdpd-dev")
    assert code == 1 and data["ok"] is False
    assert row["status"] == "fail" and "set stack_name_prefix: hpdpd-qa" in row["fix"]
