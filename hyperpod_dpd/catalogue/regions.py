"""Regions where ``AWS::SageMaker::Cluster`` exists (cfn-lint 1.58.0 registry schemas, 2026-10-20)."""

HYPERPOD_REGIONS: frozenset[str] = frozenset(
    {
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-south-1",
        "ap-south-2",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-southeast-3",
        "ap-southeast-4",
        "ca-central-1",
        "eu-central-1",
        "eu-north-1",
        "eu-south-2",
        "eu-west-1",
        "eu-west-2",
        "sa-east-1",
        "us-east-1",
        "us-east-2",
        "us-west-1",
        "us-west-2",
    }
)
