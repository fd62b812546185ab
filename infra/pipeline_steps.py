"""Steps of the promotion pipeline that are constructs of their own: the AWS CLI profile every step writes, and
``TerminationProtection``, which turns termination protection on after a stage deploys its stacks.

CodePipeline's CloudFormation actions cannot set termination protection, so after each stage whose stacks
``cdk deploy`` protects, a ``TerminationProtection`` step turns it on (and checks it is on) with the target's CDK
bootstrap deploy role, the role ``cdk deploy`` itself sets it with.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import pipelines
from constructs import Construct

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.infra import source_conditions

# The target account's CDK bootstrap deploy role: the role `cdk deploy` sets termination protection with, and the role
# CDK Pipelines' CloudFormation actions already run as. Its bootstrap policy grants
# cloudformation:UpdateTerminationProtection (statement "CliPermissions" of the DeploymentActionRole in aws-cdk's
# packages/aws-cdk/lib/api/bootstrap/bootstrap-template.yaml; bootstrap version 33 as shipped in
# node_modules/aws-cdk/lib/api/bootstrap/bootstrap-template.yaml) and cloudformation:DescribeStacks (its managed
# policy AWSCloudFormationReadOnlyAccess); it trusts the pipeline account after `cdk bootstrap --trust`.
DEPLOY_ROLE = "cdk-{qualifier}-deploy-role-{account}-{region}"
PROTECT_MINUTES = 15  # the install phase's runtimes, then two AWS CLI calls per stack
# An exact npm version (semver 2.0.0 "MAJOR.MINOR.PATCH", optional pre-release): a range, a dist-tag (``latest``, the
# default when a spec names none: npm docs, "npm install", ``npm install <name>`` installs ``<name>@latest``) or a URL
# is not one.
EXACT_NPM_VERSION = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?")
NPM_SPEC = re.compile(r"(?P<name>(?:@[a-z0-9][\w.-]*/)?[a-z0-9][\w.-]*)(?:@(?P<version>.+))?", re.IGNORECASE)
# `npm install` and its aliases (npm docs, "npm install", Synopsis: "aliases: add, i, in, ins, inst, insta, instal, isnt,
# isnta, isntal, isntall").
NPM_INSTALL = frozenset({"install", "add", "i", "in", "ins", "inst", "insta", "instal", "isnt", "isnta", "isntal", "isntall"})
SHELL_SEPARATORS = re.compile(r"&&|\|\||[;|\n]")


def deploy_role_arn(env: EnvironmentConfig, qualifier: str) -> str:
    """The target account's CDK bootstrap deploy role (see :data:`DEPLOY_ROLE`), in the environment's partition."""
    name = DEPLOY_ROLE.format(qualifier=qualifier, account=env.account, region=env.region)
    return f"arn:{env.partition}:iam::{env.account}:role/{name}"


def protected_stack_names(stage: cdk.Stage) -> list[str]:
    """The names of the stage's stacks that ``cdk deploy`` creates with termination protection, in stage order."""
    return [c.stack_name for c in stage.node.children if isinstance(c, cdk.Stack) and c.termination_protection]


def cli_profile(name: str, role_variable: str, session: str) -> list[str]:
    """An AWS CLI profile that assumes ``$role_variable`` with the CodeBuild container's credentials."""
    return [f'aws configure set profile.{name}.role_arn "${role_variable}"',
            f"aws configure set profile.{name}.credential_source EcsContainer",
            f"aws configure set profile.{name}.role_session_name {session}"]


def unpinned_installs(commands: Iterable[str]) -> list[str]:
    """Every install in ``commands`` (a buildspec's) that does not name exact versions, as ``<command>: <why>``.

    Pinned: ``npm ci`` (the lock file, with each tarball's integrity), ``npm install -g <name>@<x.y.z>``,
    ``pip install --require-hashes ...`` or ``pip install <name>==<x.y.z>`` and local paths. Anything else that installs
    through npm or pip (a dist-tag such as ``@latest``, a range, a bare name, ``npm install`` without the lock's
    ``ci``) is reported, as is any argument ending in ``@latest``.
    """
    found = []
    for command in commands:
        for segment in SHELL_SEPARATORS.split(command):
            problem = _install_problem(segment)
            if problem:
                found.append(f"{' '.join(segment.split())}: {problem}")
    return found


