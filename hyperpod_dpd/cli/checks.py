"""``hpdpd checks run --env NAME -- <check command>``: run a check inside the environment's VPC; ``hpdpd checks exec``:
what the runner's build runs.

``run`` uploads the working directory to the environment's checks runner (infra/checks_runner.py, the CodeBuild
project ``hpdpd-<env>-checks``), starts one build of the command given after ``--``, prints the build's log as it
arrives, and exits with the remote command's exit code: 0, 1 or 2 as the command itself (docs/cli.md); 2 when the build
could not start, failed before the command ran, faulted, timed out or was stopped (one line saying why); 130 when
interrupted (Ctrl-C or SIGTERM stop the remote build first).

``exec`` runs inside the runner: it reads the command from ``HPDPD_ARGS`` (a JSON array), refuses anything that is not a
check command of the runner's own environment, and runs it in this process. The refusal guards against mistakes; it is
no security boundary (whoever may start the runner ships the code it runs).
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stderr
from pathlib import Path
from typing import Any

from hyperpod_dpd.aws import add_aws_arguments, factory_from_args
from hyperpod_dpd.cli.output import command_deadline, environment_arguments, load_environment_from_args
from hyperpod_dpd.errors import HpdpdError

INTERRUPTED = 130
STOP_GRACE_SECONDS = 30.0  # StopBuild of a build that outlived --timeout (or was interrupted) may still take this long


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "checks", help="run a check command inside the environment's VPC (the checks runner)",
        description="Run rollout, verify, smoke, status or wait in the environment's checks runner: a CodeBuild "
                    "project inside its VPC, which reaches a private Kubernetes API server.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    run_parser = actions.add_parser(
        "run", help="upload the checkout, run one check command remotely, follow its log, exit with its code",
        usage="hpdpd checks run --env NAME [options] -- COMMAND [ARGS ...]")
    environment_arguments(run_parser)
    add_aws_arguments(run_parser)
    run_parser.add_argument("--timeout", type=float, default=7200.0, metavar="SECONDS",
                            help="how long the whole run may take, setup included: every AWS call, its retries "
                                 "included, ends by then, and the remote build is stopped (default 7200)")
    run_parser.add_argument("--interval", type=float, default=10.0, metavar="SECONDS",
                            help="how often the build's status and log are read (default 10)")
    run_parser.add_argument("--source", type=Path, default=Path("."), metavar="DIR",
                            help="the checkout to run from (default: the current directory)")
    run_parser.add_argument("remote", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                            help="the check command: rollout promote|status|abort, verify, smoke, status or wait")
    run_parser.set_defaults(func=run)
    exec_parser = actions.add_parser("exec", help="(inside the checks runner) run the check command of $HPDPD_ARGS")
    exec_parser.set_defaults(func=exec_command)


def parse_check(arguments: Sequence[str], *, runner_env: str | None,
                build_parser: Callable[[], argparse.ArgumentParser]) -> argparse.Namespace:
    """The command parsed by hpdpd's own parser (``build_parser``, handed down by :mod:`hyperpod_dpd.cli.main`, which
    imports this module: no import back), refused unless it is a check command (one line, exit 2)."""
    from hyperpod_dpd.ops.remote_checks import ALLOWED_TEXT, CHECK_COMMANDS, refusal

    if not arguments:
        raise HpdpdError(f"no check command after '--'; allowed: {ALLOWED_TEXT}")
    if arguments[0] not in CHECK_COMMANDS:  # before the parser: a command it does not know is refused the same way
        raise HpdpdError(refusal(arguments[0], env=None, runner_env=None, profile=None) or "")
    usage = io.StringIO()
    try:
        with redirect_stderr(usage):
            parsed = build_parser().parse_args(list(arguments))
    except SystemExit:  # argparse wrote its usage and one "error:" line: keep that line only
        lines = [line for line in usage.getvalue().splitlines() if line.strip()]
        raise HpdpdError(f"the check command: {lines[-1] if lines else ' '.join(arguments)}") from None
    problem = refusal(parsed.command, env=getattr(parsed, "env", None), runner_env=runner_env,
                      profile=getattr(parsed, "profile", None))
    if problem:
        raise HpdpdError(problem)
    return parsed


def run(args: argparse.Namespace) -> int:
    from hyperpod_dpd.ops.remote_checks import RemoteChecks

    remote = list(args.remote[1:] if args.remote[:1] == ["--"] else args.remote)
    if args.timeout <= 0 or args.interval <= 0:
        raise HpdpdError("--timeout and --interval must be positive")
    env = load_environment_from_args(args)
    parse_check(remote, runner_env=env.name, build_parser=args.build_parser)  # refused here, before anything is uploaded
    if not args.source.is_dir():
        raise HpdpdError(f"--source: {args.source}: not a directory")
    deadline = command_deadline(args.timeout)
    runner = RemoteChecks(clients=factory_from_args(args, default_region=env.region, deadline=deadline),
                          stop_clients=factory_from_args(args, default_region=env.region,
                                                         deadline=deadline.extended(STOP_GRACE_SECONDS)),
                          project=env.checks_project_name, poll_seconds=args.interval)
    build_id: str | None = None
    try:
        with _sigterm_interrupts():
            build_id = runner.start(args.source, remote, timeout_seconds=args.timeout)
            print(f"hpdpd: started {build_id} in {env.checks_project_name}: {' '.join(remote)}", file=sys.stderr)
            result = runner.follow(build_id, timeout_seconds=args.timeout, on_log=_print_log, on_note=_note)
    except KeyboardInterrupt:
        if build_id is None:
            print("hpdpd: interrupted before the remote build started", file=sys.stderr)
        else:
            problem = runner.stop(build_id)
            print(f"hpdpd: interrupted; {problem or f'stopped the remote build {build_id}'}", file=sys.stderr)
        return INTERRUPTED
    if result.reason:
        print(f"hpdpd: error: {result.build_id}: {result.reason}", file=sys.stderr)
    else:
        print(f"hpdpd: {result.build_id}: the check command exited {result.exit_code}", file=sys.stderr)
    return result.exit_code


def exec_command(args: argparse.Namespace) -> int:
    """Inside the runner: the command of ``HPDPD_ARGS``, refused unless a check of the runner's environment."""
    from hyperpod_dpd.ops.remote_checks import ARGS_VARIABLE, ENVIRONMENT_VARIABLE, decode_arguments

    arguments = decode_arguments(os.environ.get(ARGS_VARIABLE))
    runner_env = os.environ.get(ENVIRONMENT_VARIABLE)
    if not runner_env:
        raise HpdpdError(f"{ENVIRONMENT_VARIABLE} is not set: 'hpdpd checks exec' runs only inside a checks runner")
    parse_check(arguments, runner_env=runner_env, build_parser=args.build_parser)
    print(f"hpdpd: running: hpdpd {' '.join(arguments)}", file=sys.stderr)
    return int(args.main(arguments))  # hpdpd itself, handed down by hyperpod_dpd.cli.main


def _print_log(message: str) -> None:
    sys.stdout.write(message if message.endswith("\n") else message + "\n")
    sys.stdout.flush()


def _note(message: str) -> None:
    print(f"hpdpd: {message}", file=sys.stderr)


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (CodeBuild stopping the pipeline's step, a CI cancel) ends the run like Ctrl-C: the build is stopped."""
    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: no handler can be installed
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
