"""The consumer's own construct: an encrypted, TLS-only SNS topic for the on-call rotation."""

from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct


class OnCallTopic(Construct):
    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        key = kms.Alias.from_alias_name(self, "Key", "alias/aws/sns")
        self.topic = sns.Topic(self, "Resource", master_key=key, enforce_ssl=True)
