"""The kubectl layer of the cluster's Kubernetes version is checked when the configuration loads, at the key the user
wrote: ``eks.version``, or ``eks.existing.version`` for an adopted cluster."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.catalogue.versions import EKS_VERSIONS, KUBECTL_LAYERS
from hyperpod_dpd.config import EnvironmentConfig, parse_environment
from hyperpod_dpd.config.eks_existing import kubectl_layer_problem
from hyperpod_dpd.errors import ConfigError

LAYER_33 = KUBECTL_LAYERS["1.33"][0]
OIDC_ARN = "arn:aws:iam::111111111111:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF"
EXISTING: dict[str, Any] = {
    "cluster_name": "shared", "version": "1.33", "oidc_provider_arn": OIDC_ARN,
    "kubectl_role_arn": "arn:aws:iam::111111111111:role/eks-kubectl",
    "cluster_security_group_id": "sg-0123456789abcdef0", "network_policy_enforced": True}


def _parse(base_configs: dict[str, dict[str, Any]], mutate: Callable[[dict[str, Any]], None]) -> EnvironmentConfig:
    data = copy.deepcopy(base_configs["dev"])
    mutate(data)
    return parse_environment(data, name="dev", source="dev.yaml", base_dir=Path.cwd())


@pytest.fixture
def without_layer_33(monkeypatch: pytest.MonkeyPatch) -> None:
    """GIVEN a Python whose import system cannot import the 1.33 layer: ``None`` in ``sys.modules`` makes ``import``
    raise ModuleNotFoundError (Python reference, "The module cache"), as an environment without the package does."""
    monkeypatch.setitem(sys.modules, LAYER_33, None)
    with pytest.raises(ModuleNotFoundError):
        __import__(LAYER_33)


def test_every_layer_of_this_venv_is_found_without_importing_the_cdk() -> None:
    # GIVEN a fresh interpreter (nothing of the CDK imported yet)
    script = ("import sys\nfrom hyperpod_dpd.config.eks_existing import kubectl_layer_problem\n"
              f"print([kubectl_layer_problem(v) for v in {list(EKS_VERSIONS)!r}])\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'jsii')))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    problems, imported = done.stdout.splitlines()
    # THEN every version's layer, installed in the project's venv, is found, and neither aws_cdk nor jsii was loaded
    # (loading a configuration starts no Node process)
    assert problems == repr([None] * len(EKS_VERSIONS))
    assert imported == "[]"


def test_a_missing_layer_is_refused_at_eks_version(base_configs, without_layer_33) -> None:
    # WHEN dev, which creates its cluster, asks for 1.33
    with pytest.raises(ConfigError) as raised:
        _parse(base_configs, lambda d: d["eks"].__setitem__("version", "1.33"))
    # THEN one line names the key written, the value and what to install
    assert str(raised.value) == (
        "dev.yaml: eks.version: '1.33': needs the kubectl layer package aws-cdk.lambda-layer-kubectl-v33 (module "
        "aws_cdk.lambda_layer_kubectl_v33), which this Python environment lacks: pip install 'hyperpod-dpd[kubectl-v33]'")


def test_an_adopted_clusters_missing_layer_is_refused_at_eks_existing_version(base_configs, without_layer_33) -> None:
    # WHEN dev adopts a 1.33 cluster, writing the version only under existing
    with pytest.raises(ConfigError) as raised:
        _parse(base_configs, lambda d: d.__setitem__("eks", {"existing": dict(EXISTING)}))
    # THEN the one line names eks.existing.version, the key the user wrote, and eks.version nowhere
    (line,) = str(raised.value).splitlines()
    assert line.startswith("dev.yaml: eks.existing.version: '1.33': needs the kubectl layer package "
                           "aws-cdk.lambda-layer-kubectl-v33"), line
    assert "eks.version" not in line


def test_an_installed_layer_is_accepted(base_configs) -> None:
    # GIVEN the project's venv, which has every layer; WHEN dev asks for 1.33 and another environment adopts 1.33
    created = _parse(base_configs, lambda d: d["eks"].__setitem__("version", "1.33"))
    adopted = _parse(base_configs, lambda d: d.__setitem__("eks", {"existing": dict(EXISTING)}))
    # THEN both load
    assert created.eks.version == adopted.eks.version == "1.33"
    assert kubectl_layer_problem("1.33") is None
