"""ChecksRole: the role the promotion pipeline's check steps assume in one environment to start its checks runner.

The pipeline's ``Rollout``, ``Smoke`` and ``KvFabric`` steps (stacks/pipeline_stack.py) run in CodeBuild in the
pipeline account, outside every VPC. They assume this role in the environment's account and run their commands through
``hpdpd checks run`` (hpdpd/ops/remote_checks.py): upload the checkout, start a build of the environment's checks runner
(infra/checks_runner.py) inside its VPC, follow its log, read its result. The runner's own role holds the cluster
access; this role has none. It is created by the environment's platform stack, which every stage deploys before its
endpoints stack (and so before ``Rollout``, a step of that stack).

* **Name**: explicit (``hpdpd-<env>-checks``, :data:`hyperpod_dpd.config.environment.CHECKS_ROLE_NAME`), so the
  pipeline account can name it before it exists.
* **Trust**: one role ARN, the pipeline's CodeBuild role of this environment's checks. The trust policy names the
  pipeline *account* as principal with an ``aws:PrincipalArn`` condition on that role: IAM refuses a trust policy whose
  principal is a role that does not exist yet, and turns a role principal into the role's unique id, so a recreated
  pipeline role would lose the trust; the condition key holds "the ARN of the role, not the ARN of the user that
  assumed the role" for role sessions (IAM User Guide, "AWS global condition context keys", ``aws:PrincipalArn``).
* **Permissions**: exactly the calls of ``hpdpd checks run``: ``codebuild:BatchGetProjects`` (the runner's source
  bucket), ``codebuild:StartBuild``, ``codebuild:BatchGetBuilds`` and ``codebuild:StopBuild`` on the one project (CodeBuild
  authorizes each on the project ARN: Service Authorization Reference, AWS CodeBuild, resource type ``project``),
  ``s3:PutObject`` under the runner bucket's ``sources/``, and ``logs:GetLogEvents`` on the runner's log group.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from hyperpod_dpd.config.environment import IAM_ROLE_NAME, TRUSTED_ROLE_ARN
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra import nag
from hyperpod_dpd.infra.arns import arn
from hyperpod_dpd.infra.checks_runner import ChecksRunner
from hyperpod_dpd.ops.remote_checks import SOURCE_PREFIX

# The calls of hpdpd/ops/remote_checks.py, each with what it does.
RUNNER_ACTIONS = (
    "codebuild:BatchGetProjects",  # RemoteChecks.describe: the project's S3 source bucket
    "codebuild:StartBuild",  # RemoteChecks.start
    "codebuild:BatchGetBuilds",  # RemoteChecks.follow: status, log stream, exported exit code
    "codebuild:StopBuild",  # timeout, Ctrl-C, SIGTERM
)
UPLOAD = "s3:PutObject"  # RemoteChecks.upload
READ_LOG = "logs:GetLogEvents"  # RemoteChecks.follow
WILDCARD_REASONS = {
    "UploadSource": "Each run uploads one new zip under sources/ of the runner's own bucket; the key is new per run",
    "ReadRunnerLog": "The runner's own log group; CodeBuild names a new log stream per build",
}


class ChecksRole(Construct):
    """The pipeline's checks role of one environment (see the module docstring).

    Args:
        role_name: the role's explicit name (``hpdpd-<env>-checks``).
        trusted_role_arn: the one role that may assume it (the pipeline's CodeBuild role of this environment's
            checks, ``arn:<partition>:iam::<pipeline account>:role/<pipeline>-checks-<env>``).
        runner: the environment's checks runner, the one project it may start.

    Attributes: ``role`` (the ``iam.Role``), ``policy`` (its one inline policy), ``trusted_role_arn`` (partition-aware).
    """

    def __init__(self, scope: Construct, id: str, *, role_name: str, trusted_role_arn: str,
                 runner: ChecksRunner) -> None:
        where = "ChecksRole"
        if not IAM_ROLE_NAME.fullmatch(role_name):
            raise ConfigError.single(None, f"{where}.role_name", role_name,
                                     "must be an IAM role name: 1-64 of letters, digits and +=,.@_-")
        trusted = TRUSTED_ROLE_ARN.fullmatch(trusted_role_arn)
        if trusted is None:
            raise ConfigError.single(None, f"{where}.trusted_role_arn", trusted_role_arn,
                                     "must be an IAM role ARN such as "
                                     "'arn:aws:iam::444444444444:role/hpdpd-pipeline-checks-dev'")
        super().__init__(scope, id)
        account = trusted["account"]
        self.trusted_role_arn = f"arn:{cdk.Aws.PARTITION}:iam::{account}:role/{trusted['name']}"
        self.role = iam.Role(
            self, "Role", role_name=role_name,
            # the account as ARN, so the partition stays ${AWS::Partition} (AccountPrincipal folds it into a literal)
            assumed_by=iam.ArnPrincipal(f"arn:{cdk.Aws.PARTITION}:iam::{account}:root").with_conditions(
                {"ArnEquals": {"aws:PrincipalArn": self.trusted_role_arn}}),
            description=f"hyperpod-dpd: the promotion pipeline starts the checks runner {runner.project_name} as this")
        statements = [
            iam.PolicyStatement(sid="StartRunner", actions=list(RUNNER_ACTIONS),
                                resources=[arn(self, "codebuild", f"project/{runner.project_name}")]),
            iam.PolicyStatement(sid="UploadSource", actions=[UPLOAD],
                                resources=[runner.bucket.arn_for_objects(f"{SOURCE_PREFIX}*")]),
            iam.PolicyStatement(sid="ReadRunnerLog", actions=[READ_LOG], resources=[runner.log_group.log_group_arn]),
        ]
        self.policy = iam.Policy(self, "Policy", statements=statements)
        self.policy.attach_to_role(self.role)
        nag.acknowledge_wildcards(self.policy, statements, WILDCARD_REASONS)
