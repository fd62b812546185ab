"""Limits of the services that receive what the toolkit renders: CloudFormation templates and S3 object keys.

Sources:

* CloudFormation: AWS CloudFormation User Guide, "Understand CloudFormation quotas"
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html).
* S3: Amazon S3 User Guide, "Naming Amazon S3 objects"
  (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html).
"""

from __future__ import annotations

# "Template body size in a request": a template passed inline to CreateStack, UpdateStack or ValidateTemplate.
TEMPLATE_BODY_REQUEST_BYTES = 51_200
# "Template body size in an Amazon S3 object": 1 MB for a template passed by TemplateURL. The CDK CLI always deploys
# this toolkit's stacks that way: the DefaultStackSynthesizer records each template as a file asset
# (``stackTemplateAssetObjectUrl``), and the CLI then passes its URL instead of the body (aws/aws-cdk-cli @ e7aa7375,
# packages/@aws-cdk/toolkit-lib/lib/api/cloudformation/template-body-parameter.ts, makeBodyParameter), so the bytes of
# the template file are what CloudFormation measures. The page does not say whether 1 MB is 10^6 or 2^20 bytes; the
# smaller reading is the limit here (fail safe: a template between the two is refused rather than failing a deploy).
TEMPLATE_BODY_S3_BYTES = 1_000_000
MAX_RESOURCES = 500  # "Resources": resources declared in one template
MAX_OUTPUTS = 200  # "Outputs"
MAX_PARAMETERS = 200  # "Parameters"
MAX_MAPPINGS = 200  # "Mappings"

# "The object key name consists of a sequence of Unicode characters encoded in UTF-8, with a maximum length of 1,024
# bytes ... The prefix, the delimiter (/), and the name of the object are included in the 1,024 byte limitation."
S3_KEY_MAX_BYTES = 1024
# A prefix that holds objects is shorter than every key below it, so it has at most 1,023 bytes.
S3_PREFIX_MAX_BYTES = S3_KEY_MAX_BYTES - 1