def _install_problem(segment: str) -> str | None:
    try:
        words = shlex.split(segment)
    except ValueError:
        words = segment.split()
    if any(w.endswith("@latest") for w in words):
        return "installs a dist-tag (@latest), not a version"
    programs = [w.rsplit("/", 1)[-1] for w in words]
    if "npm" in programs:
        rest = words[programs.index("npm") + 1:]
        if rest and rest[0] in NPM_INSTALL:
            specs = [w for w in rest[1:] if not w.startswith("-")]
            if not specs:
                return "npm install without packages resolves package.json afresh; use npm ci (the lock file)"
            for spec in specs:
                match = NPM_SPEC.fullmatch(spec)
                if match is None or not EXACT_NPM_VERSION.fullmatch(match["version"] or ""):
                    return f"{spec!r} names no exact version (npm installs the latest release)"
        return None
    pip = next((i for i, p in enumerate(programs) if re.fullmatch(r"pip(3(\.\d+)?)?", p)), None)
    if pip is not None and words[pip + 1:pip + 2] == ["install"]:
        arguments = words[pip + 2:]
        if "--require-hashes" in arguments:
            return None
        options_with_values = {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url"}
        specs, skip = [], False
        for word in arguments:
            if skip:
                skip = False
            elif word in options_with_values:
                if word in ("-r", "--requirement"):
                    return f"{' '.join(arguments)!r}: a requirements file without --require-hashes"
                skip = True
            elif not word.startswith("-"):
                specs.append(word)
        for spec in specs:
            local = spec in (".", "..") or spec.startswith(("./", "../", "/"))
            if not local and not re.fullmatch(r"[A-Za-z0-9][\w.\-\[\],]*==[\w.!+\-]+", spec):
                return f"{spec!r} names no exact version (pip installs the latest release)"
    return None


class TerminationProtection(Construct):
    """Termination protection for the protected stacks of one environment, after its stage deployed them.

    ``cdk deploy`` sets it from each stack's ``termination_protection``; CodePipeline's CloudFormation actions cannot,
    so this step does: ``update-termination-protection --enable-termination-protection`` per stack, then
    ``describe-stacks`` must report ``EnableTerminationProtection`` true or the step (and the promotion) fails. Its
    CodeBuild role may only assume the environment's CDK bootstrap deploy role; the stacks of an ``EnvironmentStage``
    all live in the environment's account and Region.

    Args:
        env: the environment whose stacks are protected. No default.
        stack_names: the stacks to protect, at least one. No default.
        qualifier: the CDK bootstrap qualifier of the environment's deploy role. No default.
    """

    PROFILE = "hpdpd-protect"

    def __init__(self, scope: Construct, id: str, *, env: EnvironmentConfig, stack_names: Sequence[str],
                 qualifier: str) -> None:
        super().__init__(scope, id)
        if not stack_names:
            raise ValueError(f"{env.name} has no stack with termination protection")
        self._env, self.stack_names = env, tuple(stack_names)
        self.deploy_role_arn = deploy_role_arn(env, qualifier)
        self.role = iam.Role(self, "Role", assumed_by=source_conditions.service_principal(
                                 "codebuild.amazonaws.com", source_conditions.codebuild(self)),
                             description=f"hyperpod-dpd pipeline: termination protection of {env.name}'s stacks "
                                         f"(assumes the CDK deploy role of {env.account}, {env.region})")
        self.role.add_to_policy(iam.PolicyStatement(actions=["sts:AssumeRole"], resources=[self.deploy_role_arn]))

    def _cfn(self, command: str, stack: str, *args: str) -> str:
        return " ".join(["aws cloudformation", command, *args, "--stack-name", stack,
                         "--profile", self.PROFILE, "--region", self._env.region])

    def commands(self) -> list[str]:
        commands = cli_profile(self.PROFILE, "HPDPD_PROTECT_ROLE_ARN", "hpdpd-pipeline-protect")
        for stack in self.stack_names:
            enabled = self._cfn("describe-stacks", stack, "--query", "'Stacks[0].EnableTerminationProtection'",
                                "--output", "text")
            commands += [
                self._cfn("update-termination-protection", stack, "--enable-termination-protection"),
                f'test "$({enabled})" = True || {{ echo "termination protection is off on {stack}" >&2; false; }}',
            ]
        return commands

    def step(self) -> pipelines.CodeBuildStep:
        return pipelines.CodeBuildStep(
            "TerminationProtection", commands=self.commands(), env={"HPDPD_PROTECT_ROLE_ARN": self.deploy_role_arn},
            role=self.role, timeout=cdk.Duration.minutes(PROTECT_MINUTES))
