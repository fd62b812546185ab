"""The bad-input matrix: invalid configurations across every section, each rejected before synthesis with one
line naming the file, the exact field path, the value and what is allowed; plus a property-based test that random
mutations of valid configs are either accepted or rejected with the toolkit's own error, never anything else."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_dpd.config import load_environment, parse_environment
from hyperpod_dpd.errors import ConfigError
from tests.examples import examples

Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    """Set a dotted path (list indices as numbers) in the config data."""
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        if last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value
    return mutate


def _drop(path: str) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        del node[last]
    return mutate


def _both(*mutations: Mutation) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        for m in mutations:
            m(data)
    return mutate


G = "hyperpod.instance_groups"
E = "endpoints.0"
NAME_64 = "a-" * 31 + "ab"  # 64 characters: 32 hyphenated parts, each one repetition of (-*[a-zA-Z0-9])


def _autoscaled(index: int, **bounds: Any) -> Mutation:
    """Cluster autoscaling on, and group ``index`` sized by Karpenter (count 0) within ``bounds``."""
    return _both(_set("hyperpod.autoscaling", {"enabled": True}), _set(f"{G}.{index}.count", 0),
                 _set(f"{G}.{index}.autoscaling", {"max_nodes": 1, **bounds}))


def _scaling(minimum: int, maximum: int) -> dict[str, Any]:
    """An endpoint role's KEDA autoscaling with a Prometheus trigger."""
    return {"min_replicas": minimum, "max_replicas": maximum, "prometheus": {"query": "q", "target_value": 1}}


def _second_endpoint(data: dict[str, Any]) -> None:
    data["endpoints"].append({**copy.deepcopy(data["endpoints"][0]), "name": "second", "namespace": "team-b"})
