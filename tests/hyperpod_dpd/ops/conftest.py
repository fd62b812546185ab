"""Fixtures of the operations tests: fake credentials, moto, typed environments and HyperPod clusters in moto.

moto models STS, EC2 (instance types, offerings, subnets), S3, SageMaker HyperPod clusters and EKS clusters;
EKS add-ons and Service Quotas for SageMaker are stubbed with botocore's Stubber (moto 5.2.5 does not implement them).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.config import EnvironmentConfig, parse_environment
from tests.hyperpod_dpd.moto_clusters import MOTO_ACCOUNT, REGION, create_hyperpod_cluster

ROOT = Path(__file__).resolve().parents[3]

ROLE = f"arn:aws:iam::{MOTO_ACCOUNT}:role/hyperpod-nodes"
# moto's CreateCluster validates instance types against an older enum without m7i; the system group uses m5 there.
MOTO_INSTANCE_TYPE = {"ml.m7i.2xlarge": "ml.m5.2xlarge"}


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Fake credentials only; no profile, config file or endpoint from the machine leaks in."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_MAX_ATTEMPTS",
                 "AWS_RETRY_MODE", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")  # the AMI catalogue costs ~0.2 s per EC2 backend


@pytest.fixture
def moto(aws_credentials: None) -> Iterator[None]:
    from moto import mock_aws

    with mock_aws():
        yield


@pytest.fixture
def clients(moto: None) -> ClientFactory:
    return ClientFactory(region=REGION)


@pytest.fixture
def make_env(base_configs: dict[str, dict[str, Any]]) -> Callable[..., EnvironmentConfig]:
    """A typed copy of config/dev.yaml for moto's account, without endpoints or operator settings, optionally mutated."""

    def make(mutate: Callable[[dict[str, Any]], None] | None = None) -> EnvironmentConfig:
        data = copy.deepcopy(base_configs["dev"])
        data["account"] = MOTO_ACCOUNT
        data.pop("endpoints", None)  # endpoint tests pass their own doubles
        data["operator"] = {}  # operator defaults: tests state the buckets and add-ons they rely on
        if mutate:
            mutate(data)
        return parse_environment(data, name="dev", source="dev.yaml", base_dir=ROOT)

    return make


@pytest.fixture
def env(make_env: Callable[..., EnvironmentConfig]) -> EnvironmentConfig:
    return make_env()


def _create_hyperpod(sagemaker: Any, env: EnvironmentConfig, *, subnet: str = "subnet-12345678") -> None:
    """The environment's HyperPod cluster in moto."""
    create_hyperpod_cluster(
        sagemaker, [(g.name, MOTO_INSTANCE_TYPE.get(g.instance_type, g.instance_type), g.count)
                    for g in env.hyperpod.instance_groups],
        name=env.hyperpod.cluster_name, eks_cluster=env.eks.cluster_name, subnet=subnet)


def _create_eks(eks: Any, env: EnvironmentConfig, *, version: str | None = None) -> None:
    eks.create_cluster(name=env.eks.cluster_name, version=version or env.eks.version,
                       roleArn=f"arn:aws:iam::{MOTO_ACCOUNT}:role/eks", resourcesVpcConfig={"subnetIds": []})


@pytest.fixture
def create_hyperpod(moto: None) -> Callable[..., None]:
    return _create_hyperpod


@pytest.fixture
def create_eks(moto: None) -> Callable[..., None]:
    return _create_eks


# ---- endpoint doubles (the attributes the operations code reads) -----------------------------------------------


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str = ""
    region: str | None = None


@dataclass(frozen=True)
class Model:
    name: str = "Llama-3.3-70B-Instruct"
    s3: S3Location | None = None


@dataclass(frozen=True)
class Routing:
    threshold: int = 4096


@dataclass(frozen=True)
class Endpoint:
    name: str = "llama"
    namespace: str = "default"
    sagemaker_endpoint_name: str | None = None
    routing: Routing = field(default_factory=Routing)
    model: Model = field(default_factory=Model)
    invocation_path: str = "v1/chat/completions"
    resource_name: str = ""  # the IEC name; a double without a generation is named as the endpoint

    def __post_init__(self) -> None:
        if not self.resource_name:
            object.__setattr__(self, "resource_name", self.name)

    @property
    def rendered_sagemaker_endpoint_name(self) -> str | None:
        # as EndpointConfig renders it for a generation (fixed names aside): <base>-<generation>
        generation = self.resource_name.rsplit("-", 1)[-1] if self.resource_name != self.name else "000000"
        return f"{self.sagemaker_endpoint_name}-{generation}" if self.sagemaker_endpoint_name else None


@pytest.fixture
def make_endpoint() -> Callable[..., Endpoint]:
    """An endpoint double: ``bucket``/``prefix``/``model_region`` make ``model.s3``; ``resource_name`` a generation."""

    def make(*, name: str = "llama", bucket: str | None = None, prefix: str = "", model_region: str | None = None,
             threshold: int = 4096, resource_name: str | None = None, **fields: Any) -> Endpoint:
        model = Model(s3=S3Location(bucket=bucket, prefix=prefix, region=model_region) if bucket else None)
        return Endpoint(name=name, model=model, routing=Routing(threshold=threshold), resource_name=resource_name or "",
                        **fields)

    return make


@pytest.fixture
def fake_kube(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A fake Kubernetes API server (tests/fakes/kube_api.py) and ``kube()``: a client of it through a kubeconfig."""
    from hyperpod_dpd.ops.kube import Kube
    from tests.fakes.kube_api import serve

    monkeypatch.delenv("KUBECONFIG", raising=False)
    with serve() as fake:
        fake.client = lambda timeout=5.0: Kube(kubeconfig=fake.kubeconfig(tmp_path / "kubeconfig"),
                                               timeout_seconds=timeout)
        yield fake
