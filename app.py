#!/usr/bin/env python3
"""CDK entry point: one stage per environment in config/ (``cdk deploy "dev/*"`` deploys dev)."""

import sys
from pathlib import Path

from hyperpod_dpd.stacks.application import main

sys.exit(main(Path(__file__).resolve().parent))
