"""OperationsAccess: access entries in the operations group with no EKS policy, and RBAC that grants exactly the calls
of ``hpdpd status``, ``verify``, ``smoke`` and ``rollout`` (every permission string of hyperpod_dpd/ops/, scanned): namespaced
in the endpoints' namespaces and the operator's, cluster-scoped only for what Kubernetes offers at cluster scope alone."""

from __future__ import annotations

import ast
import copy
import importlib
import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Template

from hyperpod_dpd.catalogue.operator import INFERENCE_NAMESPACE
from hyperpod_dpd.config import parse_environment
from hyperpod_dpd.config.eks_existing import ExistingEksCluster
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra import HyperPodDpdPlatform, apply_guardrails, availability_zone_context
from hyperpod_dpd.infra.eks_cluster import HyperPodEksCluster
from hyperpod_dpd.infra.operations_access import (
    OPERATIONS_GROUP,
    PERMISSIONS,
    ROLE_NAMES,
    OperationsAccess,
    bind_namespace,
    cluster_manifests,
    namespace_binding,
)
from hyperpod_dpd.k8s.validation import validate_manifests
from hyperpod_dpd.ops import kube
from tests.paths import ROOT

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
CHECKS_ROLE = "arn:aws:iam::111111111111:role/hpdpd-pipeline-checks"
OPERATOR_ROLE = "arn:aws:iam::111111111111:role/platform/sre-operations"
EXISTING: dict[str, Any] = {
    "cluster_name": "shared", "version": "1.34",
    "oidc_provider_arn": "arn:aws:iam::111111111111:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/"
                         "0123456789ABCDEF0123456789ABCDEF",
    "kubectl_role_arn": "arn:aws:iam::111111111111:role/platform/eks-kubectl",
    "cluster_security_group_id": "sg-0123456789abcdef0"}
ADOPTED_CONFIG = ROOT / "tests" / "fixtures" / "adopted" / "config" / "adopted.yaml"


