"""Run one check command inside an environment's checks runner (infra/checks_runner.py) and follow it to its end.

The runner is a CodeBuild project in the environment's VPC, so its builds reach a private Kubernetes API server. A run
(``hpdpd checks run``, hyperpod_dpd/cli/checks.py) zips the working directory, uploads it to the runner's source bucket,
starts one build with two overrides (the source object, and ``HPDPD_ARGS``: the command as a JSON array), follows the
build's CloudWatch Logs stream while polling ``BatchGetBuilds``, and ends with the remote command's exit code.

Upstream facts this relies on (botocore's ``codebuild`` and ``logs`` service models, botocore 1.44.8):

* ``StartBuild`` takes ``sourceLocationOverride`` (for an S3 source, ``<bucket>/<key>``),
  ``environmentVariablesOverride``, ``timeoutInMinutesOverride`` (5-2160) and ``idempotencyToken``.
* ``Build.buildStatus`` is one of SUCCEEDED, FAILED, FAULT, TIMED_OUT, IN_PROGRESS, STOPPED; ``Build.logs`` names
  ``groupName`` and ``streamName``; ``Build.exportedEnvironmentVariables`` lists ``{name, value}``, whose value "can be
  updated between the start of the install phase and the end of the post_build phase" (CodeBuild API reference,
  ExportedEnvironmentVariable). The runner's buildspec exports :data:`EXIT_CODE_VARIABLE`.
* ``GetLogEvents`` with ``startFromHead`` pages forward with ``nextForwardToken``; at the end of the stream it
  "returns the same token you passed in" (CloudWatch Logs API reference, GetLogEvents).

What the sources cannot confirm fails safe: a build that succeeds without a recorded exit code of 0, 1 or 2 ends with 2,
never 0. Nothing here prints: log lines and notes go to the caller's callbacks.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from hyperpod_dpd.aws import ClientSource, call_errors, is_access_denied, is_credentials_error, is_not_found
from hyperpod_dpd.catalogue.pipeline_contract import (  # noqa: F401 - the runner's names, re-exported for callers
    ARGS_VARIABLE,
    DEFAULT_SOURCE_KEY,
    ENVIRONMENT_VARIABLE,
    EXIT_CODE_VARIABLE,
    SOURCE_PREFIX,
)
from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.ops.answers import member
from hyperpod_dpd.ops.deadline import OutOfTime
from hyperpod_dpd.ops.lookup import aws_reason

# The commands the runner accepts: the checks the pipeline runs, and the reads around them. ``rollout`` takes all of
# its actions (promote, status, abort: hyperpod_dpd/cli/rollout.py ACTIONS).
CHECK_COMMANDS = ("rollout", "verify", "smoke", "status", "wait")
ALLOWED_TEXT = "rollout promote|status|abort, verify, smoke, status, wait"
EXIT_CODES = frozenset({0, 1, 2})  # the hpdpd commands' own exit codes (docs/cli.md)
# Not shipped with a run: environments, caches and build output that `make setup` recreates remotely.
SKIPPED_DIRECTORIES = frozenset({"node_modules", "cdk.out", ".cache", "dist", "build", ".git", "__pycache__"})
SKIPPED_PREFIXES = (".venv",)
# StartBuild timeoutInMinutesOverride: 5-2160 (CodeBuild API reference, StartBuild).
MIN_BUILD_MINUTES, MAX_BUILD_MINUTES = 5, 2160
FINAL_LOG_ROUNDS = 2  # reads of the stream after the build ended: CloudWatch Logs may deliver the last lines late


class RemoteChecksError(HpdpdError):
    """A run that could not start, be followed or be stopped: one line saying why (exit 2)."""


# ---- what the runner accepts ----------------------------------------------------------------------------------------


def decode_arguments(raw: str | None) -> list[str]:
    """The command of ``HPDPD_ARGS``: a JSON array of strings, else one line saying what is wrong."""
    if not raw:
        raise RemoteChecksError(f"{ARGS_VARIABLE} is not set: start the runner with 'hpdpd checks run'")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RemoteChecksError(f"{ARGS_VARIABLE}: {raw[:80]!r}: must be a JSON array of strings")
    return value


def encode_arguments(arguments: Sequence[str]) -> str:
    return json.dumps(list(arguments), separators=(",", ":"))


def refusal(command: str | None, *, env: str | None, runner_env: str | None, profile: str | None) -> str | None:
    """Why the runner refuses a parsed command, or None: only the check commands, only for the runner's own
    environment, and with the runner's own credentials (its role; no profile exists inside it)."""
    if command not in CHECK_COMMANDS:
        return f"{command!r} is not a check command; allowed: {ALLOWED_TEXT}"
    if runner_env is not None and env != runner_env:
        return f"--env {env!r}: this runner checks only environment {runner_env!r}"
    if profile is not None:
        return f"--profile {profile!r}: the runner calls AWS as its own role; drop --profile"
    return None


