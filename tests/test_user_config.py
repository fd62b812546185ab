"""Invariants of the user's configuration (``config/``, or ``$HPDPD_CONFIG_DIR`` when the run started), whatever it
holds: every environment loads, synthesizes with zero errors, passes cfn-lint, the guardrails, the CRD schema and
``kubernetes-validate``, and keeps its recorded stateful resources; every environment with endpoints synthesizes the
alert guards its configuration asks for (a production one all of them, unless a written reason opts out), and the
pipeline gates each of them with rollout, smoke and verify --probe, as a checks role that exists.

The same checks run a second time over a copy of that directory with a fourth environment (another account and
Region) and a changed endpoint, with ``HPDPD_CONFIG_DIR`` pointing at it: proof that a real configuration change
keeps ``make test`` (and so the pipeline's build) green. Nothing here asserts the sample's values.
"""

from __future__ import annotations

import copy
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd.catalogue.instances import INSTANCE_TYPES
from hyperpod_dpd.catalogue.regions import HYPERPOD_REGIONS
from hyperpod_dpd.catalogue.zones import ZONES
from hyperpod_dpd.config import EnvironmentConfig, list_environments, load_all
from hyperpod_dpd.config.alerts import GUARDS, LOG, SLO, SUBSCRIBERS
from hyperpod_dpd.config.pipeline import pipeline_file, read_pipeline
from hyperpod_dpd.infra.guardrails.stateful import RETAINED_TYPES, stateful_resources
from hyperpod_dpd.k8s.gitops import render_environment
from hyperpod_dpd.k8s.validation import validate_manifests
from hyperpod_dpd.stacks.application import build_app, synthesis_errors
from hyperpod_dpd.stacks.assembly import Synthesized, read_assembly
from tests.paths import ROOT, USER_CONFIG_DIR
from tests.validators import cfn_lint_findings, report_violations, validation_report

STATEFUL_MANIFEST = ROOT / "security" / "stateful-resources.json"
ADDED_ACCOUNTS = ("555555555555", "555555555556", "555555555557")


@dataclass
class Checked:
    """One configuration directory, loaded and synthesized once."""

    config_dir: Path
    environments: dict[str, EnvironmentConfig]
    synthesized: Synthesized
    errors: list[str]
    added: str | None = None  # the environment the test added, and the one it was copied from
    source: str | None = None


def _other_region(data: dict[str, Any]) -> str:
    """A HyperPod Region, other than the environment's, where both validators accept every instance type it uses."""
    types = {g["instance_type"] for g in data["hyperpod"]["instance_groups"]}
    # a Region whose zone list is confirmed (elsewhere an unlisted zone is a warning, rightly)
    candidates = {r for r in HYPERPOD_REGIONS if r in ZONES and ZONES[r].confirmed} - {data["region"]}
    for name in types:
        spec = INSTANCE_TYPES[name]
        candidates &= set(spec.priced_regions) - set(spec.cdk_validator_lags)
    return sorted(candidates)[0] if candidates else data["region"]


