"""The consumer's own construct: an encrypted, TLS-only SNS topic for the on-call rotation.

The topic has its own customer-managed key. The AWS-managed ``alias/aws/sns`` key's policy cannot be changed, so
CloudWatch alarms could not publish to a topic encrypted with it ("Managing Amazon SNS encryption keys and costs",
SNS developer guide: event sources need a customer managed key whose policy lets them use it).
"""

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct


class OnCallTopic(Construct):
    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.key = kms.Key(self, "Key", enable_key_rotation=True, description="Encrypts the on-call topic")
        alarms = stack.format_arn(service="cloudwatch", resource="alarm", resource_name="*",
                                  arn_format=ArnFormat.COLON_RESOURCE_NAME)
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="AllowCloudWatchAlarms", actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=["*"],
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            conditions={"ArnLike": {"aws:SourceArn": alarms}, "StringEquals": {"aws:SourceAccount": stack.account}}))
        self.topic = sns.Topic(self, "Resource", master_key=self.key, enforce_ssl=True)
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="AllowCloudWatchAlarms", actions=["sns:Publish"], resources=[self.topic.topic_arn],
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            conditions={"ArnLike": {"aws:SourceArn": alarms}, "StringEquals": {"aws:SourceAccount": stack.account}}))
