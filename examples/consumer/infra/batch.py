"""The consumer's own construct: the role of a batch job (an ECS task on AWS Batch) that reads model weights."""

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

# ECS tasks assume their task role through this service principal; ECS documents aws:SourceAccount and aws:SourceArn
# in the trust policy against the confused deputy (Amazon ECS developer guide, "Amazon ECS task IAM role").
ECS_TASKS = "ecs-tasks.amazonaws.com"


class BatchJobRole(Construct):
    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)
        self.role = iam.Role(self, "Role", description="Batch evaluation jobs: read the model weights", assumed_by=(
            iam.ServicePrincipal(ECS_TASKS, conditions={
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnLike": {"aws:SourceArn": f"arn:{cdk.Aws.PARTITION}:ecs:{stack.region}:{stack.account}:*"}})))