def _replace(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_replace(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _replace(v, old, new) for k, v in value.items()}
    return value


def _rezone(value: Any, old: str, new: str) -> Any:
    """Zone names of ``old`` (after the Region's replacement, ``<new><letter>``) as the zones of ``new`` that exist:
    the i-th zone of the old Region becomes the i-th of the new one."""
    if isinstance(value, list):
        return [_rezone(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _rezone(v, old, new) for k, v in value.items()}
    if isinstance(value, str) and len(value) == len(new) + 1 and value.startswith(new) and old in ZONES:
        letters = ZONES[old].letters
        if value[-1] in letters:
            return ZONES[new].names[letters.index(value[-1]) % len(ZONES[new].names)]
    return value


def _added_environment(config_dir: Path) -> tuple[str, str, dict[str, Any]]:
    """A copy of the first environment with endpoints (else the first one) in another account and Region, with
    one more prefill node and replica and another routing threshold: ``(new name, source name, data)``. The name and
    the account are ones the directory does not use yet."""
    names = list_environments(config_dir)
    loaded = {n: yaml.safe_load((config_dir / f"{n}.yaml").read_text()) for n in names}
    source = next((n for n in names if loaded[n].get("endpoints")), names[0])
    base = loaded[source]
    region = _other_region(base)
    name = next(f"added{i}" for i in range(len(names) + 1) if f"added{i}" not in names)
    account = next(a for a in ADDED_ACCOUNTS if a not in {str(d["account"]) for d in loaded.values()})
    data = _replace(_replace(copy.deepcopy(base), str(base["region"]), region), str(base["account"]), account)
    data = _rezone(data, str(base["region"]), region)
    data.pop("production", None)
    data["removal_policy"], data["termination_protection"] = "destroy", False
    for endpoint in data.get("endpoints", [])[:1]:
        prefill = endpoint.setdefault("prefill", {})
        group = next(g for g in data["hyperpod"]["instance_groups"]
                     if g["name"] == prefill.get("instance_group", "prefill"))
        group["count"] = group.get("count", 1) + 1
        prefill["replicas"] = prefill.get("replicas", 1) + 1
        routing = endpoint.setdefault("routing", {})
        routing["threshold"] = 2048 if routing.get("threshold", 4096) != 2048 else 8192
    return name, source, data


def _check(config_dir: Path, outdir: Path, context: dict[str, Any]) -> Checked:
    environments = {e.name: e for e in load_all(config_dir)}
    app, _ = build_app(config_dir=config_dir, outdir=str(outdir), context=context)
    assembly = app.synth()  # raises on any unacknowledged guardrail finding
    return Checked(config_dir, environments, read_assembly(outdir), synthesis_errors(assembly))


@pytest.fixture(scope="module", params=["as-is", "with-added-environment"])
def checked(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
            cdk_context: dict[str, Any]) -> Checked:
    if request.param == "as-is":
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("HPDPD_CONFIG_DIR", str(USER_CONFIG_DIR))
            return _check(USER_CONFIG_DIR, tmp_path_factory.mktemp("user"), cdk_context)
    copied = tmp_path_factory.mktemp("changed") / "config"
    shutil.copytree(USER_CONFIG_DIR, copied)
    name, source, data = _added_environment(copied)
    (copied / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HPDPD_CONFIG_DIR", str(copied))
        result = _check(copied, tmp_path_factory.mktemp("changed-out"), cdk_context)
    result.added, result.source = name, source
    return result


def test_every_environment_file_loads_and_synthesizes(checked: Checked) -> None:
    # GIVEN the configuration directory WHEN it is loaded and synthesized THEN every file is a stage with stacks
    assert set(checked.environments) == set(list_environments(checked.config_dir))
    assert {env for env, _ in checked.synthesized.templates} == set(checked.environments)


def test_no_stack_carries_an_error_annotation(checked: Checked) -> None:
    assert checked.errors == []


def test_every_template_passes_cfn_lint(checked: Checked) -> None:
    regions = {name: env.region for name, env in checked.environments.items()}
    assert cfn_lint_findings(checked.synthesized.templates, regions) == []


def test_guardrails_ran_on_every_stage_and_found_nothing_unacknowledged(checked: Checked) -> None:
    report = validation_report(checked.synthesized.outdir)
    plugins = [p["pluginName"] for p in report["pluginReports"]]
    # the project's rules report per stage; cdk-nag checks the whole app once, every environment included
    assert plugins.count("HyperPodDpd") == len(checked.environments)
    assert plugins.count("AwsSolutions") == 1
    nag = next(p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions")
    checked_paths = {c["constructPath"].split("/")[0]
                     for v in nag["violations"] + nag["suppressedViolations"] for c in v["violatingConstructs"]}
    assert set(checked.environments) <= checked_paths
    assert report_violations(report) == []


def test_every_endpoint_manifest_passes_the_crd_schema_and_kubernetes_validate(checked: Checked) -> None:
    if not any(env.endpoints for env in checked.environments.values()):
        pytest.skip("no environment of the configuration declares an endpoint")
    for env in checked.environments.values():
        rendered = render_environment(env)
        assert set(rendered) == {e.name for e in env.endpoints}
        for manifests in rendered.values():  # rendering validates already; validate again, explicitly
            validate_manifests(manifests, kubernetes_version=env.eks.version)
            assert {m["kind"] for m in manifests} >= {"InferenceEndpointConfig"}


def test_recorded_stateful_resources_keep_their_logical_ids(checked: Checked) -> None:
    # GIVEN the stateful resources recorded for deployed environments (a new environment has no record yet)
    recorded = json.loads(STATEFUL_MANIFEST.read_text())
    assert checked.synthesized.templates  # the loop below has templates to hold to the record
    for (env, part), template in checked.synthesized.templates.items():
        current = stateful_resources(template)
        # THEN a recorded environment keeps every recorded logical id and type: a rename or a removal would replace
        # or delete the resource (added resources are new, not replaced)
        lost = {k: v for k, v in recorded.get(env, {}).get(part, {}).items() if current.get(k) != v}
        assert lost == {}, f"{env}/{part}: recorded stateful resources would be replaced or deleted; " \
                           "run 'make stateful-manifest' only if that is deliberate"


def test_retained_environments_retain_their_data(checked: Checked) -> None:
    # Every stateful resource (the HyperPod cluster, the network, EKS, buckets, keys, log groups, the OIDC provider)
    # survives a stack deletion and a replacement in an environment whose removal policy is retain.
    retained = {name for name, env in checked.environments.items() if env.removal_policy == "retain"}
    if not retained:
        pytest.skip("no environment of the configuration retains its data")
    stateful = {(env, logical_id): resource for (env, _part), template in checked.synthesized.templates.items()
                if env in retained for logical_id, resource in template["Resources"].items()
                if resource["Type"] in RETAINED_TYPES}
    # every retained environment has stateful resources to check (its HyperPod cluster at least)
    assert {env for env, _ in stateful} == retained
    for (env, logical_id), resource in stateful.items():
        assert (resource.get("DeletionPolicy"), resource.get("UpdateReplacePolicy")) == ("Retain", "Retain"), \
            f"{env}: {logical_id} ({resource['Type']})"


def test_the_added_environment_is_really_different(checked: Checked) -> None:
    if checked.added is None or checked.source is None:
        pytest.skip("the configuration as it is")
    added, source = checked.environments[checked.added], checked.environments[checked.source]
    assert added.account in ADDED_ACCOUNTS and added.account != source.account
    if added.endpoints:
        assert added.endpoints[0].prefill.replicas == source.endpoints[0].prefill.replicas + 1
        assert added.endpoints[0].routing.threshold != source.endpoints[0].routing.threshold


# ---- the gates: alerts and the pipeline's checks, for every environment with endpoints ---------------------------------


def _of_type(template: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [r for r in template["Resources"].values() if r["Type"] == type_]


def test_every_environment_with_endpoints_synthesizes_the_alert_guards_it_keeps(checked: Checked) -> None:
    if not any(env.endpoints for env in checked.environments.values()):
        pytest.skip("no environment of the configuration declares an endpoint")
    for name, env in checked.environments.items():
        if not env.endpoints:
            continue
        missing = env.alerts.missing_guards(env)
        # GIVEN a production environment: every guard it lacks carries its written reason (the configuration refuses
        # it otherwise)
        if env.production:
            assert {key for key in missing if getattr(env.alerts, key) is None} == set(), name
        # THEN the platform stack holds exactly the guards the configuration keeps: the SLO rules in the add-on's
        # workspace, the decoder buffer-overflow alarm on the container logs, and the subscriptions
        platform = checked.synthesized.template(name, "platform")
        rules = _of_type(platform, "AWS::APS::RuleGroupsNamespace")
        alarms = [a for a in _of_type(platform, "AWS::CloudWatch::Alarm")
                  if a["Properties"].get("MetricName") == "DecoderBufferOverflow"]
        subscriptions = _of_type(platform, "AWS::SNS::Subscription")
        assert (bool(rules), bool(alarms), bool(subscriptions)) == (
            SLO not in missing, LOG not in missing, SUBSCRIBERS not in missing), (name, sorted(missing), GUARDS)
        assert len(subscriptions) == len(env.alerts.emails) + len(env.alerts.https_endpoints)


def _pipeline_stage(checked: Checked, environment: str) -> list[dict[str, Any]]:
    manifest = json.loads((checked.synthesized.outdir / "manifest.json").read_text())
    (artifact,) = [a for a in manifest["artifacts"].values()
                   if a["type"] == "aws:cloudformation:stack" and a["displayName"] == "pipeline"]
    template = json.loads((checked.synthesized.outdir / artifact["properties"]["templateFile"]).read_text())
    (pipeline,) = _of_type(template, "AWS::CodePipeline::Pipeline")
    stage = next(s for s in pipeline["Properties"]["Stages"] if s["Name"] == environment)
    for action in stage["Actions"]:  # the commands of each CodeBuild step, for the checks below
        project = template["Resources"].get((action["Configuration"].get("ProjectName") or {}).get("Ref", ""))
        action["commands"] = json.loads(project["Properties"]["Source"]["BuildSpec"])["phases"]["build"][
            "commands"] if project else []
    return stage["Actions"]


def test_the_pipeline_gates_every_environment_with_endpoints_as_a_role_that_exists(checked: Checked) -> None:
    if not pipeline_file(checked.config_dir).is_file():
        pytest.skip("the configuration has no pipeline.yaml")
    pipeline = read_pipeline(checked.config_dir)
    assert pipeline.environments  # a pipeline promotes through one environment at least
    for promotion in pipeline.environments:
        env = checked.environments[promotion.name]
        steps = {a["Name"].rsplit(".", 1)[-1]: a for a in _pipeline_stage(checked, promotion.name)}
        gates = {"Rollout", "Smoke", "KvFabric"}
        if not env.endpoints:
            assert gates & set(steps) == set(), promotion.name
            continue
        # THEN the endpoints stack is preceded by rollout promote, and the deploy followed by verify --probe (and by
        # smoke unless smoke: false), one command per endpoint, each as the environment's checks role
        expected = gates if promotion.runs_smoke(env) else gates - {"Smoke"}
        assert expected <= set(steps) and ("Smoke" in steps) == promotion.runs_smoke(env), promotion.name
        for gate in expected:
            commands = [c for c in steps[gate]["commands"] if c.startswith(".venv/bin/hpdpd ")]
            assert [c for c in commands if "--profile hpdpd-checks" in c and "hpdpd wait" not in c], (gate, commands)
            for endpoint in env.endpoints:
                assert any(f"--endpoint {endpoint.name} " in c for c in commands), (gate, endpoint.name)
        assert all("--probe" in c for c in steps["KvFabric"]["commands"] if " verify " in c)
        assert all("--probe" in c for c in steps["Rollout"]["commands"] if " rollout " in c)
        # AND the commands run in the checks runner the environment's platform stack creates (in its VPC), started
        # as the toolkit's checks role (in the network stack, which deploys before preflight), or the explicit one
        platform = checked.synthesized.template(env.name, "platform")
        projects = [p["Properties"] for p in _of_type(platform, "AWS::CodeBuild::Project")]
        assert [p for p in projects if p["Name"] == env.checks_project_name and p.get("VpcConfig")], env.name
        if promotion.checks_role_arn is None:
            roles = [r["Properties"] for r in _of_type(checked.synthesized.template(env.name, "network"), "AWS::IAM::Role")]
            assert [r for r in roles if r.get("RoleName") == env.checks_role_name], env.name
