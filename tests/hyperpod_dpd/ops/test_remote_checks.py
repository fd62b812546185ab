"""RemoteChecks against botocore's Stubber: the upload and StartBuild a run makes, the log it follows page by page,
and the exit code it ends with (the remote command's, or 2 when the build itself ended the run)."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import ANY, Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.ops.remote_checks import (
    RemoteChecks,
    RemoteChecksError,
    checkout_files,
    decode_arguments,
    refusal,
    zip_checkout,
)

PROJECT = "hpdpd-dev-checks"
BUCKET = "hpdpd-dev-platform-checksrunnersource-0a1b2c3d"
BUILD = f"{PROJECT}:0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
GROUP, STREAM = f"/aws/codebuild/{PROJECT}", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
RUN_ID = "run0001"
COMMAND = ["verify", "--env", "dev", "--endpoint", "llama-3-3-70b", "--probe", "--output", "json"]


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ClientFactory:
    """Real boto3 clients with fake credentials; every call is answered by a Stubber."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_MAX_ATTEMPTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    return ClientFactory(region="us-west-2")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A checkout with the project's files and the directories a run leaves out."""
    root = tmp_path / "checkout"
    for path in ("Makefile", "hyperpod_dpd/__init__.py", "config/dev.yaml", ".venv/bin/python", ".venv-checkov/x",
                 "node_modules/aws-cdk/x.js", "cdk.out/manifest.json", ".git/HEAD", "hyperpod_dpd/__pycache__/a.pyc"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(path)
    (root / "scripts").mkdir()
    (root / "scripts" / "run.sh").write_text("#!/bin/sh\n")
    (root / "scripts" / "run.sh").chmod(0o755)
    return root


@pytest.fixture
def stubs(clients: ClientFactory) -> Iterator[dict[str, Stubber]]:
    stubbers = {name: Stubber(clients.client(name)) for name in ("codebuild", "s3", "logs")}
    for stubber in stubbers.values():
        stubber.activate()
    yield stubbers
    for stubber in stubbers.values():
        stubber.assert_no_pending_responses()
        stubber.deactivate()


def _runner(clients: ClientFactory) -> RemoteChecks:
    return RemoteChecks(clients=clients, project=PROJECT, poll_seconds=0.0, sleep=lambda _: None,
                        new_id=lambda: RUN_ID)


def _started(stubs: dict[str, Stubber]) -> None:
    """The runner's project, the upload and the StartBuild of one run."""
    stubs["codebuild"].add_response("batch_get_projects", {"projects": [{
        "name": PROJECT, "source": {"type": "S3", "location": f"{BUCKET}/sources/checkout.zip"}}]},
        {"names": [PROJECT]})
    stubs["s3"].add_response("put_object", {}, {"Bucket": BUCKET, "Key": f"sources/{RUN_ID}.zip", "Body": ANY})
    stubs["codebuild"].add_response("start_build", {"build": {"id": BUILD}}, {
        "projectName": PROJECT, "sourceLocationOverride": f"{BUCKET}/sources/{RUN_ID}.zip",
        "environmentVariablesOverride": [{"name": "HPDPD_ARGS", "value": json.dumps(COMMAND, separators=(",", ":")),
                                          "type": "PLAINTEXT"}],
        "timeoutInMinutesOverride": 60, "idempotencyToken": RUN_ID})


def _build(status: str, **extra: Any) -> dict[str, Any]:
    return {"builds": [{"id": BUILD, "buildStatus": status, "logs": {"groupName": GROUP, "streamName": STREAM},
                        "timeoutInMinutes": 60, **extra}]}


def _log(stubs: dict[str, Stubber], messages: list[str], token: str, after: str | None = None) -> None:
    expected: dict[str, Any] = {"logGroupName": GROUP, "logStreamName": STREAM, "startFromHead": True}
    if after:
        expected["nextToken"] = after
    stubs["logs"].add_response("get_log_events", {
        "events": [{"timestamp": 1, "message": m, "ingestionTime": 1} for m in messages],
        "nextForwardToken": token, "nextBackwardToken": "b"}, expected)


def _finished(stubs: dict[str, Stubber], status: str, token: str = "f1", **extra: Any) -> None:
    """A build that was already done at the first poll: the stream read once, then once per final round."""
    stubs["codebuild"].add_response("batch_get_builds", _build(status, **extra), {"ids": [BUILD]})
    _log(stubs, ["done\n"], token)
    _log(stubs, [], token, after=token)
    for _ in range(2):
        _log(stubs, [], token, after=token)


def _run(clients: ClientFactory, checkout: Path) -> tuple[Any, list[str], list[str]]:
    runner = _runner(clients)
    lines: list[str] = []
    notes: list[str] = []
    build_id = runner.start(checkout, COMMAND, timeout_seconds=3600)
    return runner.follow(build_id, timeout_seconds=3600, on_log=lines.append, on_note=notes.append), lines, notes


@pytest.mark.parametrize("code", [0, 1, 2])
def test_a_run_ends_with_the_remote_commands_exit_code(clients, stubs, checkout, code: int) -> None:
    # GIVEN a build that succeeded and recorded the check command's exit code
    _started(stubs)
    _finished(stubs, "SUCCEEDED", exportedEnvironmentVariables=[{"name": "HPDPD_EXIT_CODE", "value": str(code)}])
    # WHEN the run is started and followed
    result, lines, notes = _run(clients, checkout)
    # THEN it ends with exactly that code, nothing to explain, and the build's log was passed on
    assert (result.build_id, result.status, result.exit_code, result.reason) == (BUILD, "SUCCEEDED", code, "")
    assert lines == ["done\n"] and notes == []


@pytest.mark.parametrize(("value", "shown"), [(None, "missing"), ("130", "'130'"), ("", "''")])
def test_a_succeeded_build_without_a_usable_exit_code_is_2(clients, stubs, checkout, value: str | None,
                                                           shown: str) -> None:
    # GIVEN a build that succeeded but recorded no exit code of 0, 1 or 2 (the sources cannot tell what ran)
    _started(stubs)
    exported = [] if value is None else [{"name": "HPDPD_EXIT_CODE", "value": value}]
    _finished(stubs, "SUCCEEDED", exportedEnvironmentVariables=exported)
    result, _, _ = _run(clients, checkout)
    # THEN the run fails safe: 2, saying what was recorded
    assert result.exit_code == 2
    assert result.reason == f"the remote build recorded no exit code of the check command (HPDPD_EXIT_CODE: {shown})"


@pytest.mark.parametrize(("status", "phases", "reason"), [
    ("FAILED", [{"phaseType": "INSTALL", "phaseStatus": "FAILED", "contexts": [
        {"statusCode": "COMMAND_EXECUTION_ERROR", "message": "Error while executing command: make setup. Reason: "
                                                             "exit status 2"}]}],
     "the remote build failed in its INSTALL phase (Error while executing command: make setup. Reason: exit status 2) "
     "before the check command ran (see its log above)"),
    ("FAULT", [{"phaseType": "PROVISIONING", "phaseStatus": "FAULT", "contexts": [
        {"message": "CodeBuild is experiencing issues"}]}],
     "the remote build faulted in its PROVISIONING phase (CodeBuild is experiencing issues) (a CodeBuild error, not "
     "the check's)"),
    ("TIMED_OUT", [], "the remote build timed out after its 60 minutes"),
    ("STOPPED", [], "the remote build was stopped"),
], ids=["failed", "fault", "timed out", "stopped"])
def test_a_build_that_ended_itself_is_2_with_why(clients, stubs, checkout, status: str, phases: list[Any],
                                                 reason: str) -> None:
    # GIVEN a build that ended without running the check command to its end
    _started(stubs)
    _finished(stubs, status, phases=phases,
              exportedEnvironmentVariables=[{"name": "HPDPD_EXIT_CODE", "value": "0"}])
    result, _, _ = _run(clients, checkout)
    # THEN the run ends with 2 and one line saying why (a recorded 0 does not count when the build did not succeed)
    assert (result.status, result.exit_code, result.reason) == (status, 2, reason)


def test_the_log_is_followed_across_pages_and_polls(clients, stubs, checkout) -> None:
    # GIVEN a build in progress at the first poll, whose stream holds two pages, then succeeds with exit 1
    _started(stubs)
    stubs["codebuild"].add_response("batch_get_builds", _build("IN_PROGRESS"), {"ids": [BUILD]})
    stubs["logs"].add_client_error("get_log_events", "ResourceNotFoundException", "The specified log stream does "
                                   "not exist.", http_status_code=400)
    stubs["codebuild"].add_response("batch_get_builds", _build("IN_PROGRESS"), {"ids": [BUILD]})
    _log(stubs, ["make setup\n", "ok\n"], "t1")
    _log(stubs, ['{"ok": false}\n'], "t2", after="t1")
    _log(stubs, [], "t2", after="t2")
    stubs["codebuild"].add_response("batch_get_builds", _build(
        "SUCCEEDED", exportedEnvironmentVariables=[{"name": "HPDPD_EXIT_CODE", "value": "1"}]), {"ids": [BUILD]})
    _log(stubs, ["late\n"], "t3", after="t2")
    _log(stubs, [], "t3", after="t3")
    _log(stubs, [], "t3", after="t3")
    _log(stubs, [], "t3", after="t3")
    # WHEN it is followed
    result, lines, notes = _run(clients, checkout)
    # THEN every line arrives once, in order (a stream not created yet is read on the next poll), and the code is 1
    assert lines == ["make setup\n", "ok\n", '{"ok": false}\n', "late\n"]
    assert result.exit_code == 1 and notes == []


def test_a_denied_log_read_is_one_note_and_the_result_still_counts(clients, stubs, checkout) -> None:
    # GIVEN the caller may not read the runner's log
    _started(stubs)
    stubs["codebuild"].add_response("batch_get_builds", _build(
        "SUCCEEDED", exportedEnvironmentVariables=[{"name": "HPDPD_EXIT_CODE", "value": "0"}]), {"ids": [BUILD]})
    for _ in range(3):
        stubs["logs"].add_client_error("get_log_events", "AccessDeniedException", "not authorized to perform "
                                       "logs:GetLogEvents", http_status_code=400)
    result, lines, notes = _run(clients, checkout)
    # THEN one note names the missing permission, and the exit code is still the remote command's
    assert result.exit_code == 0 and lines == []
    assert notes == [f"cannot read the remote build's log: GetLogEvents: AccessDeniedException: not authorized to "
                     f"perform logs:GetLogEvents (the caller lacks this permission); needs logs:GetLogEvents on log "
                     f"group {GROUP}"]


def test_a_denied_start_is_one_line_naming_the_permission(clients, stubs, checkout) -> None:
    # GIVEN StartBuild is denied
    stubs["codebuild"].add_response("batch_get_projects", {"projects": [{
        "name": PROJECT, "source": {"type": "S3", "location": f"{BUCKET}/sources/checkout.zip"}}]}, {"names": [PROJECT]})
    stubs["s3"].add_response("put_object", {}, {"Bucket": BUCKET, "Key": f"sources/{RUN_ID}.zip", "Body": ANY})
    stubs["codebuild"].add_client_error("start_build", "AccessDeniedException", "not authorized to perform "
                                        "codebuild:StartBuild", http_status_code=400)
    # WHEN the run starts
    with pytest.raises(RemoteChecksError) as caught:
        _runner(clients).start(checkout, COMMAND, timeout_seconds=3600)
    # THEN it stops with one line naming the call, the answer and the permission
    assert str(caught.value) == (
        f"cannot start the checks runner {PROJECT}: StartBuild: AccessDeniedException: not authorized to perform "
        f"codebuild:StartBuild (the caller lacks this permission); needs codebuild:StartBuild on project {PROJECT}")


def test_a_missing_runner_says_which_stack_creates_it(clients, stubs, checkout) -> None:
    stubs["codebuild"].add_response("batch_get_projects", {"projects": [], "projectsNotFound": [PROJECT]},
                                    {"names": [PROJECT]})
    with pytest.raises(RemoteChecksError, match=f"no checks runner {PROJECT}: deploy the environment's platform"):
        _runner(clients).start(checkout, COMMAND, timeout_seconds=3600)


def test_the_total_timeout_stops_the_build(clients, stubs) -> None:
    # GIVEN a build that stays in progress past the run's timeout (the clock moves 100 s per poll)
    ticks = iter(range(0, 10_000, 100))
    runner = RemoteChecks(clients=clients, project=PROJECT, poll_seconds=0.0, sleep=lambda _: None,
                          clock=lambda: float(next(ticks)))
    for _ in range(3):
        stubs["codebuild"].add_response("batch_get_builds", {"builds": [{"id": BUILD, "buildStatus": "IN_PROGRESS"}]},
                                        {"ids": [BUILD]})
    stubs["codebuild"].add_response("stop_build", {"build": {"id": BUILD, "buildStatus": "STOPPED"}}, {"id": BUILD})
    # WHEN it is followed with a timeout of 250 s
    result = runner.follow(BUILD, timeout_seconds=250, on_log=lambda _: None, on_note=lambda _: None)
    # THEN the build is stopped and the run ends with 2, saying so
    assert (result.exit_code, result.reason) == (2, "timed out after 250 s (--timeout); the remote build was stopped")


def test_stop_reports_a_build_it_could_not_stop(clients, stubs) -> None:
    stubs["codebuild"].add_client_error("stop_build", "AccessDeniedException", "no", http_status_code=400)
    assert _runner(clients).stop(BUILD) == (
        f"cannot stop the remote build {BUILD}: StopBuild: AccessDeniedException: no (the caller lacks this "
        f"permission); needs codebuild:StopBuild on project {PROJECT}")


def test_the_zip_holds_the_checkout_without_environments_caches_or_build_output(checkout: Path, tmp_path: Path) -> None:
    # WHEN the checkout is zipped
    with (tmp_path / "run.zip").open("wb") as target:
        count = zip_checkout(checkout, target)
    # THEN it holds the project's files, the skipped directories are left out, and scripts stay executable
    with zipfile.ZipFile(tmp_path / "run.zip") as archive:
        names = sorted(archive.namelist())
        mode = archive.getinfo("scripts/run.sh").external_attr >> 16
    assert names == ["Makefile", "config/dev.yaml", "hyperpod_dpd/__init__.py", "scripts/run.sh"] and count == 4
    assert mode & 0o111
    assert [p.name for p in checkout_files(checkout / "node_modules")] == ["x.js"]  # skipped below the root only


def test_an_empty_checkout_is_refused(tmp_path: Path) -> None:
    # GIVEN a directory that holds only what a run leaves out
    (tmp_path / "empty" / ".venv").mkdir(parents=True)
    (tmp_path / "empty" / ".venv" / "python").write_text("")
    # THEN zipping it is refused rather than starting a build that has nothing to run
    with (tmp_path / "x.zip").open("wb") as target, pytest.raises(RemoteChecksError, match="no files to run"):
        zip_checkout(tmp_path / "empty", target)


@pytest.mark.parametrize(("raw", "message"), [
    (None, "HPDPD_ARGS is not set: start the runner with 'hpdpd checks run'"),
    ("verify --env dev", "HPDPD_ARGS: 'verify --env dev': must be a JSON array of strings"),
    ('["verify", 1]', "HPDPD_ARGS: '[\"verify\", 1]': must be a JSON array of strings"),
])
def test_the_command_must_be_a_json_array_of_strings(raw: str | None, message: str) -> None:
    with pytest.raises(RemoteChecksError) as caught:
        decode_arguments(raw)
    assert str(caught.value) == message


@pytest.mark.parametrize(("command", "env", "profile", "expected"), [
    ("verify", "dev", None, None),
    ("rollout", "dev", None, None),
    ("preflight", "dev", None, "'preflight' is not a check command; allowed: rollout promote|status|abort, verify, "
                               "smoke, status, wait"),
    ("checks", "dev", None, "'checks' is not a check command; allowed: rollout promote|status|abort, verify, smoke, "
                            "status, wait"),
    ("smoke", "prod", None, "--env 'prod': this runner checks only environment 'dev'"),
    ("status", "dev", "admin", "--profile 'admin': the runner calls AWS as its own role; drop --profile"),
])
def test_the_runner_refuses_all_but_its_own_check_commands(command: str, env: str, profile: str | None,
                                                            expected: str | None) -> None:
    assert refusal(command, env=env, runner_env="dev", profile=profile) == expected


def test_a_read_the_deadline_cuts_short_still_stops_the_build(clients: ClientFactory,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from hyperpod_dpd.ops.deadline import Deadline
    from tests.fakes.fault_proxy import serve

    # GIVEN a CodeBuild endpoint that never answers BatchGetBuilds, a run with 1 s left, and StopBuild reachable with
    # the grace period the command gives it
    with serve("http://127.0.0.1:9") as proxy, Stubber(clients.client("codebuild")) as stop:
        proxy.set("stall")
        stop.add_response("stop_build", {"build": {"id": BUILD, "buildStatus": "STOPPED"}}, {"id": BUILD})
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        runner = RemoteChecks(clients=ClientFactory(region="us-west-2", deadline=Deadline(seconds=1.0)),
                              stop_clients=clients, project=PROJECT, poll_seconds=0.1)
        started = time.monotonic()
        # WHEN the build is followed
        result = runner.follow(BUILD, timeout_seconds=1.0, on_log=lambda _: None, on_note=lambda _: None)
        elapsed = time.monotonic() - started
        stop.assert_no_pending_responses()
    # THEN the run ends at its deadline with 2, and the remote build was stopped, not left running
    assert (result.exit_code, result.reason) == (2, "timed out after 1 s (--timeout); the remote build was stopped")
    assert elapsed < 3.0
