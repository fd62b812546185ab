"""Where each catalogue instance type passes the two CloudFormation validators (generated, do not edit).

``PRICED`` is cfn-lint 1.58.0's rule E3644 list (``cfnlint/data/schemas/extensions/aws_sagemaker_cluster/
instancetype_enum.json``, built from EC2 pricing): outside it a type is sold only through capacity blocks or
training plans, or not at all. ``CDK_VALIDATOR_LAGS`` lists the Regions where the older copy of that data bundled
with aws-cdk-lib 2.275.0 (``@aws/cloudformation-validate`` 1.12.1) still rejects a type that cfn-lint accepts.

Regenerate with ``make offerings`` (``scripts/probe_offerings.py``); ``tests/hyperpod_dpd/catalogue/test_offerings.py``
cross-checks both lists against the installed tools.
"""

from collections.abc import Mapping
from types import MappingProxyType

PRICED: Mapping[str, frozenset[str]] = MappingProxyType({
    "ml.p5.48xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-southeast-1 ap-southeast-2 ap-southeast-3 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.p5e.48xlarge": frozenset("".split()),
    "ml.p5en.48xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-southeast-3 eu-north-1 eu-south-2 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.p6-b200.48xlarge": frozenset("ap-south-1 ap-south-2 us-east-1 us-east-2 us-west-2".split()),
    "ml.p6-b300.48xlarge": frozenset("ap-south-2 ap-southeast-3 us-east-1 us-west-2".split()),
    "ml.m5.large": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ca-central-1 eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m5.xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ca-central-1 eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m5.2xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-4 ca-central-1 eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m5.4xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ca-central-1 eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m5.8xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ca-central-1 eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m5.12xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ca-central-1 eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m5.16xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ca-central-1 eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m5.24xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ca-central-1 eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m6i.large": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m6i.xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m6i.2xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m6i.4xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1".split()),
    "ml.m6i.8xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m6i.12xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m6i.16xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m6i.24xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m7i.large": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ca-central-1 eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m7i.xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ca-central-1 eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m7i.2xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ca-central-1 eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m7i.4xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ca-central-1 eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m7i.8xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ca-central-1 eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m7i.12xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ca-central-1 eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m7i.16xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ca-central-1 eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.m7i.24xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ca-central-1 eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.c6i.large": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.c6i.xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.c6i.2xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.c6i.4xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-2".split()),
    "ml.c6i.8xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.c6i.12xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-west-1 us-west-2".split()),
    "ml.c6i.16xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
    "ml.c6i.24xlarge": frozenset("ap-northeast-1 ap-northeast-2 ap-south-1 ap-south-2 ap-southeast-1 ap-southeast-2 ca-central-1 eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()),
})

CDK_VALIDATOR_LAGS: Mapping[str, frozenset[str]] = MappingProxyType({
    "ml.p5.48xlarge": frozenset("ap-southeast-3".split()),
    "ml.p6-b200.48xlarge": frozenset("ap-south-1 ap-south-2 us-east-1 us-east-2".split()),
    "ml.p6-b300.48xlarge": frozenset("ap-southeast-3".split()),
    "ml.m5.large": frozenset("ap-south-2".split()),
    "ml.m6i.large": frozenset("us-west-2".split()),
    "ml.m7i.large": frozenset("ap-south-2".split()),
    "ml.m7i.xlarge": frozenset("ap-south-2 us-west-2".split()),
    "ml.m7i.2xlarge": frozenset("ap-south-2".split()),
    "ml.m7i.4xlarge": frozenset("ap-south-2".split()),
    "ml.m7i.8xlarge": frozenset("ap-south-2".split()),
    "ml.m7i.12xlarge": frozenset("ap-south-2".split()),
    "ml.m7i.16xlarge": frozenset("ap-south-2".split()),
    "ml.m7i.24xlarge": frozenset("ap-south-2".split()),
    "ml.c6i.large": frozenset("ap-south-2".split()),
    "ml.c6i.xlarge": frozenset("ap-south-2".split()),
    "ml.c6i.2xlarge": frozenset("ap-south-2".split()),
    "ml.c6i.4xlarge": frozenset("ap-south-2".split()),
    "ml.c6i.8xlarge": frozenset("ap-south-2".split()),
    "ml.c6i.12xlarge": frozenset("ap-south-2".split()),
    "ml.c6i.16xlarge": frozenset("ap-south-2".split()),
    "ml.c6i.24xlarge": frozenset("ap-south-2".split()),
})
