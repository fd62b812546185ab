"""StageTemplates resolves Ref, GetAtt and cross-stack references to the resource they name."""

from __future__ import annotations

from hyperpod_dpd.infra.guardrails.templates import StageTemplates

TEMPLATES = {
    "net": {"Resources": {"Sg": {"Type": "AWS::EC2::SecurityGroup", "Properties": {}}},
            "Outputs": {"SgOut": {"Value": {"Fn::GetAtt": ["Sg", "GroupId"]}, "Export": {"Name": "net-sg"}}}},
    "app": {"Resources": {"Role": {"Type": "AWS::IAM::Role", "Properties": {"RoleName": "r"}}}},
}


def test_ref_and_getatt_resolve_within_a_template() -> None:
    view = StageTemplates.from_dicts(TEMPLATES)
    assert view.target("app", {"Ref": "Role"}).properties == {"RoleName": "r"}
    assert view.target("net", {"Fn::GetAtt": ["Sg", "GroupId"]}).type == "AWS::EC2::SecurityGroup"
    assert view.target("app", {"Ref": "Missing"}) is None
    assert view.target("app", "literal") is None


def test_cross_stack_outputs_and_imports_resolve() -> None:
    view = StageTemplates.from_dicts(TEMPLATES, {"network-stack": "net"})
    by_output = view.target("app", {"Fn::GetStackOutput": {"StackName": "network-stack", "OutputName": "SgOut"}})
    by_export = view.target("app", {"Fn::ImportValue": "net-sg"})
    assert by_output is not None and by_export is not None
    assert (by_output.template_path, by_output.logical_id) == ("net", "Sg") == (by_export.template_path, by_export.logical_id)


def test_resources_filter_by_type() -> None:
    view = StageTemplates.from_dicts(TEMPLATES)
    assert [r.logical_id for r in view.resources("AWS::IAM::Role")] == ["Role"]
    assert len(list(view.resources())) == 2
