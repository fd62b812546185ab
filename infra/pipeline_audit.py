"""ArtifactAudit: a CloudTrail trail of the object-level reads and writes of the promotion pipeline's artifact buckets.

The artifact buckets CodePipeline writes (the pipeline's own and each cross-Region replication bucket) keep no server
access logs; their access is audited here instead, with S3 data events ("Data events provide visibility into the
resource operations performed on or within a resource ... Amazon S3 object-level API activity (for example,
GetObject, DeleteObject, and PutObject)": CloudTrail user guide, "Logging data events"). The trail:

* is multi-Region, so it also records the replication buckets in other Regions (a single-Region trail records only
  its own Region's events), and records no management events (the account's own trail has those; a second copy of
  management events is charged);
* writes to a bucket of its own (TLS-only, private, versioned, server access logs to a log bucket) whose policy admits
  ``cloudtrail.amazonaws.com`` for this one trail only (``aws:SourceArn``: CloudTrail user guide, "Amazon S3 bucket
  policy for CloudTrail"), and encrypts its log files with a KMS key (rotation on) whose policy lets CloudTrail use it
  for this trail only (``aws:SourceArn`` and ``kms:EncryptionContext:aws:cloudtrail:arn``: CloudTrail user guide,
  "Configure AWS KMS key policies for CloudTrail");
* validates its log files (digest files), so a changed or deleted log file is detectable.

Costs: S3 data events are charged per event (a pipeline execution reads and writes a few hundred objects), plus the
storage of the log files.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudtrail as cloudtrail
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from hyperpod_dpd.infra import checkov
from hyperpod_dpd.infra.arns import arn
from hyperpod_dpd.infra.buckets import access_logs_bucket, secure_bucket

CLOUDTRAIL = "cloudtrail.amazonaws.com"


class ArtifactAudit(Construct):
    """The audit trail of the buckets named ``bucket_names`` (see the module docstring).

    Args:
        trail_name: the trail's explicit name (its ARN is in the bucket and key policies before it exists). No
            default.
        bucket_names: the names of the buckets whose object reads and writes are recorded. No default.
        removal_policy: of the log buckets and the key. Default: retain (an audit record outlives its stack).

    Attributes: ``trail`` (the ``CfnTrail``), ``trail_arn``, ``bucket`` (the log files), ``access_logs``, ``key``.
    """

    def __init__(self, scope: Construct, id: str, *, trail_name: str, bucket_names: Sequence[str],
                 removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN) -> None:
        super().__init__(scope, id)
        account = cdk.Stack.of(self).account
        self.trail_arn = arn(self, "cloudtrail", f"trail/{trail_name}")
        source = {"aws:SourceArn": self.trail_arn}
        self.access_logs = access_logs_bucket(self, "AccessLogs", removal_policy=removal_policy)
        self.bucket = secure_bucket(self, "Bucket", bucket_name=None, removal_policy=removal_policy,
                                    access_logs=self.access_logs)
        self.bucket.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudTrailAclCheck", principals=[iam.ServicePrincipal(CLOUDTRAIL)], actions=["s3:GetBucketAcl"],
            resources=[self.bucket.bucket_arn], conditions={"StringEquals": source}))
        self.bucket.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudTrailWrite", principals=[iam.ServicePrincipal(CLOUDTRAIL)], actions=["s3:PutObject"],
            resources=[self.bucket.arn_for_objects(f"AWSLogs/{account}/*")],
            conditions={"StringEquals": {**source, "s3:x-amz-acl": "bucket-owner-full-control"}}))
        self.key = kms.Key(self, "Key", enable_key_rotation=True, removal_policy=removal_policy,
                           description=f"Encrypts the log files of the CloudTrail trail {trail_name}")
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudTrailEncryptLogs", principals=[iam.ServicePrincipal(CLOUDTRAIL)], actions=["kms:GenerateDataKey*"],
            resources=["*"],  # a key policy's resource is the key itself
            conditions={"StringEquals": source, "StringLike": {
                "kms:EncryptionContext:aws:cloudtrail:arn": arn(self, "cloudtrail", "trail/*", region="*")}}))
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudTrailDescribeKey", principals=[iam.ServicePrincipal(CLOUDTRAIL)], actions=["kms:DescribeKey"],
            resources=["*"], conditions={"StringEquals": source}))
        self.trail = cloudtrail.CfnTrail(
            self, "Trail", trail_name=trail_name, s3_bucket_name=self.bucket.bucket_name, is_logging=True,
            is_multi_region_trail=True, include_global_service_events=True, enable_log_file_validation=True,
            kms_key_id=self.key.key_arn,
            event_selectors=[cloudtrail.CfnTrail.EventSelectorProperty(
                include_management_events=False, read_write_type="All",
                data_resources=[cloudtrail.CfnTrail.DataResourceProperty(
                    type="AWS::S3::Object", values=[f"arn:{cdk.Aws.PARTITION}:s3:::{name}/" for name in bucket_names])])])
        policy = self.bucket.policy
        assert policy is not None  # the statements above created it
        self.trail.add_resource_dependency(policy.node.default_child)  # type: ignore[arg-type]  # CloudTrail checks the policy
        self.trail.node.add_dependency(self.key)
        checkov.skip(self.trail, "CKV_AWS_252", "The log files are the audit record, read when needed; a delivery "
                     "notification topic would have no subscriber")
