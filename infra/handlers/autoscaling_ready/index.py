"""Custom-resource handlers that complete once a HyperPod cluster and its autoscaling are both ``InService``.

AWS: "The HyperPod cluster must have AutoScaling enabled and the AutoScaling status must change to ``InService``
before the ``HyperpodNodeClass`` can be applied" (SageMaker developer guide, "Create a NodeClass"); CloudFormation's
``AWS::SageMaker::Cluster`` completes on ``ClusterStatus`` alone (its read-only properties hold no autoscaling
status: cfn-lint 1.58 schema of the type). The aws-cdk-lib Provider framework calls :func:`on_event` once per
CloudFormation request, then :func:`is_complete` until it returns ``IsComplete`` or the framework's total timeout ends.

The fields and values read here are those of SageMaker's ``DescribeCluster`` in botocore 1.44.8
(``botocore/data/sagemaker/2017-07-24/service-2.json``, shapes ``DescribeClusterResponse``, ``ClusterStatus`` and
``ClusterAutoScalingConfigOutput``; the same in the API reference, "ClusterAutoScalingConfigOutput"):

* ``ClusterStatus``: Creating | Deleting | Failed | InService | RollingBack | SystemUpdating | Updating (required);
* ``FailureMessage``: a string, set when the cluster failed;
* ``AutoScaling``: ``Mode`` (Enable | Disable, required), ``AutoScalerType`` (Karpenter), ``Status`` (InService |
  Failed | Creating | Deleting, required) and ``FailureMessage`` ("If the autoscaling status is Failed").

Anything else (a status this model does not list, autoscaling absent or disabled while it should be enabled) is not
ready: the waiter keeps polling, so a Karpenter manifest is never applied on a guess. Each poll that is not ready
prints one line of what DescribeCluster showed (the function's log group). The framework's own timeout answers
CloudFormation with a bare "Operation timed out"; so :func:`on_event` stamps the request with its start
(:data:`STARTED`, which the framework merges into every ``is_complete`` event: aws-cdk-lib 2.275
``custom-resources/lib/provider-framework/runtime/framework.js``, ``createResponseEvent`` and the waiter's input), and
``is_complete`` fails the request itself once :data:`GIVE_UP_ENV` seconds have passed, with the last state it saw.
A failure reaches CloudFormation as the exception's message (the same framework.js, ``invokeUserFunction``: the
function's ``errorMessage`` and its log group, no stack trace). Runs on AWS Lambda with the runtime's boto3.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

IN_SERVICE = "InService"
FAILED = "Failed"
DELETING = "Deleting"
ENABLE = "Enable"
CLUSTER_PROPERTY = "ClusterArn"  # the custom resource's property naming the cluster (name or ARN both work)
STARTED = "WaitStartedAt"  # epoch seconds of the request, from on_event's answer (the framework passes it on)
GIVE_UP_ENV = "GIVE_UP_AFTER_SECONDS"  # set by infra/autoscaling_ready.py, shorter than the framework's total timeout


class NotReady(Exception):
    """The cluster or its autoscaling reached a state it will not leave by itself: fail the CloudFormation request."""


def readiness(described: Mapping[str, Any]) -> bool:
    """Whether a ``DescribeCluster`` response shows the cluster and its autoscaling both ``InService``.

    Raises :class:`NotReady` with HyperPod's own failure message when either failed, or when the cluster is being
    deleted (it will never become ready)."""
    name = described.get("ClusterName") or described.get("ClusterArn") or "the cluster"
    status = described.get("ClusterStatus")
    if status == FAILED:
        raise NotReady(f"HyperPod cluster {name} is Failed: {described.get('FailureMessage') or 'no FailureMessage'}")
    if status == DELETING:
        raise NotReady(f"HyperPod cluster {name} is Deleting; its autoscaling will never become InService")
    autoscaling = described.get("AutoScaling") or {}
    if autoscaling.get("Status") == FAILED:
        raise NotReady(f"autoscaling of HyperPod cluster {name} is Failed: "
                       f"{autoscaling.get('FailureMessage') or 'no FailureMessage'}")
    return status == IN_SERVICE and autoscaling.get("Mode") == ENABLE and autoscaling.get("Status") == IN_SERVICE


def observed(described: Mapping[str, Any]) -> str:
    """What a DescribeCluster answer shows of the two statuses, in one line."""
    autoscaling = described.get("AutoScaling")
    scaling = (f"AutoScaling Mode {autoscaling.get('Mode') or '-'}, Status {autoscaling.get('Status') or '-'}"
               if autoscaling else "no AutoScaling")
    return f"ClusterStatus {described.get('ClusterStatus') or '-'}, {scaling}"


def _client() -> Any:
    """SageMaker in the function's Region, retrying throttling the standard way (a raised error fails the request)."""
    import boto3  # the Lambda runtime's copy
    from botocore.config import Config

    return boto3.client("sagemaker", config=Config(retries={"mode": "standard", "max_attempts": 10}))


def _require_autoscaling_field(client: Any) -> None:
    """An SDK whose model predates ``DescribeCluster.AutoScaling`` would drop the field, and the waiter would wait for
    nothing until its timeout: say so at once instead."""
    shape = client.meta.service_model.operation_model("DescribeCluster").output_shape
    if "AutoScaling" not in shape.members:
        import botocore

        raise NotReady(f"botocore {botocore.__version__} of this Lambda runtime does not know DescribeCluster's "
                       "AutoScaling field; use a runtime with a newer boto3")


def on_event(event: Mapping[str, Any], context: Any = None, *, now: Callable[[], float] = time.time) -> dict[str, Any]:
    """Create/Update: the physical id is the cluster ARN (a new cluster is a new waiter), and the request's start.
    Delete: nothing to do."""
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    return {"PhysicalResourceId": str(event["ResourceProperties"][CLUSTER_PROPERTY]), STARTED: int(now())}


def is_complete(event: Mapping[str, Any], context: Any = None, *, client: Any = None,
                now: Callable[[], float] = time.time) -> dict[str, Any]:
    """``{"IsComplete": True}`` once :func:`readiness` holds; a deletion completes at once. Past :data:`GIVE_UP_ENV`
    seconds after :data:`STARTED`, a cluster still not ready fails the request with what it last showed."""
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    client = client if client is not None else _client()
    _require_autoscaling_field(client)
    described = client.describe_cluster(ClusterName=str(event["ResourceProperties"][CLUSTER_PROPERTY]))
    if readiness(described):
        return {"IsComplete": True}
    state = observed(described)
    name = described.get("ClusterName") or described.get("ClusterArn") or "the cluster"
    print(f"HyperPod cluster {name} not ready yet: {state}")  # one line in the function's log group
    limit, started = float(os.environ.get(GIVE_UP_ENV) or 0), event.get(STARTED)
    if limit > 0 and isinstance(started, (int, float)) and now() - started >= limit:
        raise NotReady(f"HyperPod cluster {name} and its autoscaling are not both InService after "
                       f"{(now() - started) / 60:.0f} minutes; DescribeCluster last showed {state}")
    return {"IsComplete": False}
