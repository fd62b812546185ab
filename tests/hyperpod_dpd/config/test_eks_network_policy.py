"""An adopted cluster and the endpoints' NetworkPolicies: refused unless something enforces them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.config import EnvironmentConfig, parse_environment
from hyperpod_dpd.errors import ConfigError

EXISTING: dict[str, Any] = {
    "cluster_name": "platform-shared",
    "version": "1.34",
    "oidc_provider_arn": "arn:aws:iam::111111111111:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF",
    "kubectl_role_arn": "arn:aws:iam::111111111111:role/platform/eks-kubectl",
    "cluster_security_group_id": "sg-0123456789abcdef0",
}


def _dev(base_configs: dict[str, dict[str, Any]], *, endpoint: dict[str, Any] | None = None,
         **existing: Any) -> EnvironmentConfig:
    data = copy.deepcopy(base_configs["dev"])
    data["eks"] = {"existing": {**EXISTING, **existing}}
    for item in data.get("endpoints") or []:
        item.update(endpoint or {})
    return parse_environment(data, name="dev", source="dev.yaml", base_dir=Path.cwd())


def test_endpoints_with_policies_are_refused_on_an_adopted_cluster_that_may_not_enforce_them(base_configs) -> None:
    # GIVEN dev (one endpoint, NetworkPolicies on by default) adopting a cluster whose vpc-cni it does not manage
    with pytest.raises(ConfigError) as raised:
        _dev(base_configs)
    # THEN one line names the key, the endpoint and the three ways out
    (line,) = str(raised.value).splitlines()
    assert line == (
        "dev.yaml: eks.existing.network_policy_enforced: false: endpoints[0] renders NetworkPolicies, which the adopted "
        "cluster enforces only if its vpc-cni add-on has the configuration value enableNetworkPolicy \"true\": set that "
        "and this key to true, list vpc-cni in manage_addons (hyperpod-dpd then sets it), or set "
        "router.network_policy: false there")


@pytest.mark.parametrize("way_out", [
    {"existing": {"network_policy_enforced": True}},
    {"existing": {"manage_addons": ["vpc-cni"]}},
    {"endpoint": {"router": {"network_policy": False}}},
])
def test_each_way_out_is_accepted(base_configs, way_out: dict[str, Any]) -> None:
    env = _dev(base_configs, endpoint=way_out.get("endpoint"), **way_out.get("existing", {}))
    assert env.eks.existing is not None


def test_an_adopted_cluster_without_endpoints_needs_no_declaration(base_configs) -> None:
    data = copy.deepcopy(base_configs["dev"])
    data["eks"] = {"existing": dict(EXISTING)}
    data.pop("endpoints", None)
    env = parse_environment(data, name="dev", source="dev.yaml", base_dir=Path.cwd())
    assert env.eks.existing is not None and env.eks.existing.network_policy_enforced is False
