"""tests/iam_reference.py: the resource types of IAM actions (Service Authorization Reference, as cfn-lint ships it)
and the scoping problems it finds in a template's identity policies."""

from __future__ import annotations

from typing import Any

import pytest

from tests.iam_reference import UnknownAction, resource_types, scoping_problems

ACCOUNT_ARN = "arn:aws:shield::111111111111:protection/*"


def _template(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Resources": {"Policy": {"Type": "AWS::IAM::Policy", "Properties": {
        "PolicyDocument": {"Version": "2012-10-17", "Statement": list(statements)}, "Roles": [{"Ref": "Role"}]}}}}


def test_the_reference_knows_which_actions_take_a_resource() -> None:
    # GIVEN actions of the load balancer controller's policy WHEN looked up THEN the listed resource types, case-blind
    assert resource_types("acm:DescribeCertificate") == ("certificate",)
    assert resource_types("ELASTICLOADBALANCING:describeloadbalancers") == ()
    assert resource_types("shield:CreateProtection") == ()  # so on an ARN it grants nothing
    assert "network-interface" in resource_types("ec2:CreateNetworkInterface")
    with pytest.raises(UnknownAction):
        resource_types("ec2:DescribeEverything")


def test_each_kind_of_scoping_mistake_is_named_once() -> None:
    # GIVEN one template with each mistake, and one right statement of each kind
    template = _template(
        {"Sid": "Void", "Effect": "Allow", "Action": "shield:CreateProtection", "Resource": ACCOUNT_ARN},
        {"Sid": "Wide", "Effect": "Allow", "Action": ["acm:DescribeCertificate", "acm:ListCertificates"], "Resource": "*"},
        {"Sid": "Typo", "Effect": "Allow", "Action": "ec2:DescribeEverything", "Resource": "*"},
        {"Sid": "All", "Effect": "Allow", "Action": "ec2:*", "Resource": "*"},
        {"Sid": "Pass", "Effect": "Allow", "Action": "iam:PassRole", "Resource": "arn:aws:iam::111111111111:role/x"},
        {"Sid": "PassTo", "Effect": "Allow", "Action": "iam:PassRole", "Resource": "arn:aws:iam::111111111111:role/x",
         "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}},
        {"Sid": "Family", "Effect": "Allow", "Action": "s3:GetObject*", "Resource": "arn:aws:s3:::bucket/*"},
        {"Sid": "Denied", "Effect": "Deny", "Action": "shield:CreateProtection", "Resource": ACCOUNT_ARN},
    )
    # WHEN checked without exemptions
    problems = scoping_problems({"t": template}, kept_on_every_resource={}, kept_void={})
    # THEN each mistake is named with where it is; the right statements, the action family and the Deny are not
    assert problems == [
        "t/Policy/Void: shield:CreateProtection takes no resource type, so on ARNs it grants nothing",
        "t/Policy/Wide: acm:DescribeCertificate is on '*' but takes certificate",
        "t/Policy/Typo: ec2:DescribeEverything is not an action of the Service Authorization Reference",
        "t/Policy/All: ec2:* grants every action of ec2",
        "t/Policy/Pass: iam:PassRole without an iam:PassedToService condition",
    ]


def test_an_exemption_is_honoured_and_must_still_be_needed() -> None:
    # GIVEN an action kept on "*" with a reason, and an exemption nothing needs
    template = _template({"Sid": "Wide", "Effect": "Allow", "Action": "acm:DescribeCertificate", "Resource": "*"})
    kept = {"acm:DescribeCertificate": "a reason", "shield:DescribeProtection": "a reason"}
    # WHEN checked THEN the kept action passes, and the exemption nothing needs is named
    assert scoping_problems({"t": template}, kept_on_every_resource=kept, kept_void={}) == [
        "exemption of shield:DescribeProtection is not needed any more"]
    # AND it is not named when the caller checks a part of the project only
    assert scoping_problems({"t": template}, kept_on_every_resource=kept, kept_void={}, all_exemptions_used=False) == []
