"""The GitOps tree with delivery.endpoints gitops: every object CDK would otherwise apply and none that it applies,
ordered for Argo CD, a kustomization per directory, deterministic bytes, and a directory the writer owns: it refuses
one it does not, and leaves nothing stale after an endpoint is removed or an environment renamed."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml

from hyperpod_dpd.config import EnvironmentConfig, load_all, load_environment
from hyperpod_dpd.config.delivery import DeliveryConfig
from hyperpod_dpd.infra import availability_zone_context
from hyperpod_dpd.infra.platform import HyperPodDpdPlatform
from hyperpod_dpd.k8s.gitops import MARKER, main, write_manifests
from hyperpod_dpd.k8s.gitops_render import ARGO_SYNC_OPTIONS, FLUX_PRUNE, SYNC_WAVE

ROOT = Path(__file__).resolve().parents[2]
GITOPS_CONFIG_DIR = ROOT / "tests" / "fixtures" / "gitops" / "config"
KUBERNETES_RESOURCE = "Custom::AWSCDK-EKS-KubernetesResource"
Key = tuple[str, str, str, str]  # apiVersion, kind, namespace, name


def _key(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"]


def _tree_objects(directory: Path) -> dict[Key, dict[str, Any]]:
    """Every Kubernetes object under ``directory`` (kustomizations excluded)."""
    found: dict[Key, dict[str, Any]] = {}
    for path in sorted(directory.rglob("*.k8s.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            found[_key(obj)] = obj
    return found


def _files(directory: Path) -> set[str]:
    return {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()}


def _applied(template: dict[str, Any]) -> dict[Key, dict[str, Any]]:
    return {_key(obj): obj for r in template["Resources"].values() if r["Type"] == KUBERNETES_RESOURCE
            for obj in json.loads(r["Properties"]["Manifest"])}


@pytest.fixture(scope="module")
def gitops_dev() -> EnvironmentConfig:
    return load_environment("dev", GITOPS_CONFIG_DIR)


@pytest.fixture(scope="module")
def both_modes(gitops_dev: EnvironmentConfig, cdk_context: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """GitOps dev as a consumer's one-construct stack, once delivered by gitops and once by cdk: one synthesis."""
    cdk_dev = gitops_dev.model_copy(update={"delivery": DeliveryConfig()})
    app = cdk.App(context={**availability_zone_context(gitops_dev), **cdk_context})
    env = cdk.Environment(account=gitops_dev.account, region=gitops_dev.region)
    for name, config in (("GitOps", gitops_dev), ("Cdk", cdk_dev)):
        HyperPodDpdPlatform(cdk.Stack(app, name, env=env), "Dpd", config=config)
    assembly = app.synth()
    return {name: assembly.get_stack_by_name(name).template for name in ("GitOps", "Cdk")}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tree")
    write_manifests(out, load_all(GITOPS_CONFIG_DIR))
    return out


def test_the_tree_holds_every_object_cdk_would_apply_and_no_stack_applies_any(
        tree: Path, both_modes: dict[str, dict[str, Any]]) -> None:
    # GIVEN GitOps dev (an endpoint, an operations role, an autoscaled prefill group)
    cdk_objects = _applied(both_modes["Cdk"])
    written = _tree_objects(tree / "dev")
    # THEN the tree's environment (outside prometheus/, which CDK ships to AMP instead) is exactly what CDK would apply
    delivered = {k: v for k, v in written.items() if k[1] != "PrometheusRule"}
    assert set(delivered) == set(cdk_objects)
    assert {k[1] for k in delivered} >= {"Namespace", "InferenceEndpointConfig", "Service", "ClusterRole",
                                         "ClusterRoleBinding", "RoleBinding", "HyperpodNodeClass", "NodePool"}
    # AND the specs are the same objects (CDK adds its prune label, the tree its annotations)
    for key, obj in delivered.items():
        assert {k: v for k, v in obj.items() if k != "metadata"} == \
            {k: v for k, v in cdk_objects[key].items() if k != "metadata"}, key
    # AND in gitops mode no stack applies any of them: never both
    assert _applied(both_modes["GitOps"]) == {}


