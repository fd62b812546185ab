"""Stack names (stacks/naming.py): a renamed environment file with ``stack_name_prefix`` synthesizes the stacks and the
physical names of the environment it was, and every stack tags its IAM roles with its name."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml

from hyperpod_dpd.config import EnvironmentConfig, load_environment
from hyperpod_dpd.config.identity import OWNER_TAG
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra.platform import availability_zone_context
from hyperpod_dpd.stacks.application import build_app
from hyperpod_dpd.stacks.assembly import Synthesized, read_assembly
from hyperpod_dpd.stacks.environment_stage import EnvironmentStage
from hyperpod_dpd.stacks.naming import deployed_stage
from tests.paths import FIXTURE_CONFIG_DIR

TRUST = "arn:aws:iam::444444444444:role/hpdpd-pipeline-checks-dev"
# Every property that carries a physical name in the templates (CloudFormation resource references: BucketName,
# RoleName, ClusterName of AWS::SageMaker::Cluster, Name of AWS::EKS::Cluster, ProjectName, LogGroupName, ...);
# DisplayName (an SNS topic's label, updated in place) is none.
NAME_SUFFIX, LABELS = "Name", {"DisplayName"}


@pytest.fixture(scope="module")
def renamed(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any]) -> tuple[Synthesized, dict[str, Any]]:
    """dev as the fixtures define it, and the same file renamed to devel.yaml with ``stack_name_prefix: hpdpd-dev``,
    both promoted (checks role and runner), as two stages of one app: one synthesis."""
    directory = tmp_path_factory.mktemp("renamed") / "config"
    directory.mkdir()
    data = yaml.safe_load((FIXTURE_CONFIG_DIR / "dev.yaml").read_text())
    renamed_data = {**copy.deepcopy(data), "stack_name_prefix": "hpdpd-dev"}
    (directory / "devel.yaml").write_text(yaml.safe_dump(renamed_data, sort_keys=False))
    dev = load_environment("dev", FIXTURE_CONFIG_DIR).with_checks_role(TRUST)
    devel = load_environment("devel", directory).with_checks_role(TRUST)
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = cdk.App(outdir=str(outdir), context={**availability_zone_context(dev), **cdk_context})
    stages = {c.name: EnvironmentStage(app, c.name, config=c) for c in (dev, devel)}
    app.synth()
    return read_assembly(outdir), {"configs": (dev, devel), "stages": stages}


def _names(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per logical id, the top-level ``*Name`` properties: the physical names CloudFormation creates."""
    return {logical_id: {k: v for k, v in resource.get("Properties", {}).items()
                         if k.endswith(NAME_SUFFIX) and k not in LABELS}
            for logical_id, resource in template["Resources"].items()}


def _efa_self_rules(template: dict[str, Any]) -> set[str]:
    return {k for k in template["Resources"] if k.startswith("NetworkEfaSecurityGroupfrom")}


def test_a_renamed_environment_keeps_its_stacks_and_physical_names(renamed: tuple[Synthesized, dict[str, Any]]) -> None:
    synthesized, _ = renamed
    for part in ("network", "platform", "endpoints"):
        # THEN each stack has dev's name, the same resources (logical ids) and the same physical names
        assert synthesized.stack_names[("devel", part)] == synthesized.stack_names[("dev", part)] == f"hpdpd-dev-{part}"
        before, after = synthesized.template("dev", part), synthesized.template("devel", part)
        assert _names(after) == _names(before)
    # AND the names that derive from the prefix are among them
    roles = {r["Properties"].get("RoleName") for part in ("network", "platform")
             for r in synthesized.resources("devel", part, "AWS::IAM::Role").values()}
    assert {"hpdpd-dev-checks", "hpdpd-dev-checks-runner"} <= roles


def test_a_renamed_environment_keeps_every_logical_id(renamed: tuple[Synthesized, dict[str, Any]]) -> None:
    # THEN the EFA group's self-referencing rules too, whose CDK ids hold the stage's path (stacks/naming.py,
    # keep_logical_ids): no resource of the renamed environment is replaced
    synthesized, _ = renamed
    for part in ("network", "platform", "endpoints"):
        assert set(synthesized.template("devel", part)["Resources"]) == set(
            synthesized.template("dev", part)["Resources"])
    assert _efa_self_rules(synthesized.template("devel", "network"))


def _differences(before: Any, after: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(path, before, after) of each leaf at which two templates differ; a key on one side only is a difference."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [d for k in sorted(set(before) | set(after), key=str)
                for d in (_differences(before[k], after[k], f"{path}/{k}") if k in before and k in after
                          else [(f"{path}/{k}", before.get(k), after.get(k))])]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [d for i, (b, a) in enumerate(zip(before, after)) for d in _differences(b, a, f"{path}[{i}]")]
    return [] if before == after else [(path, before, after)]