# case: (mutation of dev.yaml, field path in the message, value as printed, words of what is allowed)
MATRIX: dict[str, tuple[Mutation, str, str, str]] = {
    # -- top level --------------------------------------------------------------------------------------------------
    "unknown top-level key": (_set("acount", "1"), "acount", "'acount'", "unknown key; allowed keys here: account, region"),
    "account too short": (_set("account", "12345678901"), "account", "'12345678901'", "12-digit AWS account id"),
    "account with letters": (_set("account", "11111111111a"), "account", "'11111111111a'", "12-digit AWS account id"),
    "account missing": (_drop("account"), "account", "missing", "is required"),
    "region malformed": (_set("region", "uswest2"), "region", "'uswest2'", "AWS Region code such as 'us-west-2'"),
    "region without HyperPod": (_set("region", "af-south-1"), "region", "'af-south-1'", "is not available there; allowed"),
    "removal policy unknown": (_set("removal_policy", "snapshot"), "removal_policy", "'snapshot'", "'retain' or 'destroy'"),
    "production not a bool": (_set("production", "sometimes"), "production", "'sometimes'", "valid boolean"),
    "tag key reserved": (_set("tags", {"aws:owner": "x"}), "tags.aws:owner", "'x'", "must not start with 'aws:'"),
    # -- network ------------------------------------------------------------------------------------------------------
    "both create and existing": (_set("network.existing", {
        "vpc_id": "vpc-0123456789abcdef0", "cidr": "10.0.0.0/16", "gpu_subnet": {"subnet_id": "subnet-0123456789abcdef0",
                                                                               "availability_zone": "us-west-2a"},
        "private_subnets": [{"subnet_id": "subnet-0aaaaaaaaaaaaaaaa", "availability_zone": "us-west-2a"},
                            {"subnet_id": "subnet-0bbbbbbbbbbbbbbbb", "availability_zone": "us-west-2b"}]}), "network", "{",
                                 "set exactly one of 'create'"),
    "VPC CIDR malformed": (_set("network.create.cidr", "10.192.0.0/33"), "network.create.cidr", "'10.192.0.0/33'",
                           "IPv4 CIDR block"),
    "GPU CIDR overlaps the VPC": (_set("network.create.gpu_subnet_cidr", "10.192.128.0/17"), "network.create.gpu_subnet_cidr",
                                  "'10.192.128.0/17'", "must not overlap the VPC CIDR 10.192.0.0/16"),
    "GPU CIDR too large": (_set("network.create.gpu_subnet_cidr", "172.16.0.0/12"), "network.create.gpu_subnet_cidr",
                           "'172.16.0.0/12'", "between /16 and /24"),
    "one AZ only": (_set("network.create.availability_zones", ["us-west-2a"]), "network.create.availability_zones",
                    "['us-west-2a']", "at least 2 items"),
    "AZ of another region": (_set("network.create.availability_zones", ["us-west-2a", "us-east-1b"]),
                             "network.create.availability_zones[1]", "'us-east-1b'", "must be an AZ of region us-west-2"),
    "more NAT gateways than AZs": (_set("network.create.nat_gateways", 3), "network.create.nat_gateways", "3",
                                   "at most the number of AZs (2)"),
    "GPU AZ outside the VPC": (_set("network.gpu_availability_zone", "us-west-2c"), "network.gpu_availability_zone",
                               "'us-west-2c'", "must be one of network.create.availability_zones"),
    "subnet mask out of range": (_set("network.create.private_subnet_mask", 30), "network.create.private_subnet_mask",
                                 "30", "less than or equal to 28"),
    # -- eks ----------------------------------------------------------------------------------------------------------
    "EKS version out of range": (_set("eks.version", "1.36"), "eks.version", "'1.36'", "must be one of 1.30"),
    "EKS version as a number": (_set("eks.version", 1.35), "eks.version", "1.35", "must be a quoted string"),
    "endpoint access unknown": (_set("eks.endpoint_access", "public"), "eks.endpoint_access", "'public'",
                                "'public_and_private' or 'private'"),
    "EKS cluster name starting with a hyphen": (_set("eks.cluster_name", "-hpdpd"), "eks.cluster_name", "'-hpdpd'",
                                                "an EKS cluster name: 1-100 letters, digits, hyphens and underscores"),
    "admin principal not an ARN": (_set("eks.admin_principals", ["PlatformAdmin"]), "eks.admin_principals[0]",
                                   "'PlatformAdmin'", "IAM role or user ARN"),
    "unknown log type": (_set("eks.logging", ["api", "kubelet"]), "eks.logging[1]", "'kubelet'", "'api', 'audit'"),
    "vpc-cni below the HyperPod minimum": (_set("eks.addon_versions", {"vpc-cni": "v1.18.0-eksbuild.1"}),
                                           "eks.addon_versions.vpc-cni", "'v1.18.0-eksbuild.1'", "below the minimum HyperPod needs (v1.18.3"),
    "unknown core add-on": (_set("eks.addon_versions", {"calico": "v1.0.0"}), "eks.addon_versions.calico", "'calico'",
                            "is not a core add-on; allowed: vpc-cni"),
    "system nodes desired above max": (_set("eks.system_node_group", {"desired_size": 5, "max_size": 3}),
                                       "eks.system_node_group.desired_size", "5", "between min_size (2) and max_size (3)"),
    # -- hyperpod -----------------------------------------------------------------------------------------------------
    "group role unknown": (_set(f"{G}.1.role", "encode"), f"{G}[1].role", "'encode'", "'prefill', 'decode' or 'system'"),
    "prefill on a CPU type": (_set(f"{G}.1.instance_type", "ml.m5.4xlarge"), f"{G}[1].instance_type", "'ml.m5.4xlarge'",
                              "needs a DPD-capable EFA GPU type"),
    "system group on a GPU type": (_set(f"{G}.0.instance_type", "ml.p5.48xlarge"), f"{G}[0].instance_type",
                                   "'ml.p5.48xlarge'", "a system group takes an x86_64 CPU type"),
    "count below zero": (_set(f"{G}.2.count", -1), f"{G}[2].count", "-1", "greater than or equal to 0"),
    "minimum above count": (_set(f"{G}.1.min_count", 5), f"{G}[1].min_count", "5", "must not exceed count (1)"),
    "EBS volume too large": (_set(f"{G}.1.ebs_volume_gb", 20000), f"{G}[1].ebs_volume_gb", "20000", "less than or equal to 16384"),
    "deep health checks on a CPU group": (_set(f"{G}.0.deep_health_checks", ["InstanceStress"]), f"{G}[0].deep_health_checks",
                                          "['InstanceStress']", "deep health checks run only on GPU instances"),
    "unknown deep health check": (_set(f"{G}.1.deep_health_checks", ["MultiNodeTrainingValidation"]),
                                  f"{G}[1].deep_health_checks[0]", "'MultiNodeTrainingValidation'", "'InstanceStress'"),
    "taint effect unknown": (_set(f"{G}.1.taints", [{"key": "pool", "effect": "Evict"}]), f"{G}[1].taints[0].effect",
                             "'Evict'", "'NoSchedule', 'PreferNoSchedule' or 'NoExecute'"),
    "label reserved by the toolkit": (_set(f"{G}.1.labels", {"hyperpod-dpd/role": "x"}), f"{G}[1].labels",
                                      "", "is set by hyperpod-dpd from the group's role and name"),
    "GPU groups in two AZs": (_set(f"{G}.2.availability_zone", "us-west-2b"), f"{G}[2].availability_zone", "'us-west-2b'",
                              "GPU groups must share one AZ for EFA KV transfer"),
    "duplicate group name": (_set(f"{G}.2.name", "prefill"), f"{G}[2].name", "'prefill'", "duplicate instance group name"),
    "no decode group": (_both(_set(f"{G}.2.role", "prefill"), _drop("endpoints")), G,
                        "['system', 'prefill', 'decode']", "needs at least one 'decode' group"),
    "training plan ARN malformed": (_set(f"{G}.1.training_plan_arn", "plan-1"), f"{G}[1].training_plan_arn", "'plan-1'",
                                    "should match pattern"),
    "capacity-block type without a training plan": (
        _both(_set(f"{G}.1.instance_type", "ml.p5e.48xlarge"), _drop("endpoints")),
        f"{G}[1].training_plan_arn", "missing", "is not offered on demand in us-west-2; set a training plan ARN"),
    "chart repository not OCI": (_set("hyperpod.dependencies_chart.repository", "https://example.com/charts"),
                                 "hyperpod.dependencies_chart.repository", "'https://example.com/charts'", "should match pattern"),
    "chart local path missing": (_both(_drop("hyperpod.dependencies_chart.repository"),
                                       _set("hyperpod.dependencies_chart.local_path", "vendor/no-chart")),
                                 "hyperpod.dependencies_chart.local_path", "'vendor/no-chart'", "containing Chart.yaml"),
    "lifecycle bucket without the sagemaker prefix": (_set("hyperpod.lifecycle_bucket_name", "hpdpd-scripts"),
                                                      "hyperpod.lifecycle_bucket_name", "'hpdpd-scripts'", "starting with 'sagemaker-'"),
    "node recovery unknown": (_set("hyperpod.node_recovery", "Manual"), "hyperpod.node_recovery", "'Manual'",
                              "'Automatic' or 'None'"),
    # -- operator -----------------------------------------------------------------------------------------------------
    "operator below 3.2 with a DPD endpoint": (_set("operator.version", "3.1.3"), "operator.version", "'3.1.3'",
                                               "need inference operator 3.2 or newer"),
    "prerequisite below its minimum": (_set("operator.prerequisite_versions", {"metrics-server": "v0.7.0-eksbuild.1"}),
                                       "operator.prerequisite_versions.metrics-server", "'v0.7.0-eksbuild.1'",
                                       "below the minimum the inference operator needs (v0.7.2-eksbuild.4)"),
    "TLS bucket name breaks the rule": (_set("operator.tls_bucket_name", "certs-bucket"), "operator.tls_bucket_name",
                                        "'certs-bucket'", "must start with 'hyperpod-tls-'"),
    "execution role without the prefix": (_set("operator.execution_role_name", "InferenceRole"),
                                          "operator.execution_role_name", "'InferenceRole'", "must start with 'SageMakerHyperPodInference'"),
    "model bucket in another region": (_set("operator.model_buckets", [{"name": "weights", "region": "eu-west-1"}]),
                                       "operator.model_buckets[0].region", "'eu-west-1'", "must be the cluster's Region"),
    # -- endpoints ----------------------------------------------------------------------------------------------------
    "threshold below zero": (_set(f"{E}.routing.threshold", -1), "endpoints[0].routing.threshold", "-1", "must be 0"),
    "routing strategy unknown": (_set(f"{E}.routing.strategy", "random"), "endpoints[0].routing.strategy", "'random'",
                                 "'prefixaware', 'kvaware', 'session' or 'roundrobin'"),
    "two decoders": (_both(_set(f"{E}.decode.replicas", 2), _set(f"{G}.2.count", 2)), "endpoints[0].decode.replicas", "2",
                     "supports 1 decoder per endpoint today"),
    "tensor parallel size not dividing the GPUs": (_set(f"{E}.tensor_parallel_size", 3), "endpoints[0].tensor_parallel_size",
                                                   "3", "must divide the 8 GPUs of ml.p5.48xlarge"),
    "tensor parallel size above the GPUs": (_set(f"{E}.tensor_parallel_size", 16), "endpoints[0].tensor_parallel_size",
                                            "16", "exceeds the 8 GPUs"),
    "endpoint instance type not DPD-capable": (_set(f"{E}.instance_type", "ml.g6e.48xlarge"), "endpoints[0].instance_type",
                                               "'ml.g6e.48xlarge'", "ml.p5.48xlarge"),
    "endpoint name with capitals": (_set(f"{E}.name", "Llama70B"), "endpoints[0].name", "'Llama70B'", ""),
    "endpoint on a missing instance group": (_set(f"{E}.prefill.instance_group", "gpu"), "endpoints[0].prefill.instance_group",
                                             "'gpu'", "is not an instance group"),
    # on an image that states the versions kvaware needs: the path alone is wrong (test_known_bad.py: the versions)
    "kvaware on the chat API": (_both(_set(f"{E}.routing.strategy", "kvaware"), _set(f"{E}.invocation_path", "v1/chat/completions"),
                                      _set(f"{E}.image", "123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm-dpd:0.19.1"),
                                      _set(f"{E}.image_versions", {"vllm": "0.19.1", "lmcache": "0.4.3"})),
                                "endpoints[0].invocation_path", "'v1/chat/completions'", "supports only the completions API"),
    "hash seed overridden": (_set(f"{E}.environment", {"PYTHONHASHSEED": "1"}), "endpoints[0].environment.PYTHONHASHSEED",
                             "'1'", "'0'"),
    "model bucket of an endpoint in another region": (_set(f"{E}.model.s3.region", "eu-west-1"),
                                                      "endpoints[0].model.s3.region", "'eu-west-1'", "must be the cluster's Region"),
    # -- booleans, quoted numbers and decimals where a number is expected (YAML reads yes/no/on/off as booleans too) ----
    "count as a boolean": (_set(f"{G}.1.count", True), f"{G}[1].count", "true", "must be a whole number, not a boolean"),
    "count as a quoted number": (_set(f"{G}.1.count", "1"), f"{G}[1].count", "'1'", "must be a whole number, not a string"),
    "count with a decimal point": (_set(f"{G}.1.count", 1.0), f"{G}[1].count", "1.0", "must be a whole number (no decimal"),
    "EBS size as a boolean": (_set(f"{G}.1.ebs_volume_gb", True), f"{G}[1].ebs_volume_gb", "true", "not a boolean"),
    "threads per core as a boolean": (_set(f"{G}.1.threads_per_core", True), f"{G}[1].threads_per_core", "true",
                                      "must be a whole number, not a boolean"),
    "minimum count as a boolean": (_set(f"{G}.1.min_count", False), f"{G}[1].min_count", "false", "not a boolean"),
    "NAT gateways as a boolean": (_set("network.create.nat_gateways", True), "network.create.nat_gateways", "true",
                                  "not a boolean"),
    "system node group size as a boolean": (_set("eks.system_node_group", {"min_size": True}),
                                            "eks.system_node_group.min_size", "true", "not a boolean"),
    "replicas as a boolean": (_set(f"{E}.prefill.replicas", True), "endpoints[0].prefill.replicas", "true",
                              "must be a whole number, not a boolean"),
    "max unavailable as a boolean": (_set(f"{E}.decode.max_unavailable", True), "endpoints[0].decode.max_unavailable",
                                     "true", "not a boolean"),
    "routing threshold as a boolean": (_set(f"{E}.routing.threshold", False), "endpoints[0].routing.threshold", "false",
                                       "not a boolean"),
    "overflow status code as a boolean": (_set(f"{E}.request_limits", {"overflow_status_code": True}),
                                          "endpoints[0].request_limits.overflow_status_code", "true", "not a boolean"),
    "GPU memory utilization as a boolean": (_set(f"{E}.gpu_memory_utilization", True),
                                            "endpoints[0].gpu_memory_utilization", "true",
                                            "must be a number, not a boolean"),
    # -- names longer than their limit, hyphens included ----------------------------------------------------------------
    "instance group name of 64 characters with hyphens": (
        _set(f"{G}.1.name", NAME_64), f"{G}[1].name", f"'{NAME_64}'",
        "has 64 characters; must be a HyperPod instance group name: 1-63 letters, digits and hyphens"),
    "HyperPod cluster name of 64 characters with hyphens": (
        _set("hyperpod.cluster_name", NAME_64), "hyperpod.cluster_name", f"'{NAME_64}'",
        "has 64 characters; must be a HyperPod cluster name: 1-63"),
    "EKS cluster name of 101 characters": (_set("eks.cluster_name", "a-" * 50 + "b"), "eks.cluster_name", "'a-a-",
                                           "has 101 characters; must be an EKS cluster name: 1-100"),
    "SageMaker endpoint name of 64 characters with hyphens": (
        _set(f"{E}.sagemaker_endpoint_name", NAME_64), "endpoints[0].sagemaker_endpoint_name", f"'{NAME_64}'",
        "has 64 characters; must be a SageMaker endpoint name: 1-63"),
    "endpoint's instance group of 64 characters": (
        _set(f"{E}.prefill.instance_group", NAME_64), "endpoints[0].prefill.instance_group", f"'{NAME_64}'",
        "has 64 characters; must be a HyperPod instance group name"),
    "namespace of 64 characters": (_set(f"{E}.namespace", "n" * 64), "endpoints[0].namespace", "'nnnn",
                                   "has 64 characters; must be a Kubernetes namespace: 1-63"),
    "lifecycle bucket name of 64 characters": (
        _set("hyperpod.lifecycle_bucket_name", "sagemaker-" + "b" * 54), "hyperpod.lifecycle_bucket_name",
        "'sagemaker-bbbb", "has 64 characters; must be a valid S3 bucket name: 3-63"),
    "model bucket with a suffix S3 reserves": (_set("operator.model_buckets", [{"name": "weights--x-s3"}]),
                                               "operator.model_buckets[0].name", "'weights--x-s3'",
                                               "S3 reserves names with '--x-s3'"),
    "group label value of 64 characters": (_set(f"{G}.1.labels", {"team": "t" * 64}), f"{G}[1].labels",
                                           "{'team': 'tttt", "must be at most 63"),
    "taint value of 64 characters": (_set(f"{G}.1.taints", [{"key": "pool", "value": "v" * 64}]),
                                     f"{G}[1].taints[0].value", "'vvvv", "must be a Kubernetes taint value"),
    "TLS Secret name of 254 characters": (
        _set(f"{E}.router", {"ingress": {"host": "llm.example.com", "class_name": "nginx", "tls_secret_name": "s" * 254}}),
        "endpoints[0].router.ingress.tls_secret_name", "'ssss", "has 254 characters; must be a Kubernetes object name"),
    "admin role name of 65 characters": (_set("eks.admin_principals", ["arn:aws:iam::111111111111:role/" + "r" * 65]),
                                         "eks.admin_principals[0]", "'arn:aws:iam::111111111111:role/rrrr",
                                         "names of at most 64 characters"),
    # -- a missing key is 'missing', a null value is 'null' ---------------------------------------------------------------
    "HyperPod cluster name missing": (_drop("hyperpod.cluster_name"), "hyperpod.cluster_name", "missing", "is required"),
    "HyperPod cluster name null": (_set("hyperpod.cluster_name", None), "hyperpod.cluster_name", "null",
                                   "valid string"),
    "group count missing": (_drop(f"{G}.1.count"), f"{G}[1].count", "missing", "is required"),
    # -- account ids YAML read as numbers ---------------------------------------------------------------------------------
    "account as a number": (_set("account", 111111111111), "account", "111111111111",
                            'must be a 12-digit string; quote it in YAML ("111111111111")'),
    "account that lost its leading zero": (_set("account", 12345678901), "account", "12345678901",
                                           'must be a 12-digit string; quote it in YAML ("012345678901")'),
    # -- an unknown instance type lists the types of the group's role -----------------------------------------------------
    "prefill group on an unknown type": (
        _set(f"{G}.1.instance_type", "ml.p4d.24xlarge"), f"{G}[1].instance_type", "'ml.p4d.24xlarge'",
        "a prefill group needs a DPD-capable EFA GPU type; allowed: ml.p5.48xlarge, ml.p5e.48xlarge, "
        "ml.p5en.48xlarge, ml.p6-b200.48xlarge, ml.p6-b300.48xlarge"),
    "system group on an unknown type": (_set(f"{G}.0.instance_type", "ml.t3.medium"), f"{G}[0].instance_type",
                                        "'ml.t3.medium'", "a system group takes an x86_64 CPU type; allowed: ml.m5.large"),
    "instance type without the ml. prefix": (_set(f"{G}.2.instance_type", "p5.48xlarge"), f"{G}[2].instance_type",
                                             "'p5.48xlarge'", "(did you mean 'ml.p5.48xlarge'?)"),
    # -- parked groups (count 0) ------------------------------------------------------------------------------------------
    "system group parked": (_set(f"{G}.0.count", 0), f"{G}[0].count", "0", "a system group must keep at least 1 node"),
    "endpoint on a parked decode group": (_set(f"{G}.2.count", 0), "endpoints[0].decode.replicas", "1",
                                          "needs 1 node of instance group 'decode', which is parked (count 0)"),
    "endpoint placed by role on parked prefill groups": (
        _both(_set(f"{G}.1.count", 0), _drop(f"{E}.prefill.instance_group")), "endpoints[0].prefill.replicas", "1",
        "needs nodes of a prefill group, but every prefill instance group is parked (count 0): 'prefill'"),
    "minimum above a parked count": (_both(_set(f"{G}.2.count", 0), _set(f"{G}.2.min_count", 1)),
                                     f"{G}[2].min_count", "1", "must not exceed count (0)"),
    # -- capacity-aware scaling (HyperPod autoscaling, endpoint capacity, prefill:decode ratio) ---------------------------
    "autoscaled group bounds reversed": (_autoscaled(1, min_nodes=3, max_nodes=2), f"{G}[1].autoscaling.max_nodes", "2",
                                         "must be at least min_nodes (3)"),
    "autoscaled group keeps instances": (_both(_autoscaled(1, max_nodes=2), _set(f"{G}.1.count", 1)), f"{G}[1].count",
                                         "1", "must be 0 for an autoscaled group"),
    "autoscaling on the system group": (_both(_set("hyperpod.autoscaling", {"enabled": True}),
                                              _set(f"{G}.0.autoscaling", {"max_nodes": 3})), f"{G}[0].autoscaling",
                                        "{", "the system group keeps a fixed count"),
    "autoscaled group without cluster autoscaling": (_both(_set(f"{G}.1.count", 0), _set(f"{G}.1.autoscaling", {"max_nodes": 2})),
                                                      f"{G}[1].autoscaling", "{",
                                                      "needs hyperpod.autoscaling.enabled: true"),
    "autoscaled group with deep health checks": (_both(_autoscaled(1), _set(f"{G}.1.deep_health_checks", ["InstanceStress"])),
                                                 f"{G}[1].deep_health_checks", "['InstanceStress']",
                                                 "cannot run deep health checks"),
    "autoscaling without continuous provisioning": (_both(_autoscaled(1), _set("hyperpod.node_provisioning_mode", None)),
                                                    "hyperpod.node_provisioning_mode", "null", "must be 'Continuous'"),
    "endpoint maximum beyond the group's maximum nodes": (
        _both(_autoscaled(1, max_nodes=1), _set(f"{E}.prefill.autoscaling", _scaling(1, 2))),
        "endpoints[0].prefill.autoscaling.max_replicas", "2",
        "needs 2 nodes at its maximum (2 x 8 = 16 GPUs, 1 pod(s) per node), but instance group 'prefill' has "
        "autoscaling.max_nodes 1 (8 GPUs)"),
    "endpoints sharing an autoscaled group beyond its maximum": (
        _both(_autoscaled(1, max_nodes=1), _second_endpoint), f"{G}[1].autoscaling.max_nodes", "1",
        "holds 8 GPUs (1 x 8), but the endpoints' maximum replicas on instance group 'prefill' need 16"),
    "autoscaled floor the endpoints do not hold": (_autoscaled(1, min_nodes=2, max_nodes=3), f"{G}[1].autoscaling.min_nodes",
                                                   "2", "the endpoints' minimum replicas on instance group 'prefill' "
                                                        "occupy 1 node(s)"),
    "prefill per decode above the default ratio": (_both(_set(f"{G}.1.count", 5), _set(f"{E}.prefill.replicas", 5)),
                                                   "endpoints[0].prefill.replicas", "5",
                                                   "5 prefill per 1 decode (ratio 5) is outside the default ratio"),
    "ratio bounds reversed": (_set(f"{E}.ratio", {"min": 3, "max": 2}), "endpoints[0].ratio.max", "2",
                              "must be at least min (3)"),
    "prefill per decode above the ratio at the maximum": (
        _both(_set(f"{E}.ratio", {"min": 1, "max": 2}), _set(f"{G}.1.count", 3), _set(f"{E}.prefill.autoscaling", _scaling(1, 3))),
        "endpoints[0].prefill.autoscaling.max_replicas", "3",
        "at the maximum replicas, 3 prefill per 1 decode (ratio 3) is outside ratio: 1 to 2 prefill per decode"),
    "prefill kept while decode scales to zero": (_set(f"{E}.decode.autoscaling", _scaling(0, 1)),
                                                 "endpoints[0].decode.autoscaling.min_replicas", "0",
                                                 "1 prefill run with 0 decode replicas"),
}


