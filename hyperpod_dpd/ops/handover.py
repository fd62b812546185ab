"""Preflight's handover check: an environment switched to ``delivery.endpoints: gitops`` must not delete the live
objects CDK applied.

Why: in gitops mode no stack holds a ``KubernetesManifest`` for the endpoints, the operations RBAC or the Karpenter
node classes and pools (docs/gitops.md). A manifest that leaves a template is deleted by CloudFormation, and the
deletion of aws-cdk-lib's ``Custom::AWSCDK-EKS-KubernetesResource`` runs ``kubectl delete -f`` on its objects
(aws-cdk-lib 2.275.0, custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/apply/__init__.py, the ``Delete``
request) unless the resource has ``DeletionPolicy: Retain``, which also holds for a resource removed by a stack
update (AWS CloudFormation User Guide, "DeletionPolicy attribute"). ``delivery.handover: true`` deploys every such
manifest with Retain first (hyperpod_dpd.infra.platform.hand_over).

Row ``handover:<stack>`` (only for an environment with ``delivery.endpoints: gitops``), per deployed stack of the
environment that can hold such manifests (the platform and endpoints stacks), from CloudFormation ``GetTemplate``
(``TemplateStage`` ``Original``; ``TemplateBody`` is the template as deployed: botocore 1.44.8 ``cloudformation``
service model): PASS when every ``Custom::AWSCDK-EKS-KubernetesResource`` of the deployed template is retained (or the
stack does not exist yet: nothing to delete); FAIL naming the manifests that the gitops deploy would delete, with the
handover step as the fix. In gitops mode the toolkit's stacks apply no ``KubernetesManifest`` at all, so after the
first gitops deploy the row passes by itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.aws import error_code, error_message
from hyperpod_dpd.config.identity import MANIFEST_STACK_PARTS, stack_name
from hyperpod_dpd.ops.checks import Check, failed, passed, warned

if TYPE_CHECKING:
    from hyperpod_dpd.config import EnvironmentConfig

# aws-cdk-lib 2.275.0 aws-eks-v2/lib/k8s-manifest.js: KubernetesManifest.RESOURCE_TYPE
MANIFEST_TYPE = "Custom::AWSCDK-EKS-KubernetesResource"
PERMISSION = "cloudformation:GetTemplate"
STACK_PARTS = MANIFEST_STACK_PARTS
SHOWN = 4  # manifests named in the row; the count says how many more


def handover_checks(env: EnvironmentConfig, cloudformation: Any) -> Iterator[Check]:
    """One ``handover:<stack>`` row per stack of a gitops environment (nothing in cdk mode). AWS errors propagate
    (preflight's ``guarded`` turns them into WARN rows naming the permission)."""
    if not env.delivery.gitops:
        return
    for part in STACK_PARTS:
        name = stack_name(env, part)
        row = f"handover:{name}"
        try:
            template = _deployed_template(cloudformation, name)
        except ValueError as exc:  # never a pass on what could not be read
            yield warned(row, f"could not check: {exc}", fix=f"aws cloudformation get-template --stack-name {name}")
            continue
        if template is None:
            yield passed(row, f"{name} is not deployed: a gitops deploy deletes nothing of it")
            continue
        deleted = sorted(logical for logical, resource in _resources(template).items()
                         if resource.get("Type") == MANIFEST_TYPE and resource.get("DeletionPolicy") != "Retain")
        if not deleted:
            yield passed(row, f"{name} applies no Kubernetes manifest that a gitops deploy would delete")
            continue
        more = f" and {len(deleted) - SHOWN} more" if len(deleted) > SHOWN else ""
        yield failed(row, f"{name} applies {len(deleted)} Kubernetes manifest(s) without DeletionPolicy Retain "
                          f"({', '.join(deleted[:SHOWN])}{more}): deploying it with delivery.endpoints: gitops runs "
                          "kubectl delete on their live objects",
                     fix="deploy once with delivery: {endpoints: cdk, handover: true}, then switch to gitops "
                         "(docs/gitops.md, \"Switching an environment from cdk to gitops\")")


def _deployed_template(cloudformation: Any, name: str) -> Mapping[str, Any] | None:
    """The deployed template of stack ``name``, or None when the stack does not exist (CloudFormation answers a
    ``ValidationError`` "Stack with id <name> does not exist")."""
    try:
        answer = cloudformation.get_template(StackName=name, TemplateStage="Original")
    except Exception as exc:  # noqa: BLE001 - only the "does not exist" answer is read here; the rest propagates
        if error_code(exc) == "ValidationError" and "does not exist" in error_message(exc):
            return None
        raise
    body = answer.get("TemplateBody")
    if isinstance(body, Mapping):  # botocore parses a JSON body into a mapping
        return body
    if isinstance(body, str):
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if isinstance(parsed, Mapping):
            return parsed
    # a template that is not JSON (the toolkit's stacks are: the CDK writes JSON) cannot be read: fail safe
    raise ValueError(f"the deployed template of {name} is not a JSON object, so its manifests cannot be checked")


def _resources(template: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
    resources = template.get("Resources")
    return resources if isinstance(resources, Mapping) else {}
