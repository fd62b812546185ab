"""Partition-aware ARNs: the partition stays ``${AWS::Partition}`` even where the stack's Region is concrete, and each
scope gets its own stack's Region and account."""

from __future__ import annotations

import aws_cdk as cdk

from hyperpod_dpd.infra.arns import arn, iam_arn


def test_an_arn_keeps_the_partition_a_reference_in_a_concrete_region() -> None:
    # GIVEN a stack with a concrete account and Region
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(account="111111111111", region="us-west-2"))
    # WHEN an ARN is written for one of its constructs
    value = stack.resolve(arn(cdk.CfnResource(stack, "R", type="AWS::SQS::Queue"), "ec2", "instance/*"))
    # THEN the partition is the pseudo parameter, and Region and account are the stack's
    assert value == {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":ec2:us-west-2:111111111111:instance/*"]]}


def test_region_and_account_can_be_given_and_iam_arns_have_no_region() -> None:
    # GIVEN an environment-agnostic stack
    stack = cdk.Stack(cdk.App(), "S")
    # WHEN one ARN names another account and Region and another is an IAM ARN
    other = stack.resolve(arn(stack, "s3", "bucket", region="", account=""))
    role = stack.resolve(iam_arn(stack, "role/x"))
    # THEN the given values are used, and the IAM ARN has an empty Region and the stack's account
    assert other == {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::bucket"]]}
    assert role == {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":role/x"]]}


def test_two_stacks_get_their_own_account_and_region() -> None:
    # GIVEN two stacks in different accounts and Regions of one app, each asked twice (the location is cached)
    app = cdk.App()
    first = cdk.Stack(app, "A", env=cdk.Environment(account="111111111111", region="us-west-2"))
    second = cdk.Stack(app, "B", env=cdk.Environment(account="222222222222", region="eu-west-1"))
    values = [s.resolve(arn(s, "sns", "t")) for s in (first, second, first, second)]
    # THEN each ARN is its own stack's
    assert [v["Fn::Join"][1][2] for v in values] == [  # type: ignore[index]
        ":sns:us-west-2:111111111111:t", ":sns:eu-west-1:222222222222:t"] * 2