def _load(write_config: Callable[..., Path], mutate: Mutation) -> str:
    config_dir = write_config(mutate)
    with pytest.raises(ConfigError) as raised:
        load_environment("dev", config_dir)
    return str(raised.value)


def test_the_matrix_covers_every_section_with_at_least_40_cases() -> None:
    paths = {path.split(".")[0].split("[")[0] for _, path, _, _ in MATRIX.values()}
    assert len(MATRIX) >= 40
    assert {"account", "region", "network", "eks", "hyperpod", "operator", "endpoints", "tags"} <= paths


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_bad_input_is_one_line_with_file_path_value_and_rule(case: str, write_config: Callable[..., Path]) -> None:
    mutate, path, value, allowed = MATRIX[case]
    message = _load(write_config, mutate)
    assert len(message.splitlines()) == 1, message
    prefix, _, rest = message.partition(f"dev.yaml: {path}: ")
    assert prefix.endswith("/config/") or prefix == "config/", message
    assert rest.startswith(value), message
    assert allowed in rest, message


# -- property-based: random mutations never escape as anything but the toolkit's error -----------------------------

VALUES = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True), st.text(max_size=20),
                   st.lists(st.text(max_size=5), max_size=3), st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2))


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


@pytest.fixture(scope="module")
def dev_data(base_configs: dict[str, Any]) -> dict[str, Any]:
    return base_configs["dev"]


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_mutations_are_accepted_or_rejected_with_the_toolkits_error(dev_data: dict[str, Any], data: st.DataObject) -> None:
    config = copy.deepcopy(dev_data)
    paths = _paths(config)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        node: Any = config
        try:
            for part in path[:-1]:
                node = node[part]
        except (IndexError, KeyError, TypeError):
            continue  # an earlier mutation removed or replaced this branch
        action = data.draw(st.sampled_from(["set", "delete", "add"]))
        if action == "delete" and isinstance(node, dict):
            node.pop(path[-1], None)
        elif action == "add" and isinstance(node, dict):
            node[data.draw(st.text(min_size=1, max_size=8))] = data.draw(VALUES)
        else:
            try:
                node[path[-1]] = data.draw(VALUES)
            except (IndexError, KeyError, TypeError):
                continue
    try:
        parse_environment(yaml.safe_load(yaml.safe_dump(config)), name="dev", source="config/dev.yaml",
                          base_dir=Path(__file__).resolve().parents[3])
    except ConfigError as error:
        assert all(line.startswith("config/dev.yaml: ") for line in str(error).splitlines())
