"""``hpdpd checks run`` and ``hpdpd checks exec``: the trigger's exit codes and lines (its AWS calls answered by
botocore's Stubber), the interrupt that stops the remote build, and the runner's refusal of anything but a check."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import ANY, Stubber

from hyperpod_dpd.aws import ClientFactory
from hyperpod_dpd.cli import checks as checks_cli
from hyperpod_dpd.cli import wait as wait_cli
from hyperpod_dpd.cli.main import main

PROJECT = "hpdpd-dev-checks"
BUCKET = "hpdpd-dev-platform-checksrunnersource-0a1b2c3d"
BUILD = f"{PROJECT}:5e6f"
GROUP, STREAM = f"/aws/codebuild/{PROJECT}", "5e6f"


@pytest.fixture
def config_dir(write_config: Callable[..., Path]) -> Path:
    return write_config()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "checkout" / "hpdpd").mkdir(parents=True)
    (tmp_path / "checkout" / "hpdpd" / "__init__.py").write_text("")
    return tmp_path / "checkout"


@pytest.fixture
def stubs(moto_factory: Callable[[Any], ClientFactory]) -> Iterator[dict[str, Stubber]]:
    clients = moto_factory(checks_cli)
    stubbers = {name: Stubber(clients.client(name)) for name in ("codebuild", "s3", "logs")}
    for stubber in stubbers.values():
        stubber.activate()
    yield stubbers
    for stubber in stubbers.values():
        stubber.assert_no_pending_responses()
        stubber.deactivate()


def _start(stubs: dict[str, Stubber], command: list[str]) -> None:
    stubs["codebuild"].add_response("batch_get_projects", {"projects": [{
        "name": PROJECT, "source": {"type": "S3", "location": f"{BUCKET}/sources/checkout.zip"}}]}, {"names": [PROJECT]})
    stubs["s3"].add_response("put_object", {}, {"Bucket": BUCKET, "Key": ANY, "Body": ANY})
    stubs["codebuild"].add_response("start_build", {"build": {"id": BUILD}}, {
        "projectName": PROJECT, "sourceLocationOverride": ANY, "idempotencyToken": ANY, "timeoutInMinutesOverride": 5,
        "environmentVariablesOverride": [{"name": "HPDPD_ARGS", "value": json.dumps(command, separators=(",", ":")),
                                          "type": "PLAINTEXT"}]})


def _build(status: str, code: str | None = None) -> dict[str, Any]:
    exported = [{"name": "HPDPD_EXIT_CODE", "value": code}] if code is not None else []
    return {"builds": [{"id": BUILD, "buildStatus": status, "logs": {"groupName": GROUP, "streamName": STREAM},
                        "exportedEnvironmentVariables": exported, "timeoutInMinutes": 5}]}


def _log(stubs: dict[str, Stubber], messages: list[str], token: str, after: str | None = None) -> None:
    expected: dict[str, Any] = {"logGroupName": GROUP, "logStreamName": STREAM, "startFromHead": True}
    if after:
        expected["nextToken"] = after
    stubs["logs"].add_response("get_log_events", {
        "events": [{"timestamp": 1, "message": m, "ingestionTime": 1} for m in messages], "nextForwardToken": token,
        "nextBackwardToken": "b"}, expected)


def _run(config_dir: Path, checkout: Path, *command: str) -> int:
    return main(["checks", "run", "--env", "dev", "--config-dir", str(config_dir), "--source", str(checkout),
                 "--timeout", "300", "--interval", "0.01", "--", *command])


VERIFY = ["verify", "--env", "dev", "--endpoint", "llama-3-3-70b", "--output", "json"]


@pytest.mark.parametrize("code", ["0", "1", "2"])
def test_run_prints_the_remote_log_and_exits_with_the_remote_code(stubs, config_dir, checkout, code: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the runner runs verify, which prints its report and exits with `code`
    _start(stubs, VERIFY)
    stubs["codebuild"].add_response("batch_get_builds", _build("SUCCEEDED", code), {"ids": [BUILD]})
    _log(stubs, ['{"ok": true}'], "t1")
    for _ in range(3):
        _log(stubs, [], "t1", after="t1")
    # WHEN the trigger runs it
    exit_code = _run(config_dir, checkout, *VERIFY)
    captured = capsys.readouterr()
    # THEN the remote output is on stdout, the exit code is the remote command's, and stderr says what ran
    assert exit_code == int(code)
    assert captured.out == '{"ok": true}\n'
    assert captured.err.splitlines() == [f"hpdpd: started {BUILD} in {PROJECT}: {' '.join(VERIFY)}",
                                         f"hpdpd: {BUILD}: the check command exited {code}"]


def test_a_faulted_build_exits_2_with_one_line(stubs, config_dir, checkout, capsys: pytest.CaptureFixture[str]) -> None:
    _start(stubs, VERIFY)
    stubs["codebuild"].add_response("batch_get_builds", _build("FAULT"), {"ids": [BUILD]})
    _log(stubs, [], "t1")
    for _ in range(3):
        _log(stubs, [], "t1", after="t1")
    exit_code = _run(config_dir, checkout, *VERIFY)
    err = capsys.readouterr().err.splitlines()
    assert exit_code == 2
    assert err[-1] == f"hpdpd: error: {BUILD}: the remote build faulted (a CodeBuild error, not the check's)"


def test_a_denied_start_exits_2_with_the_missing_permission(stubs, config_dir, checkout,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    stubs["codebuild"].add_client_error("batch_get_projects", "AccessDeniedException", "not authorized",
                                        http_status_code=400)
    exit_code = _run(config_dir, checkout, *VERIFY)
    assert exit_code == 2
    assert capsys.readouterr().err == (
        f"hpdpd: error: cannot read the checks runner {PROJECT}: BatchGetProjects: AccessDeniedException: not "
        f"authorized (the caller lacks this permission); needs codebuild:BatchGetProjects on project {PROJECT}\n")


def test_sigterm_stops_the_remote_build_and_exits_130(stubs, config_dir, checkout, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a build in progress whose first log line arrives, and SIGTERM delivered to the trigger as it prints it
    _start(stubs, VERIFY)
    stubs["codebuild"].add_response("batch_get_builds", _build("IN_PROGRESS"), {"ids": [BUILD]})
    _log(stubs, ["make setup\n"], "t1")
    stubs["codebuild"].add_response("stop_build", {"build": {"id": BUILD, "buildStatus": "STOPPED"}}, {"id": BUILD})
    printed = checks_cli._print_log

    def print_then_terminate(message: str) -> None:
        printed(message)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(checks_cli, "_print_log", print_then_terminate)
    before = signal.getsignal(signal.SIGTERM)
    # WHEN the trigger follows the build
    exit_code = _run(config_dir, checkout, *VERIFY)
    # THEN it stops the remote build (StopBuild, asserted by the stub) and exits 130, restoring the handler
    assert exit_code == 130
    assert capsys.readouterr().err.splitlines()[-1] == f"hpdpd: interrupted; stopped the remote build {BUILD}"
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize(("command", "message"), [
    (["preflight", "--env", "dev"], "'preflight' is not a check command; allowed: rollout promote|status|abort, "
                                    "verify, smoke, status, wait"),
    (["verify", "--env", "staging"], "--env 'staging': this runner checks only environment 'dev'"),
    (["status", "--env", "dev", "--profile", "admin"], "--profile 'admin': the runner calls AWS as its own role; "
                                                       "drop --profile"),
    (["rollout", "--env", "dev", "delete", "--endpoint", "x"], "the check command: hpdpd rollout: error: argument "
     "action: invalid choice: 'delete' (choose from 'status', 'promote', 'abort')"),
    ([], "no check command after '--'; allowed: rollout promote|status|abort, verify, smoke, status, wait"),
], ids=["not a check", "another environment", "a profile", "not a rollout action", "nothing"])
def test_run_refuses_a_command_the_runner_would_refuse_before_uploading(config_dir, checkout, command: list[str],
                                                                        message: str,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN the trigger is given a command the runner refuses (no AWS client is created: nothing is uploaded)
    exit_code = _run(config_dir, checkout, *command)
    # THEN it exits 2 with that one line
    assert exit_code == 2 and capsys.readouterr().err == f"hpdpd: error: {message}\n"


@pytest.mark.parametrize(("args", "message"), [
    ('["smoke", "--env", "dev"]', None),
    (json.dumps(["preflight", "--env", "dev"]), "'preflight' is not a check command; allowed: rollout "
                                                "promote|status|abort, verify, smoke, status, wait"),
    (json.dumps(["wait", "--env", "prod", "--for", "cluster"]), "--env 'prod': this runner checks only environment 'dev'"),
    ("wait --env dev", "HPDPD_ARGS: 'wait --env dev': must be a JSON array of strings"),
], ids=["unset environment", "not a check", "another environment", "not JSON"])
def test_exec_refuses_all_but_a_check_of_its_environment(monkeypatch: pytest.MonkeyPatch, args: str,
                                                        message: str | None,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the runner's environment (unset in the first case: exec runs only inside a runner)
    monkeypatch.setenv("HPDPD_ARGS", args)
    if message is None:
        monkeypatch.delenv("HPDPD_CHECKS_ENVIRONMENT", raising=False)
        message = "HPDPD_CHECKS_ENVIRONMENT is not set: 'hpdpd checks exec' runs only inside a checks runner"
    else:
        monkeypatch.setenv("HPDPD_CHECKS_ENVIRONMENT", "dev")
    # WHEN the buildspec's command runs
    exit_code = main(["checks", "exec"])
    # THEN nothing runs: exit 2 with one line
    assert exit_code == 2 and capsys.readouterr().err == f"hpdpd: error: {message}\n"


def test_exec_runs_a_check_command_and_returns_its_exit_code(monkeypatch: pytest.MonkeyPatch, config_dir: Path,
                                                             moto_factory: Callable[[Any], ClientFactory],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the runner of dev and a wait for a cluster that does not exist (moto's empty account)
    moto_factory(wait_cli)
    monkeypatch.setenv("HPDPD_CHECKS_ENVIRONMENT", "dev")
    monkeypatch.setenv("HPDPD_ARGS", json.dumps([
        "wait", "--env", "dev", "--config-dir", str(config_dir), "--for", "cluster", "--timeout", "0.05",
        "--interval", "0.01", "--max-interval", "0.02", "--output", "json"]))
    # WHEN exec runs it
    exit_code = main(["checks", "exec"])
    captured = capsys.readouterr()
    # THEN the command really ran in this process: its report, and its own exit code (1: timed out)
    assert exit_code == 1
    assert json.loads(captured.out)["ok"] is False
    assert captured.err.startswith("hpdpd: running: hpdpd wait --env dev")
