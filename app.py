#!/usr/bin/env python3
"""CDK entry point: one stage per environment in config/ (``cdk deploy "dev/*"`` deploys dev)."""

import sys
from pathlib import Path

from hyperpod_dpd.node_runtime import fit_node_to_machine

fit_node_to_machine()  # before the CDK is imported: jsii starts Node with the environment of that moment

from hyperpod_dpd.stacks.application import main  # noqa: E402 - after the Node options are set

sys.exit(main(Path(__file__).resolve().parent))
