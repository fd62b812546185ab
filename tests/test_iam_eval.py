"""The IAM policy evaluator of tests/iam_eval.py against the IAM User Guide's own examples.

Sources (IAM User Guide): "Policy evaluation logic" (explicit deny, default deny), "IAM JSON policy elements: NotAction"
and "NotResource", "IAM JSON policy elements: Condition operators" (missing keys, ...IfExists, Null, negated
operators), "Single-valued vs. multivalued context keys" / "Set operators for multivalued context keys" (ForAnyValue,
ForAllValues and the empty set), "Controlling access to AWS resources using tags" (aws:RequestTag, aws:TagKeys).
"""

from __future__ import annotations

import pytest

from tests.iam_eval import (
    Decision,
    Deployment,
    Request,
    UnsupportedPolicy,
    arn_matches,
    evaluate,
    resolve,
    role_policies,
)


def _policy(*statements: dict) -> list[dict]:
    return [{"Version": "2012-10-17", "Statement": list(statements)}]


# -- the decision -----------------------------------------------------------------------------------------------------

def test_nothing_applies_so_the_request_is_implicitly_denied() -> None:
    policies = _policy({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::reports/*"})
    assert evaluate(policies, Request("s3:PutObject", "arn:aws:s3:::reports/a")).decision is Decision.IMPLICIT_DENY
    assert evaluate([], Request("s3:GetObject", "arn:aws:s3:::reports/a")).decision is Decision.IMPLICIT_DENY


def test_an_explicit_deny_overrides_any_allow_in_any_policy() -> None:
    # GIVEN one policy that allows all of S3 and another that denies deleting
    policies = [*_policy({"Sid": "AllS3", "Effect": "Allow", "Action": "s3:*", "Resource": "*"}),
                *_policy({"Sid": "NoDelete", "Effect": "Deny", "Action": "s3:Delete*", "Resource": "*"})]
    # WHEN / THEN the deny wins for the deleting call only, and names the statement
    denied = evaluate(policies, Request("s3:DeleteObject", "arn:aws:s3:::b/k"))
    assert (denied.decision, denied.statements) == (Decision.EXPLICIT_DENY, ("NoDelete",))
    assert evaluate(policies, Request("s3:GetObject", "arn:aws:s3:::b/k")).statements == ("AllS3",)


# -- actions and resources ----------------------------------------------------------------------------------------------

def test_action_wildcards_are_case_insensitive() -> None:
    policies = _policy({"Effect": "Allow", "Action": ["iam:*AccessKey*", "EC2:describe?nstances"], "Resource": "*"})
    assert evaluate(policies, Request("iam:CreateAccessKey")).allowed
    assert evaluate(policies, Request("iam:listaccesskeys")).allowed
    assert evaluate(policies, Request("ec2:DescribeInstances")).allowed
    assert not evaluate(policies, Request("iam:CreateUser")).allowed


def test_allow_with_not_action_allows_everything_but_the_listed_actions() -> None:
    # The User Guide's NotAction example: everything except IAM (not a deny: IAM is merely not allowed here)
    policies = _policy({"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"})
    assert evaluate(policies, Request("s3:ListAllMyBuckets")).allowed
    assert evaluate(policies, Request("iam:CreateUser")).decision is Decision.IMPLICIT_DENY


def test_deny_with_not_action_and_bool_if_exists_denies_all_but_iam_without_mfa() -> None:
    # The User Guide's "deny all but IAM unless signed in with MFA", next to an allow of everything
    policies = _policy({"Effect": "Allow", "Action": "*", "Resource": "*"},
                       {"Sid": "DenyAllExceptListedIfNoMFA", "Effect": "Deny", "NotAction": "iam:*", "Resource": "*",
                        "Condition": {"BoolIfExists": {"aws:MultiFactorAuthPresent": "false"}}})
    without_key = Request("ec2:RunInstances", "arn:aws:ec2:us-east-1:111111111111:instance/*")
    assert evaluate(policies, without_key).decision is Decision.EXPLICIT_DENY  # key absent: ...IfExists holds
    with_mfa = Request("ec2:RunInstances", without_key.resource, {"aws:MultiFactorAuthPresent": "true"})
    assert evaluate(policies, with_mfa).allowed
    assert evaluate(policies, Request("iam:ChangePassword", "*")).allowed


def test_not_resource_matches_every_resource_but_the_listed_ones() -> None:
    policies = _policy({"Effect": "Allow", "Action": "s3:*", "NotResource": ["arn:aws:s3:::HRBucket/Payroll",
                                                                             "arn:aws:s3:::HRBucket/Payroll/*"]})
    assert evaluate(policies, Request("s3:GetObject", "arn:aws:s3:::HRBucket/Benefits/x")).allowed
    assert not evaluate(policies, Request("s3:GetObject", "arn:aws:s3:::HRBucket/Payroll/2026.csv")).allowed


@pytest.mark.parametrize(("pattern", "arn", "matches"), [
    ("arn:aws:s3:::bucket/*", "arn:aws:s3:::bucket/a/b/c", True),  # the resource part may span '/'
    ("arn:aws:logs:us-west-2:111111111111:log-group:/aws/x/*:log-stream:*",
     "arn:aws:logs:us-west-2:111111111111:log-group:/aws/x/c1:log-stream:s", True),  # ... and ':'
    ("arn:aws:ec2:*:111111111111:instance/*", "arn:aws:ec2:eu-west-1:111111111111:instance/i-1", True),
    ("arn:aws:ec2:*:111111111111:instance/*", "arn:aws:ec2:eu-west-1:222222222222:instance/i-1", False),
    ("arn:aws:iam::111111111111:role/*", "arn:aws-cn:iam::111111111111:role/r", False),  # partition is a component
    ("arn:aws:ec2:us-west-?:*:vpc/*", "arn:aws:ec2:us-west-2:111111111111:vpc/vpc-1", True),
    ("arn:aws:elasticloadbalancing:*:*:listener/app/*/*/*",
     "arn:aws:elasticloadbalancing:us-west-2:111111111111:listener-rule/app/a/b/c/d", False),
    ("*", "arn:aws:s3:::anything", True),
])
def test_arn_wildcards_match_component_by_component(pattern: str, arn: str, matches: bool) -> None:
    assert arn_matches(pattern, arn) is matches


# -- conditions ----------------------------------------------------------------------------------------------------------

def test_a_missing_key_fails_a_positive_operator_and_passes_its_if_exists_form() -> None:
    # The User Guide's ...IfExists example: instance types, where only some requests carry ec2:InstanceType
    plain = _policy({"Effect": "Allow", "Action": "ec2:*", "Resource": "*",
                     "Condition": {"StringLike": {"ec2:InstanceType": ["t1.*", "t2.*", "m3.*"]}}})
    if_exists = _policy({"Effect": "Allow", "Action": "ec2:*", "Resource": "*",
                         "Condition": {"StringLikeIfExists": {"ec2:InstanceType": ["t1.*", "t2.*", "m3.*"]}}})
    no_type = Request("ec2:CreateVolume", "arn:aws:ec2:us-east-1:111111111111:volume/*")
    assert not evaluate(plain, no_type).allowed
    assert evaluate(if_exists, no_type).allowed
    for policies in (plain, if_exists):
        assert evaluate(policies, Request("ec2:RunInstances", "*", {"ec2:InstanceType": "t2.micro"})).allowed
        assert not evaluate(policies, Request("ec2:RunInstances", "*", {"ec2:InstanceType": "m5.large"})).allowed


def test_a_negated_operator_holds_when_the_key_is_missing() -> None:
    policies = _policy({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*",
                        "Condition": {"StringNotEquals": {"aws:ResourceTag/team": "finance"}}})
    assert evaluate(policies, Request("s3:GetObject", "arn:aws:s3:::b/k")).allowed
    assert evaluate(policies, Request("s3:GetObject", "arn:aws:s3:::b/k", {"aws:ResourceTag/team": "ml"})).allowed
    assert not evaluate(policies, Request("s3:GetObject", "arn:aws:s3:::b/k", {"aws:ResourceTag/team": "finance"})).allowed


def test_null_checks_whether_a_key_is_present() -> None:
    # The User Guide's Null example: "Null": {"aws:TokenIssueTime": "true"} holds for long-term credentials only
    long_term = _policy({"Effect": "Allow", "Action": "ec2:*", "Resource": "*",
                         "Condition": {"Null": {"aws:TokenIssueTime": "true"}}})
    assert evaluate(long_term, Request("ec2:DescribeVpcs")).allowed
    assert not evaluate(long_term, Request("ec2:DescribeVpcs", "*", {"aws:TokenIssueTime": "2026-01-01T00:00:00Z"})).allowed
    # "false" requires the key; two keys in one Null block must both hold (AND)
    tagged = _policy({"Effect": "Allow", "Action": "ec2:CreateTags", "Resource": "*",
                      "Condition": {"Null": {"aws:RequestTag/owner": "true", "aws:ResourceTag/owner": "false"}}})
    assert evaluate(tagged, Request("ec2:CreateTags", "*", {"aws:ResourceTag/owner": "a", "aws:RequestTag/x": "1"})).allowed
    assert not evaluate(tagged, Request("ec2:CreateTags", "*", {"aws:ResourceTag/owner": "a",
                                                                 "aws:RequestTag/owner": "b"})).allowed
    assert not evaluate(tagged, Request("ec2:CreateTags", "*", {"aws:RequestTag/x": "1"})).allowed


def test_values_of_a_key_are_ored_and_keys_and_operators_are_anded() -> None:
    policies = _policy({"Effect": "Allow", "Action": "ec2:RunInstances", "Resource": "*", "Condition": {
        "StringEquals": {"aws:RequestTag/env": ["dev", "staging"], "ec2:Region": "us-west-2"},
        "Bool": {"aws:SecureTransport": True}}})
    ok = {"aws:RequestTag/env": "staging", "ec2:Region": "us-west-2", "aws:SecureTransport": "true"}
    assert evaluate(policies, Request("ec2:RunInstances", "*", ok)).allowed
    assert not evaluate(policies, Request("ec2:RunInstances", "*", {**ok, "aws:RequestTag/env": "prod"})).allowed
    assert not evaluate(policies, Request("ec2:RunInstances", "*", {**ok, "ec2:Region": "us-east-1"})).allowed
    assert not evaluate(policies, Request("ec2:RunInstances", "*", {**ok, "aws:SecureTransport": "false"})).allowed


def test_condition_key_names_are_case_insensitive_and_values_are_not() -> None:
    policies = _policy({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*",
                        "Condition": {"StringEquals": {"aws:PrincipalTag/Team": "ML"}}})
    assert evaluate(policies, Request("s3:GetObject", "*", {"AWS:principaltag/team": "ML"})).allowed
    assert not evaluate(policies, Request("s3:GetObject", "*", {"aws:PrincipalTag/Team": "ml"})).allowed


def test_for_all_values_holds_when_every_requested_tag_key_is_allowed_and_over_no_keys() -> None:
    # The User Guide's ForAllValues example on aws:TagKeys, with its pitfall: no tags at all also passes
    policies = _policy({"Effect": "Allow", "Action": "ec2:CreateTags", "Resource": "*", "Condition": {
        "ForAllValues:StringEquals": {"aws:TagKeys": ["environment", "cost-center"]}}})
    assert evaluate(policies, Request("ec2:CreateTags", "*", {"aws:TagKeys": ["environment"]})).allowed
    assert not evaluate(policies, Request("ec2:CreateTags", "*", {"aws:TagKeys": ["environment", "owner"]})).allowed
    assert evaluate(policies, Request("ec2:CreateTags", "*", {"aws:TagKeys": []})).allowed
    assert evaluate(policies, Request("ec2:CreateTags", "*")).allowed


def test_for_any_value_holds_when_one_requested_tag_key_matches_and_never_over_no_keys() -> None:
    policies = _policy({"Effect": "Allow", "Action": "ec2:CreateTags", "Resource": "*", "Condition": {
        "ForAnyValue:StringEquals": {"aws:TagKeys": ["environment", "cost-center"]}}})
    assert evaluate(policies, Request("ec2:CreateTags", "*", {"aws:TagKeys": ["owner", "cost-center"]})).allowed
    assert not evaluate(policies, Request("ec2:CreateTags", "*", {"aws:TagKeys": ["owner"]})).allowed
    assert not evaluate(policies, Request("ec2:CreateTags", "*")).allowed


def test_deny_unless_only_approved_tag_keys_uses_for_any_value_string_not_equals() -> None:
    # Deny when any requested tag key is outside the approved set
    policies = _policy({"Effect": "Allow", "Action": "ec2:CreateTags", "Resource": "*"},
                       {"Effect": "Deny", "Action": "ec2:CreateTags", "Resource": "*", "Condition": {
                           "ForAnyValue:StringNotEquals": {"aws:TagKeys": ["environment", "cost-center"]}}})
    assert evaluate(policies, Request("ec2:CreateTags", "*", {"aws:TagKeys": ["environment"]})).allowed
    result = evaluate(policies, Request("ec2:CreateTags", "*", {"aws:TagKeys": ["environment", "owner"]}))
    assert result.decision is Decision.EXPLICIT_DENY


def test_arn_like_and_arn_equals_compare_component_wise_with_wildcards() -> None:
    policies = _policy({"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*", "Condition": {
        "ArnLike": {"aws:SourceArn": "arn:aws:eks:us-west-2:111111111111:cluster/*"},
        "ArnEquals": {"aws:PrincipalArn": "arn:aws:iam::111111111111:role/ci"}}})
    context = {"aws:SourceArn": "arn:aws:eks:us-west-2:111111111111:cluster/c", "aws:PrincipalArn":
               "arn:aws:iam::111111111111:role/ci"}
    assert evaluate(policies, Request("sts:AssumeRole", "*", context)).allowed
    assert not evaluate(policies, Request("sts:AssumeRole", "*", {
        **context, "aws:SourceArn": "arn:aws:eks:us-east-1:111111111111:cluster/c"})).allowed


def test_what_the_evaluator_does_not_model_is_refused_rather_than_guessed() -> None:
    numeric = _policy({"Effect": "Allow", "Action": "s3:*", "Resource": "*",
                       "Condition": {"NumericLessThan": {"s3:max-keys": "10"}}})
    with pytest.raises(UnsupportedPolicy, match="NumericLessThan"):
        evaluate(numeric, Request("s3:ListBucket", "*", {"s3:max-keys": "5"}))
    single = _policy({"Effect": "Allow", "Action": "ec2:*", "Resource": "*",
                      "Condition": {"StringEquals": {"aws:TagKeys": "a"}}})
    with pytest.raises(UnsupportedPolicy, match="ForAnyValue"):
        evaluate(single, Request("ec2:CreateTags", "*", {"aws:TagKeys": ["a", "b"]}))
    with pytest.raises(UnsupportedPolicy, match="Principal"):
        evaluate(_policy({"Effect": "Allow", "Principal": "*", "Action": "s3:*", "Resource": "*"}), Request("s3:GetObject"))


# -- CloudFormation intrinsics -------------------------------------------------------------------------------------------

def test_intrinsics_resolve_for_the_deployment_partition_account_and_region() -> None:
    deployment = Deployment(account="222222222222", region="cn-north-1", partition="aws-cn",
                            attributes={("Workspace", "WorkspaceId"): "ws-1"})
    value = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":aps:", {"Ref": "AWS::Region"}, ":",
                               {"Ref": "AWS::AccountId"}, ":workspace/", {"Fn::GetAtt": ["Workspace", "WorkspaceId"]}]]}
    assert resolve(value, deployment) == "arn:aws-cn:aps:cn-north-1:222222222222:workspace/ws-1"
    assert resolve({"Fn::Sub": "https://aps-workspaces.${AWS::Region}.${AWS::URLSuffix}/${Bucket}"}, deployment) == \
        "https://aps-workspaces.cn-north-1.amazonaws.com.cn/<Bucket>"
    assert resolve({"Fn::Select": [1, {"Fn::Split": ["/", "a/b/c"]}]}, deployment) == "b"
    with pytest.raises(UnsupportedPolicy, match="Fn::If"):
        resolve({"Fn::If": ["C", "a", "b"]}, deployment)


def test_role_policies_gathers_inline_attached_and_template_managed_policies() -> None:
    template = {"Resources": {
        "Role": {"Type": "AWS::IAM::Role", "Properties": {
            "Policies": [{"PolicyName": "i", "PolicyDocument": _policy({"Effect": "Allow", "Action": "a:One",
                                                                         "Resource": "*"})[0]}],
            "ManagedPolicyArns": [{"Ref": "Managed"}, {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                                                        ":iam::aws:policy/ReadOnlyAccess"]]}]}},
        "Managed": {"Type": "AWS::IAM::ManagedPolicy", "Properties": {
            "PolicyDocument": _policy({"Effect": "Allow", "Action": "a:Two", "Resource": "*"})[0]}},
        "Attached": {"Type": "AWS::IAM::Policy", "Properties": {"Roles": [{"Ref": "Role"}], "PolicyDocument":
                     _policy({"Effect": "Deny", "Action": "a:One", "Resource": {"Fn::Join": ["", [
                         "arn:", {"Ref": "AWS::Partition"}, ":s3:::x"]]}})[0]}},
    }}
    policies = role_policies(template, "Role")
    assert policies.unevaluated == ("arn:aws:iam::aws:policy/ReadOnlyAccess",)
    assert policies.evaluate(Request("a:Two")).allowed
    assert policies.evaluate(Request("a:One", "arn:aws:s3:::y")).allowed
    assert policies.evaluate(Request("a:One", "arn:aws:s3:::x")).decision is Decision.EXPLICIT_DENY
