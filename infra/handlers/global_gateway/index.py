"""Custom::GlobalInferenceGateway: a SageMaker Global Inference Gateway, which has no CloudFormation type, created,
reconciled and deleted through aws-cdk-lib's custom-resource Provider framework (:func:`on_event` once per request,
then :func:`is_complete` until it answers ``IsComplete`` or the framework's total timeout ends).

Every call, field and value is SageMaker's in botocore 1.44.8 (``sagemaker`` service-2):

* ``CreateGlobalInferenceGateway`` (Name, Routing.Weights, ExecutionRoleArn, Gateways 1-10 of {Name, Namespace,
  ClusterArn}, ClientToken ``[a-zA-Z0-9-]{1,64}``, an idempotency token, Tags: TagList of 0-50 {Key, Value}) starts
  ``CREATING``; "call DescribeGlobalInferenceGateway until the status is ACTIVE or FAILED". ``ResourceInUse``: the name
  is taken, or a member already belongs to another gateway. The resource's ``Tags`` (the stack's and the CDK tags the
  construct carries, infra/global_gateway.py) are sent here, at create only: "The global inference gateway doesn't
  return tags in its responses", and a later change of tags is not applied to an existing gateway.
* ``Routing.Weights`` are ``GlobalInferenceGatewayRoutingWeight``, a ``float`` shape (0-1): they are compared within
  :data:`WEIGHT_TOLERANCE`, never with ``==``, so a weight read back in another representation (rounded to single
  precision, or the integer 1 for 1.0) is not "changed" again on every poll.
* ``UpdateGlobalInferenceGateway`` changes the routing only: "To add or remove in-cluster inference gateways, use
  AddInferenceGateway and RemoveInferenceGateway". Each of the three fails with ``ConflictException`` "while another
  operation is in progress", so :func:`is_complete` makes one change per poll, once the gateway is ``ACTIVE`` and no
  member is ``ADDING``/``REMOVING`` (``ListInferenceGateways``), adding before removing: "RemoveInferenceGateway can't
  remove the last one".
* ``ExecutionRoleArn``: "You can't change the role after you create the global inference gateway": a new role with the
  same name is refused; a new name is a new gateway (CloudFormation deletes the old one after the new one is ACTIVE).
* ``DeleteGlobalInferenceGateway`` is idempotent ("a Delete whose Identifier matches no global inference gateway
  succeeds"); the gateway is ``DELETING`` until ``DescribeGlobalInferenceGateway`` answers ``ResourceNotFound``.
* A member's ``ClusterArn`` (``arn:...:cluster/<12-char id>``) is resolved from its cluster name with
  ``DescribeCluster`` in the member's Region (the id is HyperPod's, not derivable from the name).

The physical id is the gateway's ARN. Runs on AWS Lambda with the runtime's boto3 and, through AWS_DATA_PATH, the SageMaker model
of the botocore the toolkit pins (infra/global_gateway.py, staged_handler); no print, the framework logs.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

ACTIVE, FAILED, DELETING = "ACTIVE", "FAILED", "DELETING"
BUSY_MEMBER = ("ADDING", "REMOVING")
ARN = re.compile(r"arn:aws[a-z\-]*:sagemaker:([a-z0-9\-]+):[0-9]{12}:global-inference-gateway/[a-z0-9]{12}")
TOKEN_LENGTH = 64  # GlobalInferenceGatewayClientToken: max 64, [a-zA-Z0-9-]+
MAX_MEMBERS = 10  # GlobalInferenceGatewayMembers: max 10 (AddInferenceGateway answers ResourceLimitExceeded past it)
# GlobalInferenceGatewayRoutingWeight is a "float" shape, min 0, max 1: Smithy's float, a single-precision IEEE-754
# number (https://smithy.io/2.0/spec/simple-types.html), which holds a weight in [0, 1] to within 2**-25 (3e-8) and may
# be answered as the integer 0 or 1 (JSON numbers). Two weights closer than this are one weight: above that rounding,
# far below any meant difference (the API accepts weights whose sum is within 0.001 of 1.0).
WEIGHT_TOLERANCE = 1e-6
# The properties the construct passes (infra/global_gateway.py) and the handler reads.
PROPERTIES = ("Name", "ExecutionRoleArn", "Members")

ClientFor = Callable[[str], Any]  # Region -> a SageMaker client there


class GatewayFailed(Exception):
    """The gateway or a member reached a state it will not leave, or the request cannot be met: fail the request."""


def client_token(event: Mapping[str, Any]) -> str:
    """Derived from CloudFormation's request, the logical resource and the gateway's name: a create retried after a
    timeout (the framework and Lambda retry the same event, with its RequestId) sends the same token, and SageMaker
    answers with the gateway it already made; a later create of the same resource (removed, then added again) is
    another request, with another token, so it never gets the deleted gateway's answer."""
    properties = event["ResourceProperties"]
    seed = "|".join((str(event["StackId"]), str(event["RequestId"]), str(event["LogicalResourceId"]),
                     str(properties["Name"])))
    return hashlib.sha256(seed.encode()).hexdigest()[:TOKEN_LENGTH]


