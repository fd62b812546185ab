"""Entry point of the ``hpdpd`` console script.

Each subcommand lives in its own module with ``register(subparsers, common)``; the handler it sets as ``func``
returns the exit code. Problems the toolkit anticipates end with one line on stderr, never a traceback: its own errors
(bad input, a malformed answer, a command's deadline), AWS and botocore failures, and a Kubernetes or Prometheus
failure a command did not turn into a row of its report.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from hyperpod_dpd import __version__
from hyperpod_dpd.cli.output import OUTPUT_FORMATS
from hyperpod_dpd.errors import HpdpdError

Register = Callable[[argparse._SubParsersAction, argparse.ArgumentParser], None]


def _registrations() -> list[Register]:
    """The subcommands, in the order ``hpdpd --help`` lists them (imported here to keep ``--version`` fast)."""
    from hyperpod_dpd.cli import checks, cost, plan, preflight, rebalance, rollout, smoke, status, verify, wait

    return [preflight.register, status.register, wait.register, smoke.register, verify.register, rollout.register,
            rebalance.register, checks.register, plan.register, cost.register]


def common_options() -> argparse.ArgumentParser:
    """Options every subcommand takes (``--output``; AWS ones are added by the commands that call AWS)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--output", choices=OUTPUT_FORMATS, default="table", help="table (default) or json")
    return parent


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hpdpd", description="Operate and size disaggregated prefill/decode on SageMaker HyperPod.")
    parser.add_argument("--version", action="version", version=f"hpdpd {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = common_options()
    for register in _registrations():
        register(subparsers, common)
    # `hpdpd checks` runs hpdpd's own parser and entry point (checks run / exec): handed down here rather than
    # imported back by hyperpod_dpd.cli.checks, which this module imports (no import cycle).
    parser.set_defaults(build_parser=build_parser, main=main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except HpdpdError as exc:
        print(f"hpdpd: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hpdpd: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`hpdpd plan ... | head`): no traceback. Python's recipe (docs.python.org/3/library/
        # signal.html, "Note on SIGPIPE"): point stdout at devnull so the interpreter's final flush cannot fail too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except Exception as exc:  # AWS and botocore failures end with one line; anything else is a bug and shows its trace
        from hyperpod_dpd.aws import describe_aws_error

        message = describe_aws_error(exc) or _one_line_reason(exc)
        if message is None:
            raise
        print(f"hpdpd: error: {message}", file=sys.stderr)
        return 2


def _one_line_reason(exc: BaseException) -> str | None:
    """The one-line reason of a Kubernetes or Prometheus failure (:class:`~hyperpod_dpd.ops.kube.KubeError`,
    :class:`~hyperpod_dpd.ops.metrics.MetricsError`), which every one of them carries; None for anything else."""
    reason = getattr(exc, "reason", None)
    if type(exc).__module__.startswith("hyperpod_dpd.ops.") and isinstance(reason, str) and reason:
        return " ".join(reason.split())
    return None


if __name__ == "__main__":
    sys.exit(main())
