"""A whole environment that adopts both its VPC and its EKS cluster (tests/fixtures/adopted/config/adopted.yaml):
it synthesizes offline with no error annotation, the guardrails (cdk-nag and the project's rules) pass, cfn-lint
finds nothing, and the templates create no cluster and none of its core add-ons."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.infra.guardrails.rules import RULES, Settings
from hyperpod_dpd.infra.guardrails.templates import StageTemplates
from hyperpod_dpd.stacks.application import build_app, cdk_json_context, synthesis_errors
from hyperpod_dpd.stacks.assembly import Synthesized, read_assembly
from tests.paths import ROOT
from tests.validators import cfn_lint_findings, report_violations, validation_report

ADOPTED_DIR = ROOT / "tests" / "fixtures" / "adopted" / "config"
ENV = "adopted"


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return yaml.safe_load((ADOPTED_DIR / f"{ENV}.yaml").read_text())


@pytest.fixture(scope="module")
def adopted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Synthesized, list[str]]:
    """GIVEN the adopted environment WHEN it is synthesized as ``make synth`` does (the guardrails raise on a finding)."""
    outdir = tmp_path_factory.mktemp("adopted.out")
    app, _ = build_app(config_dir=ADOPTED_DIR, outdir=str(outdir), context=cdk_json_context())
    assembly = app.synth()
    return read_assembly(outdir), synthesis_errors(assembly)


def _resources(synthesized: Synthesized, part: str, type_: str) -> dict[str, dict[str, Any]]:
    return synthesized.resources(ENV, part, type_)


def test_it_synthesizes_without_errors_and_passes_the_guardrails_and_cfn_lint(adopted) -> None:
    synthesized, errors = adopted
    assert errors == []
    report = validation_report(synthesized.outdir)
    assert {p["pluginName"] for p in report["pluginReports"]} >= {"AwsSolutions", "HyperPodDpd"}
    # (but the configuration's own warnings, annotations and so warning-level entries: tests/stacks/test_warnings.py)
    assert [v for v in report_violations(report) if not v[1].startswith("Annotation::hpdpd:config:")] == []
    assert set(synthesized.templates) == {(ENV, "network"), (ENV, "platform"), (ENV, "endpoints")}
    assert cfn_lint_findings(synthesized.templates, {ENV: "us-west-2"}) == []


def test_no_vpc_subnet_cluster_secrets_key_or_core_addon_is_created(adopted) -> None:
    synthesized, _ = adopted
    for part in ("network", "platform", "endpoints"):
        for type_ in ("AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EKS::Cluster", "AWS::EKS::Nodegroup", "AWS::IAM::OIDCProvider"):
            assert _resources(synthesized, part, type_) == {}, (part, type_)
    assert [k for k in _resources(synthesized, "platform", "AWS::KMS::Key") if k.startswith("Eks")] == []  # no secrets key
    addons = {a["Properties"]["AddonName"] for a in _resources(synthesized, "platform", "AWS::EKS::Addon").values()}
    assert addons.isdisjoint({"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"})
    # only the inference operator's add-ons, on the adopted cluster
    assert "amazon-sagemaker-hyperpod-inference" in addons
    assert {a["Properties"]["ClusterName"] for a in _resources(synthesized, "platform", "AWS::EKS::Addon").values()} == {
        "platform-shared"}


def test_hyperpod_joins_the_adopted_cluster_in_its_security_group(adopted, config) -> None:
    synthesized, _ = adopted
    existing = config["eks"]["existing"]
    (_, hyperpod), = _resources(synthesized, "platform", "AWS::SageMaker::Cluster").items()
    props = hyperpod["Properties"]
    assert props["Orchestrator"]["Eks"]["ClusterArn"] == {"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, f":eks:us-west-2:444444444444:cluster/{existing['cluster_name']}"]]}
    assert existing["cluster_security_group_id"] in props["VpcConfig"]["SecurityGroupIds"]
    assert props["VpcConfig"]["Subnets"] == [config["network"]["existing"]["gpu_subnet"]["subnet_id"]]


def test_the_kubectl_handler_runs_as_the_given_role_in_the_given_subnets(adopted, config) -> None:
    synthesized, _ = adopted
    existing = config["eks"]["existing"]
    handlers = [f["Properties"] for k, f in _resources(synthesized, "platform", "AWS::Lambda::Function").items()
                if k.startswith("EksKubectlProviderHandler")]
    assert [h["Role"] for h in handlers] == [existing["kubectl_role_arn"]]
    assert handlers[0]["VpcConfig"] == {"SubnetIds": existing["kubectl_private_subnet_ids"],
                                        "SecurityGroupIds": [existing["kubectl_security_group_id"]]}
    # the endpoint manifests (and the endpoint's namespace) go through that provider, from the endpoints stack
    manifests = _resources(synthesized, "endpoints", "Custom::AWSCDK-EKS-KubernetesResource")
    assert sorted(k.split("-")[0][:8] for k in manifests) == ["Endpoint", "Namespac"]
    for manifest in manifests.values():
        assert manifest["Properties"]["ClusterName"] == existing["cluster_name"]
        assert "EksKubectlProviderframeworkonEvent" in str(manifest["Properties"]["ServiceToken"])


def test_operator_roles_trust_the_adopted_oidc_provider(adopted, config) -> None:
    synthesized, _ = adopted
    oidc = config["eks"]["existing"]["oidc_provider_arn"]
    federated = {k: s["Principal"]["Federated"] for k, r in _resources(synthesized, "platform", "AWS::IAM::Role").items()
                 for s in r["Properties"]["AssumeRolePolicyDocument"]["Statement"] if s["Action"] == "sts:AssumeRoleWithWebIdentity"}
    assert len(federated) >= 5 and set(federated.values()) == {oidc}


def test_the_eks_rules_pass_an_adopted_cluster_even_in_production(adopted) -> None:
    # GIVEN the adopted stage's templates (no AWS::EKS::Cluster: its logging, encryption and endpoint are the owner's)
    synthesized, _ = adopted
    view = StageTemplates.from_dicts({f"{e}/{p}": copy.deepcopy(t) for (e, p), t in synthesized.templates.items()},
                                     {synthesized.stack_names[k]: f"{k[0]}/{k[1]}" for k in synthesized.templates})
    # WHEN the EKS rules run with the production settings THEN they find nothing to fail
    findings = [f for rule in RULES if rule.id.startswith("HPDPD-EKS") for f in rule.check(view, Settings(production=True))]
    assert findings == []


def test_a_production_adopted_environment_is_valid_without_endpoint_settings(tmp_path: Path, config) -> None:
    # GIVEN the adopted environment made production (retained data, termination protection) and nothing else
    data = copy.deepcopy(config)
    data.update(production=True, removal_policy="retain", termination_protection=True)
    # (with the guards production requires of an environment with endpoints: container logs and a subscriber)
    data["operator"]["observability"]["logging"] = True
    data["alerts"] = {"emails": ["oncall@example.com"]}
    (tmp_path / f"{ENV}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    # WHEN it is loaded THEN the production endpoint rule does not ask for CIDRs of an endpoint it does not manage
    env = load_environment(ENV, tmp_path)
    assert (env.eks.cluster_name, env.eks.version, env.eks.public_access_cidrs) == ("platform-shared", "1.34", ())
