"""Creating a HyperPod cluster in moto, the one way every operations test needs it.

moto's quirks: ``ThreadsPerCore`` must be given (it raises after storing the cluster otherwise), lifecycle URIs must
start with ``s3://sagemaker``, and ``ml.m7i`` types are unknown to it (system groups use ``ml.m5.2xlarge``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MOTO_ACCOUNT = "123456789012"
REGION = "us-west-2"


def create_hyperpod_cluster(sagemaker: Any, groups: Sequence[tuple[str, str, int]], *, name: str = "hpdpd-dev",
                            eks_cluster: str = "hpdpd-dev", account: str = MOTO_ACCOUNT, region: str = REGION,
                            subnet: str = "subnet-12345678", role: str = "hyperpod-nodes") -> None:
    """``groups`` as (name, instance type, count)."""
    sagemaker.create_cluster(
        ClusterName=name,
        InstanceGroups=[{"InstanceGroupName": group, "InstanceType": type_, "InstanceCount": count, "ThreadsPerCore": 1,
                         "ExecutionRole": f"arn:aws:iam::{account}:role/{role}",
                         "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle/scripts/", "OnCreate": "on_create.sh"}}
                        for group, type_, count in groups],
        Orchestrator={"Eks": {"ClusterArn": f"arn:aws:eks:{region}:{account}:cluster/{eks_cluster}"}},
        VpcConfig={"SecurityGroupIds": ["sg-12345678"], "Subnets": [subnet]})
