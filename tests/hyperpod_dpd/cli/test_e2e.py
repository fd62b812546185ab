"""End to end: the installed ``hpdpd`` console script against moto's server (``AWS_ENDPOINT_URL``, fake credentials).

moto's server models STS, EC2, S3, SageMaker HyperPod and EKS clusters, so those rows PASS or FAIL on real
answers; it lacks EKS add-ons and SageMaker Service Quotas (and does not return the EKS authentication mode), so
those rows must be WARN and name what they could not read.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from tests.hyperpod_dpd.aws_faults import refusing_port
from tests.hyperpod_dpd.moto_clusters import MOTO_ACCOUNT, REGION, create_hyperpod_cluster

ROOT = Path(__file__).resolve().parents[3]
HPDPD = ROOT / ".venv" / "bin" / "hpdpd"
ACCOUNT = MOTO_ACCOUNT


@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    previous = os.environ.get("MOTO_EC2_LOAD_DEFAULT_AMIS")
    os.environ["MOTO_EC2_LOAD_DEFAULT_AMIS"] = "false"  # read when the EC2 backend starts, in this process
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    # moto keeps one state per process: clusters another module's server created (hpdpd-dev too) would make this
    # module's CreateCluster fail, so the module starts from moto's empty state: ThreadedMotoServer and mock_aws share
    # one state (getmoto/moto docs/docs/server_mode.rst), which POST /moto-api/reset empties (moto 5.2.5,
    # moto/moto_api/_internal/urls.py: "{0}/moto-api/reset": reset_response)
    urllib.request.urlopen(urllib.request.Request(f"http://{host}:{port}/moto-api/reset", method="POST"), timeout=30)
    yield f"http://{host}:{port}"
    server.stop()
    if previous is None:
        os.environ.pop("MOTO_EC2_LOAD_DEFAULT_AMIS", None)
    else:
        os.environ["MOTO_EC2_LOAD_DEFAULT_AMIS"] = previous


@pytest.fixture(scope="module")
def deployed(moto_server: str, tmp_path_factory: pytest.TempPathFactory,
             base_configs: dict[str, dict[str, Any]]) -> Path:
    """A VPC, a model bucket, a HyperPod cluster and an EKS cluster in moto; dev.yaml adopting them."""
    session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    ec2, s3, sagemaker, eks = (session.client(s, endpoint_url=moto_server) for s in ("ec2", "s3", "sagemaker", "eks"))
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    subnet = {cidr: ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone)["Subnet"]["SubnetId"]
              for cidr, zone in (("10.1.0.0/24", "us-west-2a"), ("10.1.1.0/24", "us-west-2a"),
                                 ("10.1.2.0/24", "us-west-2b"))}
    s3.create_bucket(Bucket="hpdpd-e2e-models", CreateBucketConfiguration={"LocationConstraint": REGION})
    groups = [("system", "ml.m5.2xlarge", 2), ("prefill", "ml.p5.48xlarge", 1), ("decode", "ml.p5.48xlarge", 1)]
    create_hyperpod_cluster(sagemaker, groups, account=ACCOUNT, subnet=subnet["10.1.0.0/24"])
    eks.create_cluster(name="hpdpd-dev", version="1.35", roleArn=f"arn:aws:iam::{ACCOUNT}:role/eks",
                       resourcesVpcConfig={"subnetIds": [subnet["10.1.1.0/24"], subnet["10.1.2.0/24"]]})

    data = json.loads(json.dumps(base_configs["dev"]))
    data["account"] = ACCOUNT
    data.pop("endpoints", None)
    data["hyperpod"]["instance_groups"][0]["instance_type"] = "ml.m5.2xlarge"  # moto's CreateCluster lacks m7i
    data["network"] = {"gpu_availability_zone": "us-west-2a", "existing": {
        "vpc_id": vpc, "cidr": "10.1.0.0/16",
        "private_subnets": [{"subnet_id": subnet["10.1.1.0/24"], "availability_zone": "us-west-2a"},
                            {"subnet_id": subnet["10.1.2.0/24"], "availability_zone": "us-west-2b"}],
        "gpu_subnet": {"subnet_id": subnet["10.1.0.0/24"], "availability_zone": "us-west-2a"}}}
    data["operator"] = {"model_buckets": [{"name": "hpdpd-e2e-models"}, {"name": "hpdpd-e2e-other"}]}
    config_dir = tmp_path_factory.mktemp("e2e") / "config"
    config_dir.mkdir()
    (config_dir / "dev.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return config_dir


@pytest.fixture(scope="module")
def hpdpd(moto_server: str, deployed: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Any]:
    home = tmp_path_factory.mktemp("home")
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "AWS_ENDPOINT_URL": moto_server,
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_CONFIG_FILE": str(home / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(home / "none")}

    def run(*args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(HPDPD), *args, "--config-dir", str(deployed)], env={**env, **(extra_env or {})},
                              capture_output=True, text=True, timeout=60, check=False)

    return run


@pytest.mark.skipif(not HPDPD.exists(), reason="the project's console script is not installed")
def test_preflight_against_moto_server(hpdpd: Callable[..., Any]) -> None:
    # WHEN the installed command checks the environment through moto's server
    done = hpdpd("preflight", "--env", "dev", "--output", "json")
    data = json.loads(done.stdout)
    status = {c["name"]: c["status"] for c in data["checks"]}
    detail = {c["name"]: c["detail"] for c in data["checks"]}
    # THEN what moto models passes or fails on its answers ...
    assert status["credentials"] == "pass" and ACCOUNT in detail["credentials"]
    assert status["offering:ml.p5.48xlarge"] == status["offering:ml.m5.2xlarge"] == "pass"
    assert status["subnet-ips"] == "pass" and "already runs every configured node" in detail["subnet-ips"]
    assert status["eks-version"] == "pass"
    assert status["model-bucket:hpdpd-e2e-models"] == "pass"
    assert status["model-bucket:hpdpd-e2e-other"] == "fail"
    assert status["hyperpod-cluster"] == "pass" and "InService" in detail["hyperpod-cluster"]
    # ... and what it lacks is a WARN that says what could not be read
    assert status["quota:ml.p5.48xlarge"] == status["quota:ml.m5.2xlarge"] == "warn"
    assert "ListServiceQuotas" in detail["quota:ml.p5.48xlarge"]
    addon_rows = [n for n in status if n.startswith("addon:")]
    assert len(addon_rows) == 9 and all(status[n] == "warn" for n in addon_rows)
    assert "DescribeAddonVersions" in detail["addon:amazon-sagemaker-hyperpod-inference"]
    assert status["eks-authentication-mode"] == "warn"
    # AND the missing model bucket makes the run fail with exit code 1, without a trace
    assert data["ok"] is False and done.returncode == 1
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(not HPDPD.exists(), reason="the project's console script is not installed")
def test_status_and_wait_against_moto_server(hpdpd: Callable[..., Any]) -> None:
    # WHEN the installed command reads the status through moto's server
    status = hpdpd("status", "--env", "dev", "--output", "json")
    data = json.loads(status.stdout)
    # THEN what moto models is read ...
    assert data["cluster"]["status"] == "InService" and data["cluster"]["reason"] is None
    assert {"name": "decode", "instance_type": "ml.p5.48xlarge", "current": 1, "target": 1} in \
        data["cluster"]["instance_groups"]
    assert len(data["cluster"]["nodes"]) == 4
    assert data["eks_cluster"] == {"name": "hpdpd-dev", "status": "ACTIVE", "version": "1.35", "reason": None}
    # ... and the add-ons, which moto's server cannot list, are Unknown (not "not installed") with the reason
    assert data["addons"] and {a["status"] for a in data["addons"]} == {"Unknown"}
    assert data["addons"][0]["reason"].startswith("ListAddons: 404")
    assert data["warnings"][0].startswith("add-ons: could not read (ListAddons: 404")
    assert status.returncode == 1  # unreadable add-ons: not known to be healthy

    wait = hpdpd("wait", "--for", "cluster", "--env", "dev", "--timeout", "30", "--output", "json")
    assert wait.returncode == 0 and json.loads(wait.stdout)["outcome"] == "ready"


@pytest.mark.skipif(not HPDPD.exists(), reason="the project's console script is not installed")
def test_an_unreachable_aws_is_unknown_not_absent(hpdpd: Callable[..., Any]) -> None:
    # GIVEN AWS_ENDPOINT_URL points at a local port that refuses connections (one attempt per call)
    with refusing_port() as port:
        offline = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_MAX_ATTEMPTS": "1"}
        # WHEN the installed command reads the status, and waits for the cluster
        status = hpdpd("status", "--env", "dev", "--output", "json", extra_env=offline)
        wait = hpdpd("wait", "--for", "cluster", "--env", "dev", "--timeout", "1", "--interval", "0.1",
                     "--output", "json", extra_env=offline)
    data = json.loads(status.stdout)
    # THEN both clusters and the add-ons are Unknown with the connection problem, and status exits 1
    assert status.returncode == 1 and "Traceback" not in status.stderr
    for part in (data["cluster"], data["eks_cluster"]):
        assert part["status"] == "Unknown"
        assert part["reason"].startswith("cannot reach AWS: Could not connect to the endpoint URL: "
                                         f'"http://127.0.0.1:{port}/')
    assert {a["status"] for a in data["addons"]} == {"Unknown"}
    # AND the wait kept polling and timed out on the unknown state, never taking it for "not created yet"
    result = json.loads(wait.stdout)
    assert wait.returncode == 1 and result["outcome"] == "timeout" and result["polls"] >= 2
    assert result["state"].startswith("Unknown (cannot reach AWS") and "NotFound" not in wait.stderr


@pytest.mark.skipif(not HPDPD.exists(), reason="the project's console script is not installed")
def test_bad_input_is_one_line_with_a_nonzero_exit(hpdpd: Callable[..., Any]) -> None:
    unknown = hpdpd("preflight", "--env", "nope")
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert unknown.stderr.count("\n") == 1 and "no such environment file" in unknown.stderr

    no_credentials = hpdpd("status", "--env", "dev", extra_env={"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""})
    assert no_credentials.returncode == 2
    assert no_credentials.stderr.startswith("hpdpd: error: no AWS credentials found") and \
        no_credentials.stderr.count("\n") == 1
