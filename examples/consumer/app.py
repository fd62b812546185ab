#!/usr/bin/env python3
"""A CDK app of its own that adds a HyperPod DPD platform next to its own constructs."""

import aws_cdk as cdk
from stacks.serving import ServingStack

from hyperpod_dpd.config import load_environment
from hyperpod_dpd.errors import exit_on_config_error
from hyperpod_dpd.infra import apply_guardrails, availability_zone_context

# A configuration error ends the app with one line on stderr and exit 2, as hyperpod-dpd's own app.py does.
with exit_on_config_error():
    # ./config/ml-dev.yaml (or $HPDPD_CONFIG_DIR/ml-dev.yaml): validated before any construct exists.
    config = load_environment("ml-dev")
    # Availability zones from the configuration: synthesis needs no AWS credentials and no cdk.context.json entry.
    app = cdk.App(context=availability_zone_context(config))
    ServingStack(app, "Serving", config=config)
    # cdk-nag AwsSolutions and hyperpod-dpd's own rules on every stack of the app; findings fail synthesis.
    apply_guardrails(app, production=config.production)
    app.synth()