def _of_type(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def _objects(resource: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(resource["Properties"]["Manifest"])


@pytest.fixture(scope="module")
def small(cdk_context: dict[str, Any]) -> dict[str, Any]:
    """GIVEN an adopted cluster, a stand-in for the inference add-on and for an endpoint's manifest (which creates
    namespace ``llm``), the operations access of two roles (one listed twice) and the binding of ``llm``, in one
    small stack, synthesized once."""
    app = cdk.App(context=cdk_context)
    stack = cdk.Stack(app, "Ops", env=cdk.Environment(account="111111111111", region="us-west-2"))
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=["us-west-2a", "us-west-2b"],
        private_subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
        private_subnet_route_table_ids=["rtb-0123456789abcdef0", "rtb-0123456789abcdef1"])
    cluster = HyperPodEksCluster(
        stack, "Eks", vpc=vpc, subnets=vpc.private_subnets, cluster_name="shared", version="1.34",
        security_group=ec2.SecurityGroup.from_security_group_id(stack, "Efa", "sg-0123456789abcdef9"),
        existing=ExistingEksCluster(**EXISTING))
    addon = eks.CfnAddon(stack, "InferenceAddon", cluster_name="shared", addon_name="amazon-sagemaker-hyperpod-inference")
    endpoint = eks.KubernetesManifest(stack, "Endpoint", cluster=cluster.cluster, manifest=[
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm"}}])
    access = OperationsAccess(stack, "OperationsAccess", cluster=cluster.cluster, kubernetes_version="1.34",
                              principals=[CHECKS_ROLE, OPERATOR_ROLE, CHECKS_ROLE], after=[addon])
    binding = bind_namespace(stack, "Operations-llm", cluster=cluster.cluster, namespace="llm", kubernetes_version="1.34",
                             after=[endpoint])
    template = app.synth().get_stack_by_name("Ops").template
    ids = {name: stack.get_logical_id(c.node.default_child)  # type: ignore[arg-type]
           for name, c in (("endpoint", endpoint), ("rbac", access.manifest), ("binding", binding))}
    ids["addon"] = stack.get_logical_id(addon)
    return {"template": template, "ids": ids, "access": access}


def test_each_role_gets_one_standard_access_entry_in_the_operations_group_with_no_policy(small) -> None:
    entries = [v["Properties"] for v in _of_type(small["template"], "AWS::EKS::AccessEntry").values()]
    # THEN one entry per role (the duplicate collapses), of the adopted cluster, type STANDARD, in the group the
    # bindings name, and with no EKS access policy: RBAC alone decides what the role may do
    assert sorted(entries, key=lambda e: e["PrincipalArn"]) == [
        {"ClusterName": "shared", "PrincipalArn": CHECKS_ROLE, "Type": "STANDARD", "KubernetesGroups": [OPERATIONS_GROUP]},
        {"ClusterName": "shared", "PrincipalArn": OPERATOR_ROLE, "Type": "STANDARD",
         "KubernetesGroups": [OPERATIONS_GROUP]}]
    assert all("AccessPolicies" not in e for e in entries)


def test_the_rbac_is_applied_through_the_kubectl_provider_after_the_inference_addon(small) -> None:
    template, ids = small["template"], small["ids"]
    rbac, binding = template["Resources"][ids["rbac"]], template["Resources"][ids["binding"]]
    assert rbac["Type"] == binding["Type"] == MANIFEST
    assert rbac["Properties"]["ClusterName"] == "shared"
    # THEN the cluster part waits for the add-on (its CRD and hyperpod-inference-system), the endpoint binding for
    # the manifest that creates its namespace
    assert ids["addon"] in rbac["DependsOn"]
    assert ids["endpoint"] in binding["DependsOn"]
    # AND both are applied (kubectl apply) and pruned, so a changed rule is updated in place
    for applied in (rbac, binding):
        assert applied["Properties"]["Overwrite"] is True and applied["Properties"]["PruneLabel"]


def _rules(objects: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found["rules"]


def test_the_cluster_roles_grant_exactly_the_documented_rules(small) -> None:
    objects = _objects(small["template"]["Resources"][small["ids"]["rbac"]])
    # GIVEN the permission table of docs/cli.md
    documented = _documented_permissions()
    # WHEN the ClusterRoles are read from the applied manifest
    rendered = {(scope, tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r["verbs"]))
                for scope, name in ROLE_NAMES.items() for r in _rules(objects, "ClusterRole", name)}
    # THEN they hold the documented rules and nothing more
    assert rendered == documented
    assert len(rendered) == len(PERMISSIONS) == 17
    # AND nothing is a wildcard, and the writes are the rollout's (IECs, the client Service, the re-pointed Ingress and
    # router NetworkPolicy), verify's probe pods, and the service proxy
    for _, groups, resources, verbs in rendered:
        assert "*" not in (*groups, *resources, *verbs)
    writers = {(scope, resources, verbs) for scope, _, resources, verbs in rendered if set(verbs) - {"get", "list"}}
    assert writers == {
        ("endpoint", ("services",), ("get", "patch")), ("router", ("services/proxy",), ("create",)),
        ("endpoint", ("inferenceendpointconfigs",), ("get", "create", "delete")),
        ("endpoint", ("pods",), ("list", "get", "create", "delete")), ("endpoint", ("pods/exec",), ("get", "create")),
        ("router", ("networkpolicies",), ("list", "get", "patch")), ("router", ("ingresses",), ("get", "patch"))}
    # AND exec and pod creation exist only in the endpoints' namespaces (verify's probe): never in the operator's
    # namespace or cluster-wide; no role reads secrets, port-forwards, attaches, binds or escalates
    assert {r for scope, _, resources, _ in rendered if scope != "endpoint" for r in resources} & {"pods/exec"} == set()
    assert not {"secrets", "pods/portforward", "pods/attach", "clusterroles", "roles", "rolebindings",
                "clusterrolebindings"} & {r for _, _, resources, _ in rendered for r in resources}


def test_cluster_scope_is_bound_cluster_wide_and_the_router_rules_only_in_the_operators_namespace(small) -> None:
    objects = _objects(small["template"]["Resources"][small["ids"]["rbac"]])
    bindings = {(o["kind"], o["metadata"].get("namespace"), o["roleRef"]["name"]): o["subjects"]
                for o in objects if o["kind"].endswith("Binding")}
    subjects = [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": OPERATIONS_GROUP}]
    assert bindings == {("ClusterRoleBinding", None, ROLE_NAMES["cluster"]): subjects,
                        ("RoleBinding", INFERENCE_NAMESPACE, ROLE_NAMES["router"]): subjects}
    # AND the cluster-wide rules are reads only: nodes, pods, the IECs (whose namespace may not exist yet) and the
    # EFA DRA driver's ResourceSlices
    assert _rules(objects, "ClusterRole", ROLE_NAMES["cluster"]) == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": ["inference.sagemaker.aws.amazon.com"], "resources": ["inferenceendpointconfigs"],
         "verbs": ["list"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"], "verbs": ["list"]}]


def test_the_endpoint_rules_are_bound_in_the_endpoints_namespace_only(small) -> None:
    (binding,) = _objects(small["template"]["Resources"][small["ids"]["binding"]])
    labels = binding["metadata"]["labels"]
    assert [k for k in labels if k.startswith("aws.cdk.eks/prune-")]  # the kubectl provider's pruning label
    binding["metadata"]["labels"] = {k: v for k, v in labels.items() if not k.startswith("aws.cdk.eks/prune-")}
    assert binding == {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "hyperpod-dpd-operations", "namespace": "llm",
                     "labels": {"app.kubernetes.io/managed-by": "hyperpod-dpd"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE_NAMES["endpoint"]},
        "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": OPERATIONS_GROUP}]}


@pytest.mark.parametrize("version", ["1.30", "1.34"])
def test_the_manifests_pass_kubernetes_validate(version: str) -> None:
    # WHEN the rendered RBAC is validated strictly for the cluster's version, THEN it passes
    validate_manifests([*cluster_manifests(), namespace_binding("llm")], kubernetes_version=version)
    # AND the validation is real: a rule without verbs is refused with one line naming the object
    broken = copy.deepcopy(cluster_manifests()[0])
    del broken["rules"][0]["verbs"]
    with pytest.raises(ConfigError, match=r"ClusterRole hyperpod-dpd-operations-cluster: rules\[0\]: .*'verbs' is a "
                                          r"required property"):
        validate_manifests([broken], kubernetes_version=version)


# -- every Kubernetes call of hyperpod_dpd/ops/ is granted ---------------------------------------------------------------------
#
# A call names what it needs in its ``permission`` (what a 403 tells the operator is missing), in one format:
# "<verb>[, <verb>...] on <resource>[.<API group>] in namespace <ns>" or "... (cluster scope)" / "... (all namespaces)".
# The scan reads every string and f-string of every module of hyperpod_dpd/ops/ in that format (a constant the f-string
# names is substituted from the module), so a call added anywhere there is checked without being listed here.
OPS_DIR = ROOT / "hyperpod_dpd" / "ops"
_PERMISSION = re.compile(r"(?P<verbs>[a-z]+(?:, [a-z]+)*) on (?P<what>[\w/.{}-]+)"
                         r"(?: in namespace (?P<ns>\S+)| \((?P<wide>cluster scope|all namespaces)\))")
# Where a namespace placeholder points: a call's own namespace is the endpoint's; pod_log reads the logs of the pods
# that dpd_pods (the endpoint's namespace) and router_pods (the operator's) list.
_NAMESPACES: dict[str, tuple[str, ...]] = {"{namespace}": ("endpoint",), "{pod.namespace}": ("endpoint", "router"),
                                           INFERENCE_NAMESPACE: ("router",)}
# Placeholders whose values the code chooses at run time, per module: status lists pods and NetworkPolicies (its
# lister uses NetworkingV1Api for the second) in the endpoint's namespace and in the operator's.
_MODULE_VALUES: dict[tuple[str, str], tuple[str, ...]] = {
    ("status", "{what}"): ("pods", "networkpolicies.networking.k8s.io"),
    ("status", "{namespace}"): ("endpoint", "router"),
}
Call = tuple[str, str, str, str]  # (scope, API group, resource, verb)


def _resolve(expression: ast.expr, names: dict[str, Any]) -> str:
    """A string constant the expression names in the module (``IEC_PLURAL``, ``kube.IEC_GROUP``), else the
    placeholder ``{<expression>}``."""
    value: Any = None
    if isinstance(expression, ast.Name):
        value = names.get(expression.id)
    elif isinstance(expression, ast.Attribute) and isinstance(expression.value, ast.Name):
        value = getattr(names.get(expression.value.id), expression.attr, None)
    return value if isinstance(value, str) else "{" + ast.unparse(expression) + "}"


def _strings(source: str, names: dict[str, Any]) -> list[tuple[int, str]]:
    rendered = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            rendered.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            parts = [p.value if isinstance(p, ast.Constant) else _resolve(p.value, names)  # type: ignore[attr-defined]
                     for p in node.values]
            rendered.append((node.lineno, "".join(str(p) for p in parts)))
    return rendered


def permissions_in(source: str, names: dict[str, Any], module: str) -> tuple[dict[Call, list[str]], list[str]]:
    """Every call a module's ``permission`` strings name, with where (``module:line``), and the placeholders the
    scan cannot place (each a test failure: say in _MODULE_VALUES what they stand for)."""
    calls: dict[Call, list[str]] = {}
    unplaced = []
    for line, text in _strings(source, names):
        match = _PERMISSION.fullmatch(text)
        if match is None:
            continue
        where = f"{module}:{line}"
        whats = _MODULE_VALUES.get((module, match["what"]), (match["what"],))
        if match["wide"]:
            scopes: tuple[str, ...] = ("cluster",)
        else:
            scopes = _MODULE_VALUES.get((module, match["ns"])) or _NAMESPACES.get(match["ns"], ())
        if not scopes or any("{" in w for w in whats):
            unplaced.append(f"{where}: {text!r}")
            continue
        for what in whats:
            resource, _, group = what.partition(".")
            for scope in scopes:
                for verb in match["verbs"].split(", "):
                    calls.setdefault((scope, group, resource, verb), []).append(where)
    return calls, unplaced


def module_names(source: str) -> dict[str, Any]:
    """The names a module's f-strings may use: its own module-level string constants, read from the source, and what
    it imports (a constant, or a module for ``kube.IEC_GROUP``), each imported on its own so that one module that does
    not import leaves only its names unresolved (and reported)."""
    names: dict[str, Any] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            names.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                try:
                    source_module = importlib.import_module(node.module)
                    value = getattr(source_module, alias.name, None)
                    names[alias.asname or alias.name] = (
                        value if value is not None else importlib.import_module(f"{node.module}.{alias.name}"))
                except ImportError:
                    continue
    return names


@pytest.fixture(scope="module")
def called() -> tuple[dict[Call, list[str]], list[str]]:
    """GIVEN every module of hyperpod_dpd/ops/, scanned for the calls its permission strings name."""
    calls: dict[Call, list[str]] = {}
    unplaced: list[str] = []
    for path in sorted(OPS_DIR.glob("*.py")):
        source = path.read_text()
        found, lost = permissions_in(source, module_names(source), path.stem)
        for call, where in found.items():
            calls.setdefault(call, []).extend(where)
        unplaced += lost
    return calls, unplaced


GRANTED: set[Call] = {(p.scope, p.group, p.resource, verb) for p in PERMISSIONS for verb in p.verbs}
# Grants whose calls other changes are adding; each must leave this set once its call exists (the second test fails
# while one is both awaited and called), and nothing else may be granted without a call.
AWAITED: set[Call] = set()
# Grants a call needs under another verb than it names: a WebSocket exec (the kubernetes client's stream) is a GET,
# authorized as `get` on pods/exec before Kubernetes 1.35 and as `create` from 1.35 (kubernetes/kubernetes PR #134577).
IMPLIED: dict[Call, Call] = {("endpoint", "", "pods/exec", "get"): ("endpoint", "", "pods/exec", "create")}


def test_every_kubernetes_call_of_the_operations_commands_is_granted(called) -> None:
    calls, unplaced = called
    # THEN the scan placed every permission string, and found the calls it must (it reads what it claims to read)
    assert unplaced == []
    assert {("cluster", "", "pods", "list"), ("router", "", "services/proxy", "create"),
            ("endpoint", kube.IEC_GROUP, "inferenceendpointconfigs", "get"),
            ("endpoint", "networking.k8s.io", "networkpolicies", "list")} <= set(calls)
    # AND each call is granted in its scope: a call outside PERMISSIONS is a 403 in a real cluster
    missing = {f"{verb} on {resource}{'.' + group if group else ''} ({scope}) at {', '.join(where)}"
               for (scope, group, resource, verb), where in calls.items() if (scope, group, resource, verb) not in GRANTED}
    assert missing == set()


def test_every_grant_is_a_call_or_awaited(called) -> None:
    calls, _ = called
    # THEN nothing is granted that no command calls, except the calls being added (AWAITED) and what a call needs
    # under another verb (IMPLIED, only while that call exists); an awaited call that exists now leaves AWAITED
    implied = {grant for grant, call in IMPLIED.items() if call in calls}
    assert GRANTED - set(calls) - implied <= AWAITED, sorted(GRANTED - set(calls) - implied - AWAITED)
    assert AWAITED & set(calls) == set(), "these calls exist now: remove them from AWAITED"
    assert AWAITED | set(IMPLIED) <= GRANTED


def test_the_scan_catches_a_call_that_is_not_granted() -> None:
    # GIVEN a module that deletes nodes and lists secrets in the operator's namespace, and one with a placeholder the
    # scan cannot place
    source = ('NODES = "nodes"\n'
              'def f(kube, where):\n'
              '    kube.call("x", None, permission=f"delete on {NODES} (cluster scope)")\n'
              '    kube.call("y", None, permission=f"get, list on secrets in namespace {INFERENCE_NAMESPACE}")\n'
              '    kube.call("z", None, permission=f"get on pods in namespace {where}")\n')
    names = {"NODES": "nodes", "INFERENCE_NAMESPACE": INFERENCE_NAMESPACE}
    # WHEN it is scanned
    calls, unplaced = permissions_in(source, names, "example")
    # THEN every call is found where it is, none of them is granted, and the unknown namespace is reported
    assert calls == {("cluster", "", "nodes", "delete"): ["example:3"], ("router", "", "secrets", "get"): ["example:4"],
                     ("router", "", "secrets", "list"): ["example:4"]}
    assert not set(calls) & GRANTED
    assert unplaced == ["example:5: 'get on pods in namespace {where}'"]


def _documented_permissions() -> set[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]]:
    """The table under "Cluster access of the operations commands" in docs/cli.md."""
    text = (ROOT / "docs" / "cli.md").read_text()
    section = text.split("### Cluster access of the operations commands", 1)[1].split("\n#", 1)[0]
    scopes = {"cluster": "cluster", "endpoint namespaces": "endpoint", INFERENCE_NAMESPACE: "router"}
    rows = set()
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] in scopes:
            group = "" if cells[1] == "core" else cells[1]
            rows.add((scopes[cells[0]], (group,), (cells[2],), tuple(v.strip("` ") for v in cells[3].split(","))))
    return rows


def test_a_created_cluster_gets_its_entries_by_reference(cdk_context: dict[str, Any]) -> None:
    # GIVEN a cluster the toolkit creates
    stack = cdk.Stack(cdk.App(context=cdk_context), "Created",
                      env=cdk.Environment(account="111111111111", region="us-west-2"))
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"], nat_gateways=1)
    cluster = HyperPodEksCluster(stack, "Eks", vpc=vpc, subnets=vpc.private_subnets, cluster_name="c", version="1.35",
                                 security_group=ec2.SecurityGroup(stack, "Sg", vpc=vpc),
                                 public_access_cidrs=["198.51.100.0/24"])
    # WHEN its operations access is built
    access = OperationsAccess(stack, "OperationsAccess", cluster=cluster.cluster, principals=[CHECKS_ROLE],
                              kubernetes_version="1.35")
    # THEN the entry names the cluster resource (so it is created after it), in the group, with no policy
    (entry,) = [v["Properties"] for v in Template.from_stack(stack).find_resources("AWS::EKS::AccessEntry").values()
                if v["Properties"]["PrincipalArn"] == CHECKS_ROLE]
    assert entry == {"ClusterName": {"Ref": stack.get_logical_id(cluster.cluster.node.default_child)},  # type: ignore[arg-type]
                     "PrincipalArn": CHECKS_ROLE, "Type": "STANDARD", "KubernetesGroups": [OPERATIONS_GROUP]}
    assert list(access.entries) == [CHECKS_ROLE]


def test_operations_access_needs_at_least_one_role() -> None:
    stack = cdk.Stack(cdk.App(), "Empty")
    cluster = eks.Cluster.from_cluster_attributes(stack, "C", cluster_name="shared")
    with pytest.raises(ConfigError, match=r"OperationsAccess.principals: missing: is required"):
        OperationsAccess(stack, "OperationsAccess", cluster=cluster, principals=[], kubernetes_version="1.34")
    assert stack.node.try_find_child("OperationsAccess") is None


# -- the platform: build_platform and build_endpoints wire it for an adopted cluster -----------------------------------


def _adopted_platform(tmp_path: Path, principals: list[str]) -> tuple[cdk.Stack, HyperPodDpdPlatform, dict[str, Any]]:
    data = yaml.safe_load(ADOPTED_CONFIG.read_text())
    data["eks"]["operations_principals"] = principals
    config = parse_environment(data, name="adopted", source="adopted.yaml", base_dir=ADOPTED_CONFIG.parent.parent)
    app = cdk.App(outdir=str(tmp_path), context=availability_zone_context(config))
    stack = cdk.Stack(app, "Serving", env=cdk.Environment(account=config.account, region=config.region))
    dpd = HyperPodDpdPlatform(stack, "Dpd", config=config)
    apply_guardrails(app)  # a guardrail finding raises on synth
    return stack, dpd, app.synth().get_stack_by_name("Serving").template


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> tuple[cdk.Stack, HyperPodDpdPlatform, dict[str, Any]]:
    """GIVEN the adopted environment (eks.existing) with two operations roles, as one construct in a consumer's
    stack, with the guardrails applied."""
    return _adopted_platform(tmp_path_factory.mktemp("operations"), [
        "arn:aws:iam::444444444444:role/hpdpd-pipeline-checks", "arn:aws:iam::444444444444:role/platform/sre-operations"])


def test_an_adopted_cluster_gets_the_entries_the_rbac_and_a_binding_per_endpoint_namespace(platform) -> None:
    stack, dpd, template = platform
    config = dpd.config
    assert dpd.operations is not None and config.eks.existing is not None and config.endpoints
    # THEN one STANDARD entry per operations role, on the adopted cluster, beside the admin entries
    entries = [v["Properties"] for v in _of_type(template, "AWS::EKS::AccessEntry").values()
               if v["Properties"].get("KubernetesGroups") == [OPERATIONS_GROUP]]
    assert sorted(e["PrincipalArn"] for e in entries) == sorted(config.eks.operations_principals)
    assert {e["ClusterName"] for e in entries} == {config.eks.existing.cluster_name}
    # AND the RBAC waits for the inference add-on
    resources = template["Resources"]
    assert dpd.operations.manifest is not None  # cdk delivery: CDK applies the RBAC
    rbac = resources[stack.get_logical_id(dpd.operations.manifest.node.default_child)]  # type: ignore[arg-type]
    assert stack.get_logical_id(dpd.inference_operator.resource) in rbac["DependsOn"]
    # AND each endpoint's namespace gets the RoleBinding, after the endpoint's manifest that creates the namespace
    for endpoint in config.endpoints:
        binding = dpd.node.find_child(f"Operations-{endpoint.name}")
        found = resources[stack.get_logical_id(binding.node.default_child)]  # type: ignore[arg-type]
        assert _objects(found)[0]["metadata"]["namespace"] == endpoint.namespace
        manifest = dpd.endpoint_manifests[endpoint.name]
        assert stack.get_logical_id(manifest.node.default_child) in found["DependsOn"]  # type: ignore[arg-type]
    # AND the admin entries keep their cluster-admin policy, outside the operations group
    admin = [v["Properties"] for v in _of_type(template, "AWS::EKS::AccessEntry").values()
             if "KubernetesGroups" not in v["Properties"]]
    assert [a["PrincipalArn"] for a in admin] == list(config.eks.admin_principals)
    assert all(a["AccessPolicies"] for a in admin)


def test_without_operations_roles_nothing_is_granted(tmp_path: Path) -> None:
    # GIVEN the same environment without eks.operations_principals
    stack, dpd, template = _adopted_platform(tmp_path, [])
    # THEN there is no operations access: no entry in the group, no RBAC manifest, no namespace binding
    assert dpd.operations is None
    assert [v for v in _of_type(template, "AWS::EKS::AccessEntry").values()
            if "KubernetesGroups" in v["Properties"]] == []
    assert [c.node.path for c in dpd.node.find_all() if "Operations" in c.node.id] == []
    assert not any("hyperpod-dpd-operations" in json.dumps(v["Properties"].get("Manifest", ""))
                   for v in _of_type(template, MANIFEST).values())


def test_in_a_promoted_environment_the_entry_is_the_checks_runners_role(synthesized) -> None:
    # GIVEN dev's platform as the pipeline deploys it (dev has an endpoint: a checks runner and a checks role)
    resources = synthesized.template("dev", "platform")["Resources"]
    roles = {v["Properties"].get("RoleName"): k for k, v in resources.items() if v["Type"] == "AWS::IAM::Role"}
    entries = [v["Properties"]["PrincipalArn"] for v in _of_type({"Resources": resources}, "AWS::EKS::AccessEntry").values()
               if v["Properties"].get("KubernetesGroups") == [OPERATIONS_GROUP]]
    # THEN the operations entry is the runner's role, the principal that reads and writes inside the cluster; the
    # checks role, which only starts the runner from the pipeline account, has none
    assert entries == [{"Fn::GetAtt": [roles["hpdpd-dev-checks-runner"], "Arn"]}]
    # (the checks role lives in the network stack, so nothing here may name it either)
    assert "hpdpd-dev-checks\"" not in json.dumps(entries) and "hpdpd-dev-checks" not in roles
    network = synthesized.template("dev", "network")["Resources"]
    assert [v["Properties"]["RoleName"] for v in network.values() if v["Type"] == "AWS::IAM::Role"
            and v["Properties"].get("RoleName")] == ["hpdpd-dev-checks"]
