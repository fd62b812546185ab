"""The ECR registries HyperPod nodes may pull from: this account's, AWS's registries of the platform's own pods in the
environment's Region, and the private registries the configured images name; no other account's repositories."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest

from hyperpod_dpd.catalogue.regions import HYPERPOD_REGIONS
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra.registries import (
    EKS_ADDON_REGISTRIES,
    HEALTH_AGENT_REGISTRIES,
    Registry,
    image_registry,
    node_registries,
    platform_registries,
)
from tests.iam_eval import Deployment, Request, evaluate, resolve

PULL = ("ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability")


def _pull_statement(synthesized: Any, env: str) -> dict[str, Any]:
    (policy,) = [v for k, v in synthesized.resources(env, "platform", "AWS::IAM::Policy").items()
                 if k.startswith("HyperPodNodePolicy")]
    (statement,) = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") == "PullImages"]
    return statement


@pytest.mark.parametrize(("env", "account", "region", "aws"), [
    ("dev", "111111111111", "us-west-2", {"602401143452", "905418368575", "861276088053", "763104351884"}),
    ("prod", "333333333333", "us-east-1", {"602401143452", "767398015722", "557690614651", "763104351884"}),
])
def test_the_nodes_pull_from_the_listed_registries_only(synthesized: Any, env: str, account: str, region: str,
                                                         aws: set[str]) -> None:
    # GIVEN the nodes' image-pull statement of the environment (its images are ECR Public and Docker Hub ones)
    statement = resolve(_pull_statement(synthesized, env), Deployment(account=account, region=region))
    # THEN it names exactly this account's registry and AWS's of the Region, plus the EFA device plugin's registry
    # (us-west-2 in every Region), all partition-aware in the template
    expected = {f"arn:aws:ecr:{region}:{a}:repository/*" for a in {account, *aws}}
    expected.add("arn:aws:ecr:us-west-2:602401143452:repository/*")
    assert set(statement["Resource"]) == expected
    assert all("AWS::Partition" in str(r) for r in _pull_statement(synthesized, env)["Resource"])
    # AND a pull is allowed from those and refused from another account or another Region's EKS registry
    documents = [{"Statement": [statement]}]
    for action in PULL:
        assert evaluate(documents, Request(action, f"arn:aws:ecr:{region}:{account}:repository/mirror/vllm")).allowed
        assert evaluate(documents, Request(
            action, "arn:aws:ecr:us-west-2:602401143452:repository/eks/aws-efa-k8s-device-plugin")).allowed
        assert not evaluate(documents, Request(action, f"arn:aws:ecr:{region}:999999999999:repository/vllm")).allowed
        assert not evaluate(documents, Request(action, "arn:aws:ecr:eu-west-3:602401143452:repository/x")).allowed


def test_every_hyperpod_region_has_its_platform_registries() -> None:
    # GIVEN every Region the configuration accepts
    for region in sorted(HYPERPOD_REGIONS):
        registries = platform_registries(region)
        # THEN its EKS add-on registry, the EFA device plugin's, and the health agent's (us-east-1's outside the
        # chart's map, as the chart itself falls back)
        assert Registry(region=region, account=EKS_ADDON_REGISTRIES[region]) in registries, region
        assert Registry(region="us-west-2", account="602401143452") in registries
        agent = region if region in HEALTH_AGENT_REGISTRIES else "us-east-1"
        assert Registry(region=agent, account=HEALTH_AGENT_REGISTRIES[agent]) in registries, region
    assert Registry(region="us-east-1", account="767398015722") in platform_registries("ap-northeast-2")
    assert Registry(region="ap-southeast-3", account="907027046896") in platform_registries("ap-southeast-3")  # DLC


@pytest.mark.parametrize(("image", "registry"), [
    ("763104351884.dkr.ecr.us-west-2.amazonaws.com/djl-inference:0.32.0", Registry(region="us-west-2",
                                                                                  account="763104351884")),
    ("123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com/vllm@sha256:0a1b", Registry(region="us-gov-west-1",
                                                                                         account="123456789012")),
    ("727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/pytorch:2", Registry(region="cn-north-1",
                                                                            account="727897471807")),
    ("public.ecr.aws/deep-learning-containers/vllm:server-hyperpod-cuda-v1.1", None),
    ("lmcache/vllm-openai:v0.4.3", None),
    ("evil.example.com/123456789012.dkr.ecr.us-west-2.amazonaws.com/x", None),
])
def test_an_image_names_its_private_registry(image: str, registry: Registry | None) -> None:
    assert image_registry(image) == registry


def test_a_configured_private_image_adds_its_registry_and_nothing_else() -> None:
    # GIVEN images of a private registry in another account and Region, of ECR Public and of Docker Hub
    found = node_registries(region="us-west-2", account="111111111111", images=[
        "222222222222.dkr.ecr.eu-central-1.amazonaws.com/vllm:1", "public.ecr.aws/x/y:1", "lmcache/vllm-openai:v0.4.3"])
    # THEN only the private one joins this account's and AWS's registries
    assert set(found) - set(platform_registries("us-west-2")) == {
        Registry(region="us-west-2", account="111111111111"), Registry(region="eu-central-1", account="222222222222")}


def test_a_region_without_a_catalogue_or_a_token_region_is_refused_with_one_line() -> None:
    with pytest.raises(ConfigError) as caught:
        platform_registries("mx-central-1")
    (line,) = str(caught.value).splitlines()
    assert line.startswith("region: 'mx-central-1': has no catalogue of AWS's image registries")
    with pytest.raises(ConfigError) as unresolved:
        node_registries(region=cdk.Aws.REGION, account="111111111111")
    assert "must be concrete" in str(unresolved.value)