def test_each_directory_has_a_kustomization_listing_its_files(tree: Path) -> None:
    for directory in ("dev", "dev/cluster", "dev/endpoints", "dev/prometheus"):
        (kustomization,) = yaml.safe_load_all((tree / directory / "kustomization.yaml").read_text())
        assert kustomization["kind"] == "Kustomization"
        listed = set(kustomization["resources"])
        present = {p.name for p in (tree / directory).iterdir() if p.name != "kustomization.yaml"}
        # THEN the root lists its two delivered parts, and every other directory lists exactly its files
        assert listed == ({"cluster", "endpoints"} if directory == "dev" else present), directory


def test_namespaces_and_services_come_before_the_iec(tree: Path) -> None:
    waves = {key: int(obj["metadata"]["annotations"][SYNC_WAVE]) for key, obj in _tree_objects(tree / "dev").items()}
    by_kind: dict[str, set[int]] = {}
    for key, wave in waves.items():
        by_kind.setdefault(key[1], set()).add(wave)
    (iec,) = by_kind["InferenceEndpointConfig"]
    # THEN every namespace syncs before the RBAC, which syncs before the Services, which sync before the IEC
    assert max(by_kind["Namespace"]) < min(by_kind["RoleBinding"]) <= max(by_kind["RoleBinding"]) < \
        min(by_kind["Service"]) <= max(by_kind["Service"]) < iec
    assert max(by_kind["NetworkPolicy"] | by_kind["PodDisruptionBudget"] | by_kind["NodePool"]) < iec
    assert max(by_kind["HyperpodNodeClass"]) < min(by_kind["NodePool"])


def test_namespaces_are_never_pruned_and_karpenter_waits_for_its_crds(tree: Path) -> None:
    for key, obj in _tree_objects(tree / "dev").items():
        annotations = obj["metadata"]["annotations"]
        if key[1] == "Namespace":
            assert annotations[ARGO_SYNC_OPTIONS] == "Prune=false" and annotations[FLUX_PRUNE] == "disabled"
        elif key[1] in ("HyperpodNodeClass", "NodePool"):
            assert annotations[ARGO_SYNC_OPTIONS] == "SkipDryRunOnMissingResource=true"
        else:
            assert ARGO_SYNC_OPTIONS not in annotations and FLUX_PRUNE not in annotations, key


def test_the_prometheus_rule_holds_the_alert_rules_monitoring_ships(tree: Path, gitops_dev: EnvironmentConfig) -> None:
    from hyperpod_dpd.monitoring.alerts import rule_groups

    (rule,) = _tree_objects(tree / "dev" / "prometheus").values()
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert rule["spec"] == rule_groups(gitops_dev)
    # AND it is not part of the environment's kustomization: its CRD is the team's Prometheus Operator's
    (root,) = yaml.safe_load_all((tree / "dev" / "kustomization.yaml").read_text())
    assert "prometheus" not in root["resources"]