# ---- the checkout ---------------------------------------------------------------------------------------------------


def checkout_files(directory: Path) -> Iterator[Path]:
    """The regular files of ``directory`` a run ships, sorted (:data:`SKIPPED_DIRECTORIES`, ``.venv*`` left out)."""
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRECTORIES and not d.startswith(SKIPPED_PREFIXES))
        for name in sorted(files):
            path = Path(root) / name
            if path.is_file():  # a dangling symlink, a socket or a FIFO is not shipped
                yield path


def zip_checkout(directory: Path, target: BinaryIO) -> int:
    """Write the checkout as a zip to ``target`` (file modes kept, so scripts stay executable); the file count."""
    count = 0
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in checkout_files(directory):
            archive.write(path, path.relative_to(directory).as_posix())
            count += 1
    if count == 0:
        raise RemoteChecksError(f"{directory}: no files to run the checks from")
    return count


# ---- one run --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RunnerProject:
    """Where a runner project takes its source from and writes its logs (from ``BatchGetProjects``)."""

    name: str
    bucket: str


@dataclass(frozen=True, kw_only=True)
class RemoteResult:
    """How a run ended: ``exit_code`` (0, 1 or 2), the build's status, and why when the build itself ended it."""

    build_id: str
    status: str
    exit_code: int
    reason: str = ""


@dataclass(kw_only=True)
class _Stream:
    group: str | None = None
    name: str | None = None
    token: str | None = None
    note_sent: bool = False