# Labels CDK derives from construct paths, which hold the stage: the prune label of KubernetesManifest
# (aws-eks-v2/lib/k8s-manifest.js, "aws.cdk.eks/prune-" + Names.uniqueId) and BucketDeployment's owner tag
# (aws-s3-deployment, "aws-cdk:cr-owned:<prefix>:<hash>"). Both are re-applied in place under the new path.
PATH_LABELS = (re.compile(r"aws\.cdk\.eks/prune-[0-9a-f]+"), re.compile(r"(?<=aws-cdk:cr-owned:)([^:\"]*):[0-9a-f]{8}"))


def _without_path_labels(text: str) -> str:
    for label in PATH_LABELS:
        text = label.sub("<label>", text)
    return text


def _name_tag(template: dict[str, Any], path: str) -> bool:
    """Whether ``path`` is the value of a resource's ``Name`` tag (CDK writes construct paths there)."""
    match = re.fullmatch(r"/Resources/([^/]+)/Properties/Tags\[(\d+)\]/Value", path)
    return bool(match) and template["Resources"][match[1]]["Properties"]["Tags"][int(match[2])]["Key"] == "Name"


def test_a_renamed_environment_changes_only_text_that_names_it(renamed: tuple[Synthesized, dict[str, Any]]) -> None:
    synthesized, _ = renamed
    for part in ("network", "platform", "endpoints"):
        # WHEN the renamed environment's templates are compared with the original's, leaf by leaf
        before, after = synthesized.template("dev", part), synthesized.template("devel", part)
        found = _differences(before, after)
        # THEN every difference is text that names the environment (descriptions, the checks runner's environment
        # variable: the same string with devel for dev), a Name tag or a label CDK writes from the construct path,
        # all of which CloudFormation updates in place
        unexpected = [(path, b, a) for path, b, a in found
                      if not (isinstance(a, str) and isinstance(b, str)
                              and _without_path_labels(a).replace("devel", "dev") == _without_path_labels(b))
                      and not _name_tag(after, path)]
        assert unexpected == [], "\n".join(map(str, unexpected))
        assert found  # the descriptions do name the environment


def test_every_named_role_carries_the_name_of_its_stack(renamed: tuple[Synthesized, dict[str, Any]]) -> None:
    synthesized, _ = renamed
    for part in ("network", "platform"):
        # GIVEN the roles with a physical name (RoleName): the names hpdpd preflight checks the owner of
        roles = {k: r for k, r in synthesized.resources("devel", part, "AWS::IAM::Role").items()
                 if "RoleName" in r["Properties"]}
        assert roles
        for logical_id, role in roles.items():
            tags = {t["Key"]: t["Value"] for t in role["Properties"].get("Tags", [])}
            assert tags.get(OWNER_TAG) == f"hpdpd-dev-{part}", logical_id


def test_build_app_refuses_configs_that_claim_one_name(renamed: tuple[Synthesized, dict[str, Any]],
                                                       tmp_path: Path) -> None:
    # GIVEN dev and its renamed copy, built in memory: both claim hpdpd-dev-* and dev's clusters
    _, built = renamed
    dev, devel = built["configs"]
    configs: list[EnvironmentConfig] = [dev, devel]
    # WHEN an app is built from them, THEN it is refused before any construct exists, one line per claimed name
    with pytest.raises(ConfigError) as caught:
        build_app(configs=configs, outdir=str(tmp_path))
    lines = str(caught.value).splitlines()
    assert lines[0].startswith(f"{devel.source}: stack_name_prefix: 'hpdpd-dev-network': ")
    assert any(": eks.cluster_name: " in line for line in lines)


@pytest.mark.parametrize(("prefix", "stage"), [(None, "devel"), ("hpdpd-dev", "dev"), ("team-a", "devel"),
                                               ("hpdpd-", "devel")])
def test_the_deployed_stage_is_the_one_the_prefix_names(tmp_path: Path, prefix: str | None, stage: str) -> None:
    # GIVEN devel.yaml with or without a stack_name_prefix, THEN the stage its rules keep the ids of is the one the
    # default form hpdpd-<old> names, and its own otherwise
    data = yaml.safe_load((FIXTURE_CONFIG_DIR / "dev.yaml").read_text())
    if prefix is not None:
        data["stack_name_prefix"] = prefix
    (tmp_path / "devel.yaml").write_text(yaml.safe_dump(data))
    assert deployed_stage(load_environment("devel", tmp_path)) == stage