def _properties(event: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = event.get("ResourceProperties") or {}
    missing = [name for name in PROPERTIES if not properties.get(name)]
    if missing:
        raise GatewayFailed(f"the resource lacks {', '.join(missing)}")
    return properties


def _routing(properties: Mapping[str, Any]) -> dict[str, Any] | None:
    weights = (properties.get("Routing") or {}).get("Weights") or {}
    return {"Weights": {k: float(v) for k, v in weights.items()}} if weights else None


def same_weight(have: Any, want: float) -> bool:
    """Whether the gateway's weight ``have`` (as DescribeGlobalInferenceGateway answers it; None when absent) is the
    wanted one, within :data:`WEIGHT_TOLERANCE`."""
    if isinstance(have, bool) or not isinstance(have, (int, float)):
        return False  # absent (or not a number): not the wanted weight, so the routing is sent
    return math.isclose(float(have), float(want), rel_tol=0.0, abs_tol=WEIGHT_TOLERANCE)


def _tags(properties: Mapping[str, Any]) -> list[dict[str, str]]:
    """``Tags`` of CreateGlobalInferenceGateway: the resource's, as CloudFormation passes them ({Key, Value})."""
    return [{"Key": str(tag["Key"]), "Value": str(tag["Value"])} for tag in properties.get("Tags") or ()]


def resolve_members(properties: Mapping[str, Any], client_for: ClientFor) -> list[dict[str, str]]:
    """``Gateways`` entries: each member's cluster ARN from ``DescribeCluster`` in its Region."""
    resolved = []
    for member in properties["Members"]:
        region, cluster = str(member["Region"]), str(member["ClusterName"])
        sagemaker = client_for(region)
        try:
            arn = sagemaker.describe_cluster(ClusterName=cluster)["ClusterArn"]
        except sagemaker.exceptions.ResourceNotFound as error:
            raise GatewayFailed(f"no HyperPod cluster {cluster} in {region}: deploy environment "
                                f"{member.get('Environment', '?')} before the global gateway") from error
        resolved.append({"Name": str(member["Name"]), "Namespace": str(member["Namespace"]), "ClusterArn": arn})
    return resolved


def _key(member: Mapping[str, Any]) -> tuple[str, str, str]:
    return str(member["ClusterArn"]), str(member["Namespace"]), str(member["Name"])


def on_event(event: Mapping[str, Any], context: Any = None, *, client_for: ClientFor | None = None) -> dict[str, Any]:
    """Create: ``CreateGlobalInferenceGateway`` with the members. Update: a new name creates a new gateway, a new role
    under the same name fails, anything else is reconciled by :func:`is_complete`. Delete: ``DeleteGlobalInference
    Gateway`` (idempotent), completed by :func:`is_complete`."""
    request = event["RequestType"]
    client_for = client_for or _client
    if request == "Delete":
        physical = str(event.get("PhysicalResourceId", ""))
        match = ARN.fullmatch(physical)
        if match:  # anything else: the create never made a gateway, nothing to delete
            _delete(client_for(match.group(1)), physical)
        return {"PhysicalResourceId": physical}
    properties = _properties(event)
    if request == "Update":
        old = event.get("OldResourceProperties") or {}
        if old.get("Name") == properties["Name"]:
            # Against the gateway itself, not OldResourceProperties: CloudFormation's rollback of a refused change sends
            # an Update back to the role the gateway has, which must succeed (else UPDATE_ROLLBACK_FAILED).
            physical = str(event["PhysicalResourceId"])
            match = ARN.fullmatch(physical)
            if match:
                sagemaker = client_for(match.group(1))
                role = sagemaker.describe_global_inference_gateway(Identifier=physical)["ExecutionRoleArn"]
                if role != properties["ExecutionRoleArn"]:
                    raise GatewayFailed(
                        f"the execution role of global inference gateway {properties['Name']} cannot change after it "
                        f"is created (SageMaker; it has {role}): delete the gateway's stack, then deploy it with the "
                        "new role (a new gateway cannot take members the old one still holds: ResourceInUse)")
            return {"PhysicalResourceId": physical}
    return {"PhysicalResourceId": _create(event, properties, client_for)}


def _create(event: Mapping[str, Any], properties: Mapping[str, Any], client_for: ClientFor) -> str:
    sagemaker = client_for(str(properties["Region"]))
    request: dict[str, Any] = {"Name": str(properties["Name"]), "ExecutionRoleArn": str(properties["ExecutionRoleArn"]),
                               "Gateways": resolve_members(properties, client_for), "ClientToken": client_token(event)}
    routing = _routing(properties)
    if routing:
        request["Routing"] = routing
    tags = _tags(properties)
    if tags:
        request["Tags"] = tags
    try:
        created = sagemaker.create_global_inference_gateway(**request)
    except sagemaker.exceptions.ResourceInUse as error:
        raise GatewayFailed(f"global inference gateway {properties['Name']} cannot be created: the name is taken in "
                            "this account and Region, or a member already belongs to another global gateway "
                            f"({_message(error)})") from error
    except sagemaker.exceptions.ResourceLimitExceeded as error:
        raise GatewayFailed(f"global inference gateway {properties['Name']}: the account's limit is reached "
                            f"({_message(error)}); run 'hpdpd preflight' for the quota") from error
    return str(created["Arn"])


def _delete(sagemaker: Any, physical: str) -> None:
    try:
        sagemaker.delete_global_inference_gateway(Identifier=physical)
    except sagemaker.exceptions.ConflictException:
        pass  # another operation is in progress: is_complete asks again


def is_complete(event: Mapping[str, Any], context: Any = None, *, client_for: ClientFor | None = None,
                ) -> dict[str, Any]:
    """One step towards the requested state per call; ``IsComplete`` once it holds."""
    client_for = client_for or _client
    physical = str(event.get("PhysicalResourceId", ""))
    match = ARN.fullmatch(physical)
    if event["RequestType"] == "Delete":
        return {"IsComplete": match is None or _deleted(client_for(match.group(1)), physical)}
    if match is None:
        raise GatewayFailed(f"the physical id {physical!r} is not a global inference gateway ARN")
    properties = _properties(event)
    sagemaker = client_for(match.group(1))
    try:
        described = sagemaker.describe_global_inference_gateway(Identifier=physical)
    except sagemaker.exceptions.ResourceNotFound as error:
        raise GatewayFailed(f"global inference gateway {physical} no longer exists: deleted outside this stack; "
                            "delete the resource's stack or give the gateway a new name") from error
    name, status = described["Name"], described["Status"]
    if status == FAILED:
        raise GatewayFailed(f"global inference gateway {name} is FAILED: "
                            f"{described.get('FailureReason') or 'no FailureReason'}")
    if status == DELETING:
        raise GatewayFailed(f"global inference gateway {name} is being deleted outside this stack")
    if status != ACTIVE:
        return {"IsComplete": False}
    current = _members(sagemaker, physical)
    wanted: list[dict[str, str]] | None = None
    failed = [m for m in current if m.get("Status") == FAILED]
    if failed:  # one the configuration still names fails the request; one it no longer names is removed below
        wanted = resolve_members(properties, client_for)
        failed = [m for m in failed if _key(m) in {_key(w) for w in wanted}]
    if failed:
        raise GatewayFailed("; ".join(f"member {m['Namespace']}/{m['Name']} of {m['ClusterArn']} is FAILED: "
                                      f"{m.get('FailureReason') or 'no FailureReason'}" for m in failed))
    if any(m.get("Status") in BUSY_MEMBER for m in current):
        return {"IsComplete": False}
    if wanted is None:
        wanted = resolve_members(properties, client_for)
    if not _step(sagemaker, physical, properties, described, current, wanted):
        return {"IsComplete": False}
    # Every attribute the stack reads is always there (Fn::GetAtt of a missing one fails the stack): the URL and the
    # PrivateLink service name "are set after the global inference gateway becomes ACTIVE".
    data = {"Arn": described["Arn"], "Id": described["Id"], "Name": name,
            "EndpointUrl": described.get("EndpointUrl", ""),
            "VpcEndpointServiceName": described.get("VpcEndpointServiceName", "")}
    return {"IsComplete": True, "Data": data}


def _step(sagemaker: Any, physical: str, properties: Mapping[str, Any], described: Mapping[str, Any],
          current: Sequence[Mapping[str, Any]], wanted: Sequence[Mapping[str, Any]]) -> bool:
    """Make the next change (routing, then one addition, then one removal) and answer False, or True when none is
    left. A ``ConflictException`` means SageMaker is busy: the next poll tries again."""
    routing = _routing(properties)
    weights = (described.get("Routing") or {}).get("Weights") or {}
    have = {_key(m) for m in current}
    want = {_key(m) for m in wanted}
    try:
        if routing and not all(same_weight(weights.get(k), v) for k, v in routing["Weights"].items()):
            sagemaker.update_global_inference_gateway(Identifier=physical, Routing=routing)
            return False
        additions = [m for m in wanted if _key(m) not in have]
        removals = [m for m in current if _key(m) not in want]
        # Add before removing (never zero members), unless the gateway is full: then make room first.
        if additions and (len(current) < MAX_MEMBERS or not removals):
            sagemaker.add_inference_gateway(Identifier=physical, **additions[0])
            return False
        if removals:
            summary = removals[0]
            sagemaker.remove_inference_gateway(Identifier=physical, ClusterArn=summary["ClusterArn"],
                                               Namespace=summary["Namespace"], Name=summary["Name"])
            return False
    except sagemaker.exceptions.ConflictException:
        return False
    except sagemaker.exceptions.ResourceInUse as error:
        raise GatewayFailed(f"a member already belongs to another global inference gateway ({_message(error)})") \
            from error
    except sagemaker.exceptions.ResourceLimitExceeded as error:
        raise GatewayFailed(f"global inference gateway {described['Name']} cannot take another member "
                            f"({_message(error)})") from error
    return True


def _members(sagemaker: Any, physical: str) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = []
    token = None
    while True:
        page = sagemaker.list_inference_gateways(Identifier=physical, **({"NextToken": token} if token else {}))
        found.extend(page["InferenceGatewaySummaries"])
        token = page.get("NextToken")
        if not token:
            return found


def _deleted(sagemaker: Any, physical: str) -> bool:
    try:
        described = sagemaker.describe_global_inference_gateway(Identifier=physical)
    except sagemaker.exceptions.ResourceNotFound:
        return True
    if described["Status"] != DELETING:  # the first Delete met a conflict: ask again
        _delete(sagemaker, physical)
    return False


def _message(error: Exception) -> str:
    response = getattr(error, "response", {}) or {}
    return str((response.get("Error") or {}).get("Message") or error)


def _client(region: str) -> Any:
    """SageMaker in ``region``, retrying throttling the standard way (a raised error fails the request)."""
    import boto3  # the Lambda runtime's copy
    from botocore.config import Config

    client = boto3.client("sagemaker", region_name=region,
                          config=Config(retries={"mode": "standard", "max_attempts": 10}))
    require_api(client)
    return client


def require_api(client: Any) -> None:
    """A Lambda runtime whose boto3 predates the Global Inference Gateway cannot call it: say so at once."""
    missing = [o for o in ("CreateGlobalInferenceGateway", "AddInferenceGateway", "ListInferenceGateways")
               if o not in client.meta.service_model.operation_names]
    if missing:
        import botocore

        raise GatewayFailed(f"botocore {botocore.__version__} of this Lambda runtime does not know "
                            f"{', '.join(missing)}; use a runtime with a newer boto3")