@dataclass(frozen=True, kw_only=True)
class RemoteChecks:
    """Start, follow and stop builds of one runner project (``hpdpd-<env>-checks``).

    ``clock`` and ``sleep`` are injectable so tests need not wait; ``new_id`` names each run's source object and is
    its StartBuild idempotency token (a retried StartBuild starts no second build).
    """

    clients: ClientSource
    project: str
    poll_seconds: float = 10.0
    # the clients StopBuild is called with: the command's deadline extended by a grace period, so that a build which
    # outlived --timeout can still be stopped (None: ``clients``)
    stop_clients: ClientSource | None = None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    new_id: Callable[[], str] = field(default=lambda: uuid.uuid4().hex)

    def _call(self, what: str, permission: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except call_errors() as exc:
            if is_credentials_error(exc):
                raise
            reason = aws_reason(exc)
            if is_access_denied(exc):
                reason += f"; needs {permission}"
            raise RemoteChecksError(f"cannot {what}: {reason}") from None

    def describe(self) -> RunnerProject:
        """The project's S3 source bucket; refused when the project does not exist or takes no S3 source."""
        answer = self._call(f"read the checks runner {self.project}", f"codebuild:BatchGetProjects on project "
                            f"{self.project}", lambda: self.clients.client("codebuild").batch_get_projects(
                                names=[self.project]))
        projects = answer.get("projects") or []
        if not projects:
            raise RemoteChecksError(f"no checks runner {self.project}: deploy the environment's platform stack, "
                                    "which creates it for an environment with endpoints that a pipeline promotes")
        source = projects[0].get("source") or {}
        location = str(source.get("location") or "")
        if source.get("type") != "S3" or "/" not in location:
            raise RemoteChecksError(f"{self.project} takes no S3 source ({source.get('type')!r}): it is not a checks "
                                    "runner of this toolkit")
        return RunnerProject(name=self.project, bucket=location.split("/", 1)[0])

    def upload(self, runner: RunnerProject, directory: Path, run_id: str) -> str:
        """Zip ``directory`` into the runner's source bucket; the object's key."""
        key = f"{SOURCE_PREFIX}{run_id}.zip"
        with tempfile.TemporaryFile() as archive:
            zip_checkout(directory, archive)
            archive.seek(0)
            self._call(f"upload the checkout to s3://{runner.bucket}/{key}",
                       f"s3:PutObject on {runner.bucket}/{SOURCE_PREFIX}*",
                       lambda: self.clients.client("s3").put_object(Bucket=runner.bucket, Key=key, Body=archive))
        return key

    def start(self, directory: Path, arguments: Sequence[str], *, timeout_seconds: float) -> str:
        """Upload the checkout and start one build of ``arguments``; the build's id."""
        runner = self.describe()
        run_id = self.new_id()
        key = self.upload(runner, directory, run_id)
        minutes = min(MAX_BUILD_MINUTES, max(MIN_BUILD_MINUTES, math.ceil(timeout_seconds / 60)))
        answer = self._call(
            f"start the checks runner {self.project}", f"codebuild:StartBuild on project {self.project}",
            lambda: self.clients.client("codebuild").start_build(
                projectName=self.project, sourceLocationOverride=f"{runner.bucket}/{key}",
                environmentVariablesOverride=[{"name": ARGS_VARIABLE, "value": encode_arguments(arguments),
                                               "type": "PLAINTEXT"}],
                timeoutInMinutesOverride=minutes, idempotencyToken=run_id))
        build = member(answer, "build", client=self.clients.client("codebuild"), operation="StartBuild")
        if not build.get("id"):
            raise RemoteChecksError(f"StartBuild of {self.project} answered without a build id")
        return str(build["id"])

    def follow(self, build_id: str, *, timeout_seconds: float, on_log: Callable[[str], None],
               on_note: Callable[[str], None]) -> RemoteResult:
        """Stream the build's log to ``on_log`` until it ends or ``timeout_seconds`` pass (then it is stopped)."""
        deadline = self.clock() + timeout_seconds
        stream = _Stream()
        while True:
            try:
                build = self._build(build_id)
                self._read_logs(build, stream, on_log, on_note)
            except OutOfTime:  # the command's deadline passed inside a read: as the timeout below
                build = {"buildStatus": "IN_PROGRESS"}
                deadline = self.clock()
            if build.get("buildStatus") != "IN_PROGRESS":
                for _ in range(FINAL_LOG_ROUNDS):
                    self.sleep(min(self.poll_seconds, 2.0))
                    self._read_logs(build, stream, on_log, on_note)
                return result_of(build)
            now = self.clock()
            if now >= deadline:
                problem = self.stop(build_id)
                stopped = f"; {problem}" if problem else "; the remote build was stopped"
                return RemoteResult(build_id=build_id, status="IN_PROGRESS", exit_code=2,
                                    reason=f"timed out after {timeout_seconds:g} s (--timeout){stopped}")
            self.sleep(min(self.poll_seconds, deadline - now))  # never past the deadline

    def stop(self, build_id: str) -> str | None:
        """Stop the build; None when stopped, else one line saying why it could not be."""
        clients = self.stop_clients or self.clients
        try:
            self._call(f"stop the remote build {build_id}", f"codebuild:StopBuild on project {self.project}",
                       lambda: clients.client("codebuild").stop_build(id=build_id))
        except (RemoteChecksError, OutOfTime) as exc:
            return str(exc)
        return None

    def _build(self, build_id: str) -> dict[str, Any]:
        answer = self._call(f"read the remote build {build_id}", f"codebuild:BatchGetBuilds on project {self.project}",
                            lambda: self.clients.client("codebuild").batch_get_builds(ids=[build_id]))
        builds = answer.get("builds") or []
        if not builds:
            raise RemoteChecksError(f"the remote build {build_id} is gone (BatchGetBuilds found none)")
        return dict(builds[0])

    def _read_logs(self, build: dict[str, Any], stream: _Stream, on_log: Callable[[str], None],
                   on_note: Callable[[str], None]) -> None:
        """Every new event of the build's stream, in order; a stream not yet created is read on the next poll."""
        logs = build.get("logs") or {}
        stream.group = stream.group or logs.get("groupName")
        stream.name = stream.name or logs.get("streamName")
        if not stream.group or not stream.name:
            return
        client = self.clients.client("logs")
        while True:
            request: dict[str, Any] = {"logGroupName": stream.group, "logStreamName": stream.name,
                                       "startFromHead": True}
            if stream.token:
                request["nextToken"] = stream.token
            try:
                page = client.get_log_events(**request)
            except call_errors() as exc:
                if is_not_found(exc):
                    return  # CodeBuild creates the stream when the build's container starts
                if not stream.note_sent:  # the result does not depend on the log: go on without it
                    stream.note_sent = True
                    needs = (f"; needs logs:GetLogEvents on log group {stream.group}" if is_access_denied(exc) else "")
                    on_note(f"cannot read the remote build's log: {aws_reason(exc)}{needs}")
                return
            for event in page.get("events") or []:
                on_log(str(event.get("message", "")))
            token = page.get("nextForwardToken")
            if not token or token == stream.token:
                return
            stream.token = token


def result_of(build: dict[str, Any]) -> RemoteResult:
    """The exit code of a finished build: the remote command's recorded one, else 2 with why."""
    build_id, status = str(build.get("id", "")), str(build.get("buildStatus", ""))
    if status == "SUCCEEDED":
        exported = {v.get("name"): v.get("value") for v in build.get("exportedEnvironmentVariables") or []}
        value = exported.get(EXIT_CODE_VARIABLE)
        code = int(value) if isinstance(value, str) and value.isdigit() else None
        if code in EXIT_CODES:
            return RemoteResult(build_id=build_id, status=status, exit_code=int(code))
        shown = "missing" if value is None else repr(value)
        return RemoteResult(build_id=build_id, status=status, exit_code=2, reason=(
            f"the remote build recorded no exit code of the check command ({EXIT_CODE_VARIABLE}: {shown})"))
    phase = failed_phase(build)
    reasons = {
        "FAILED": f"the remote build failed{phase} before the check command ran (see its log above)",
        "FAULT": f"the remote build faulted{phase} (a CodeBuild error, not the check's)",
        "TIMED_OUT": f"the remote build timed out after its {build.get('timeoutInMinutes', '?')} minutes",
        "STOPPED": "the remote build was stopped",
    }
    return RemoteResult(build_id=build_id, status=status, exit_code=2,
                        reason=reasons.get(status, f"the remote build ended as {status or 'unknown'}"))


def failed_phase(build: dict[str, Any]) -> str:
    """`` in its <PHASE> phase (<message>)`` for the first phase that did not succeed, else ``""``."""
    for phase in build.get("phases") or []:
        if phase.get("phaseStatus") in ("FAILED", "FAULT", "TIMED_OUT", "CLIENT_ERROR"):
            messages = "; ".join(str(c.get("message")) for c in phase.get("contexts") or [] if c.get("message"))
            return f" in its {phase.get('phaseType')} phase" + (f" ({' '.join(messages.split())})" if messages else "")
    return ""