def test_writing_twice_gives_the_same_bytes(tmp_path: Path) -> None:
    # GIVEN two writes of the same configuration into two directories, and a third over the first
    configs = load_all(GITOPS_CONFIG_DIR)
    write_manifests(tmp_path / "a", configs)
    write_manifests(tmp_path / "b", configs)
    again = write_manifests(tmp_path / "a", configs)
    # THEN every file is byte for byte the same, and the rewrite deletes nothing
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    for name in _files(tmp_path / "a"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert again.deleted == ()


def _config_dir(tmp_path: Path, names: Iterable[tuple[str, str]]) -> Path:
    """A configuration directory with GitOps fixture files copied under new names (source stem, new stem)."""
    directory = tmp_path / "config"
    directory.mkdir(exist_ok=True)
    for source, target in names:
        shutil.copy(GITOPS_CONFIG_DIR / f"{source}.yaml", directory / f"{target}.yaml")
    return directory


def test_removing_an_endpoint_leaves_no_stale_file(tmp_path: Path, gitops_dev: EnvironmentConfig) -> None:
    # GIVEN a tree written with dev's endpoint, and a file of the team's beside it
    out = tmp_path / "k8s"
    write_manifests(out, [gitops_dev])
    (out / "dev" / "README.md").write_text("ours\n")
    assert (out / "dev" / "endpoints" / "llama-3-3-70b.k8s.yaml").is_file()
    # WHEN the endpoint is removed and the tree written again
    result = write_manifests(out, [gitops_dev.model_copy(update={"endpoints": ()})])
    # THEN its file, its namespace and its alert rules are gone, and nothing on disk is stale
    assert "dev/endpoints/llama-3-3-70b.k8s.yaml" in result.deleted
    marker = json.loads((out / MARKER).read_text())
    assert _files(out) == {*marker["files"], MARKER, "dev/README.md"}
    assert not (out / "dev" / "prometheus").exists()
    assert not list((out / "dev").rglob("namespaces.k8s.yaml"))
    # AND the team's file is untouched
    assert (out / "dev" / "README.md").read_text() == "ours\n"


def test_renaming_an_environment_deletes_the_old_directory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a tree written from dev.yaml and handover.yaml
    out = tmp_path / "k8s"
    assert main(["--out", str(out), "--config-dir", str(_config_dir(tmp_path, [("dev", "dev"),
                                                                                ("handover", "handover")]))]) == 0
    # WHEN dev.yaml is renamed devel.yaml and the tree written again
    config_dir = tmp_path / "config"
    (config_dir / "dev.yaml").rename(config_dir / "devel.yaml")
    assert main(["--out", str(out), "--config-dir", str(config_dir)]) == 0
    # THEN dev/ is gone (a pruning controller stops running it), devel/ holds what dev/ held
    assert not (out / "dev").exists()
    assert {p.split("/", 1)[1] for p in _files(out) if p.startswith("devel/")} == {
        "kustomization.yaml", "cluster/kustomization.yaml", "cluster/namespaces.k8s.yaml",
        "cluster/operations.k8s.yaml", "cluster/karpenter.k8s.yaml", "endpoints/kustomization.yaml",
        "endpoints/llama-3-3-70b.k8s.yaml", "prometheus/kustomization.yaml", "prometheus/prometheus-rule.k8s.yaml"}
    assert "deleted " + str(out / "dev" / "endpoints" / "llama-3-3-70b.k8s.yaml") in capsys.readouterr().out
    # AND writing one environment alone keeps the other's files (it still exists)
    assert main(["--out", str(out), "--config-dir", str(config_dir), "--env", "devel"]) == 0
    assert (out / "_cdk" / "handover" / "llama-3-3-70b.k8s.yaml").is_file()


def test_a_directory_without_the_marker_is_refused_and_untouched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a non-empty directory the writer did not write
    out = tmp_path / "repo"
    out.mkdir()
    (out / "app.py").write_text("print('mine')\n")
    # WHEN the tree is written there
    assert main(["--out", str(out), "--config-dir", str(GITOPS_CONFIG_DIR)]) == 2
    # THEN one line says why, and nothing changed
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (f"error: {out}: not empty and not written by this writer (no {MARKER}); choose an empty or new "
                    "directory (--out), or one this writer owns")
    assert _files(out) == {"app.py"}


def test_a_rendered_file_never_replaces_one_the_writer_did_not_write(
        tmp_path: Path, gitops_dev: EnvironmentConfig, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an owned tree where the team replaced the marker's knowledge of dev/kustomization.yaml with its own file
    out = tmp_path / "k8s"
    write_manifests(out, [gitops_dev])
    marker = json.loads((out / MARKER).read_text())
    marker["files"].remove("dev/kustomization.yaml")
    (out / MARKER).write_text(json.dumps(marker))
    (out / "dev" / "kustomization.yaml").write_text("# the team's\n")
    # THEN the next write refuses with one line and leaves that file alone
    assert main(["--out", str(out), "--config-dir", str(GITOPS_CONFIG_DIR), "--env", "dev"]) == 2
    assert "dev/kustomization.yaml: exists and was not written by this writer" in capsys.readouterr().err
    assert (out / "dev" / "kustomization.yaml").read_text() == "# the team's\n"


@pytest.mark.parametrize("entry", ["../outside.txt", "/etc/hostname", "dev/../../outside.txt", 7])
def test_a_marker_naming_a_path_outside_the_directory_is_refused(
        tmp_path: Path, entry: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a marker that lists a file outside the tree (which a write would delete as stale)
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    out = tmp_path / "k8s"
    out.mkdir()
    (out / MARKER).write_text(json.dumps({"format": 1, "files": [entry]}))
    # THEN the write is refused with one line and the file outside survives
    assert main(["--out", str(out), "--config-dir", str(GITOPS_CONFIG_DIR)]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1
    assert outside.read_text() == "keep\n"


def test_a_directory_of_the_writer_before_the_marker_is_adopted(tmp_path: Path, gitops_dev: EnvironmentConfig) -> None:
    # GIVEN dist/k8s as the writer left it before the marker: <env>/<endpoint>.k8s.yaml only
    out = tmp_path / "k8s"
    (out / "dev").mkdir(parents=True)
    (out / "dev" / "removed-endpoint.k8s.yaml").write_text("kind: InferenceEndpointConfig\n")
    # WHEN the tree is written there
    result = write_manifests(out, [gitops_dev])
    # THEN it is adopted: the old file is deleted as stale, and the marker now owns the directory
    assert result.deleted == ("dev/removed-endpoint.k8s.yaml",)
    assert (out / MARKER).is_file()


def test_an_interrupted_write_leaves_a_directory_the_next_write_still_owns(
        tmp_path: Path, gitops_dev: EnvironmentConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a write that fails after its third file (a full disk, say)
    out = tmp_path / "k8s"
    real = Path.write_bytes
    calls: list[Path] = []

    def failing(self: Path, data: bytes) -> int:
        calls.append(self)
        if len(calls) > 3:
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", failing)
    with pytest.raises(OSError):
        write_manifests(out, [gitops_dev])
    monkeypatch.undo()
    # WHEN the tree is written again
    write_manifests(out, [gitops_dev])
    # THEN it completes, and the marker names exactly what is on disk: no partial or temporary file is left
    marker = json.loads((out / MARKER).read_text())
    assert _files(out) == {*marker["files"], MARKER}


def test_writing_environments_one_at_a_time_keeps_the_others(tmp_path: Path) -> None:
    # GIVEN a caller of the library that writes each environment on its own, without the list of all of them
    out = tmp_path / "k8s"
    dev, handover = load_all(GITOPS_CONFIG_DIR)
    write_manifests(out, [dev])
    result = write_manifests(out, [handover])
    # THEN the second write deletes nothing of the first
    assert result.deleted == ()
    assert (out / "dev" / "endpoints" / "llama-3-3-70b.k8s.yaml").is_file()
    # AND naming every environment that exists deletes the one that does not
    assert write_manifests(out, [handover], known=["handover"]).deleted[0].startswith("dev/")
    assert not (out / "dev").exists()


def test_switching_an_environment_back_to_cdk_removes_its_controller_directory(
        tmp_path: Path, gitops_dev: EnvironmentConfig) -> None:
    # GIVEN dev written while a controller delivers it
    out = tmp_path / "k8s"
    write_manifests(out, [gitops_dev])
    # WHEN it is switched back to cdk and written again
    write_manifests(out, [gitops_dev.model_copy(update={"delivery": DeliveryConfig()})])
    # THEN its directory is gone (its Application goes, the objects stay for CDK to adopt), only the review copy is left
    assert not (out / "dev").exists()
    assert _files(out) == {MARKER, "_cdk/dev/llama-3-3-70b.k8s.yaml"}
