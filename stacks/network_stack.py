"""The network stack of an environment: VPC, subnets and the EFA security group (long-lived, rarely changed)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.infra.efa_network import EfaNetwork
from hyperpod_dpd.infra.platform import build_network


class NetworkStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig, **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        self.network: EfaNetwork = build_network(self, config=config)
