"""``hyperpod.dependencies_chart``: the chart is pinned by the digest of what was mirrored or checked out, not by the
version upstream never changes; every way of getting that wrong is one line naming the field."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.dependencies_chart import DIRECTORY_DIGEST_HOW, directory_digest, ecr_chart
from hyperpod_dpd.errors import ConfigError

WriteConfig = Callable[..., Path]
FIELD = "hyperpod.dependencies_chart"


def _chart_source(**source: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        data["hyperpod"]["dependencies_chart"] = source
    return mutate


def _refused(config_dir: Path) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", config_dir)
    return str(raised.value).splitlines()


def _chart_tree(root: Path) -> Path:
    """A chart directory as 'helm dependency update' leaves it: sources and fetched sub-chart archives."""
    (root / "templates").mkdir(parents=True)
    (root / "charts").mkdir()
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: hyperpod-helm-chart\nversion: 0.1.0\n")
    (root / "values.yaml").write_text("global: {}\n")
    (root / "templates" / "a b.yaml").write_text("kind: ConfigMap\n")  # a space in a name
    (root / "templates" / "Z.yaml").write_text("kind: Secret\n")  # upper case sorts before lower case in C order
    (root / "charts" / "nvidia-device-plugin-0.16.1.tgz").write_bytes(bytes(range(256)))
    return root


def test_a_mirror_without_its_digest_is_refused(write_config: WriteConfig) -> None:
    # GIVEN the ECR mirror but no digest of what was pushed there
    lines = _refused(write_config(_chart_source(repository="oci://111111111111.dkr.ecr.us-west-2.amazonaws.com/x")))
    # THEN one line says the digest is required and where it comes from
    (line,) = [line for line in lines if f"{FIELD}.digest" in line]
    assert f"{FIELD}.digest: missing: required with 'repository': the 'Digest: sha256:...' that 'helm push'" in line


def test_a_registry_other_than_ecr_is_refused(write_config: WriteConfig) -> None:
    # GIVEN an OCI registry whose digest the deploy cannot ask ECR about
    lines = _refused(write_config(_chart_source(repository="oci://registry.example.com/charts",
                                                digest="sha256:" + "0" * 64)))
    # THEN it is refused, naming what is allowed
    assert any(f"{FIELD}.repository: 'oci://registry.example.com/charts': must be an ECR private registry" in line
               for line in lines)


@pytest.mark.parametrize("digest", ["sha256:" + "A" * 64, "sha256:abc", "0" * 64, "sha512:" + "0" * 128])
def test_a_digest_that_is_no_sha256_digest_is_refused(write_config: WriteConfig, digest: str) -> None:
    lines = _refused(write_config(_chart_source(repository="oci://111111111111.dkr.ecr.us-west-2.amazonaws.com/x",
                                                digest=digest)))
    assert any(f"{FIELD}.digest" in line and "should match pattern" in line for line in lines)


def test_a_local_chart_is_accepted_only_with_the_digest_of_what_is_there(write_config: WriteConfig,
                                                                         tmp_path: Path) -> None:
    chart = _chart_tree(tmp_path / "vendor" / "chart")
    found = directory_digest(chart)
    # WHEN no digest is recorded THEN the line gives the directory's digest, to record after review
    (line,) = [line for line in _refused(write_config(_chart_source(local_path=str(chart)))) if FIELD in line]
    assert f"{FIELD}.digest: missing: required with 'local_path'" in line and found in line
    # WHEN the recorded digest is the directory's THEN the environment loads
    loaded = load_environment("dev", write_config(_chart_source(local_path=str(chart), digest=found)))
    assert loaded.hyperpod.dependencies_chart.digest == found
    # WHEN a file changes afterwards THEN the recorded digest no longer matches, and both are named
    (chart / "values.yaml").write_text("global: {changed: true}\n")
    (line,) = [line for line in _refused(write_config(_chart_source(local_path=str(chart), digest=found)))
               if FIELD in line]
    assert f"{FIELD}.digest: '{found}'" in line and directory_digest(chart) in line and "changed" in line


def test_a_symlink_in_a_local_chart_is_refused(write_config: WriteConfig, tmp_path: Path) -> None:
    # GIVEN a chart directory with a symlink (whose target the digest would not cover as the asset copies it)
    chart = _chart_tree(tmp_path / "chart")
    (chart / "templates" / "link.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    # THEN the directory is refused, naming the link
    (line,) = [line for line in _refused(write_config(_chart_source(local_path=str(chart), digest="sha256:" + "0" * 64)))
               if FIELD in line]
    assert f"{FIELD}.local_path" in line and "./templates/link.yaml is a symlink" in line


@pytest.mark.skipif(not all(shutil.which(tool) for tool in ("find", "sort", "xargs", "sha256sum")),
                    reason="coreutils and findutils are not on PATH")
def test_the_directory_digest_is_the_one_coreutils_compute(tmp_path: Path) -> None:
    # GIVEN a chart tree WHEN the documented pipeline runs over it (DIRECTORY_DIGEST_HOW, the docs' command)
    chart = _chart_tree(tmp_path / "chart")
    pipeline = DIRECTORY_DIGEST_HOW.split(": ", 1)[1].removeprefix("cd <dir> && ")
    printed = subprocess.run(["bash", "-c", pipeline], cwd=chart, capture_output=True, text=True, check=True, timeout=60)
    # THEN it prints the digest the configuration check computes
    assert f"sha256:{printed.stdout.split()[0]}" == directory_digest(chart)


@pytest.mark.parametrize(("repository", "reference"), [
    ("oci://111111111111.dkr.ecr.us-west-2.amazonaws.com/hyperpod-dpd",
     "oci://111111111111.dkr.ecr.us-west-2.amazonaws.com/hyperpod-dpd/hyperpod-helm-chart"),
    ("oci://111111111111.dkr.ecr.us-west-2.amazonaws.com",
     "oci://111111111111.dkr.ecr.us-west-2.amazonaws.com/hyperpod-helm-chart"),
    ("oci://111111111111.dkr.ecr.cn-north-1.amazonaws.com.cn/a/b-c",
     "oci://111111111111.dkr.ecr.cn-north-1.amazonaws.com.cn/a/b-c/hyperpod-helm-chart"),
])
def test_the_chart_is_where_helm_push_put_it(repository: str, reference: str) -> None:
    # GIVEN 'helm push hyperpod-helm-chart-0.1.0.tgz <repository>' THEN the chart's repository is <path>/<chart name>
    chart = ecr_chart(repository)
    assert chart is not None and chart.reference == reference
    assert chart.repository_name == reference.split(".com/", 1)[-1].split(".cn/", 1)[-1]


@pytest.mark.parametrize("repository", ["oci://public.ecr.aws/x", "oci://111111111111.dkr.ecr.us-west-2.amazonaws.com/UP",
                                        "oci://1111.dkr.ecr.us-west-2.amazonaws.com/x", "oci://localhost:5000/x"])
def test_anything_else_is_no_ecr_chart(repository: str) -> None:
    assert ecr_chart(repository) is None
