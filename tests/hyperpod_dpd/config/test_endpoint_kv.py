"""``kv_cache`` of an endpoint and ``hyperpod.tiered_storage`` (docs/kv-cache.md): the L2 backends each operator
release honours (hyperpod_dpd.catalogue.kv_tiers), the cluster setting ``tieredstorage`` needs, and the caveats of the
managed tier, each refusal in one line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.catalogue.kv_tiers import REDIS_ISSUE_URL, backend_refusal
from hyperpod_dpd.catalogue.operator import DPD_MINIMUM_OPERATOR, OPERATOR_RELEASES, supports
from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.endpoint_checks import environment_warnings
from hyperpod_dpd.config.hyperpod import TieredStorage
from hyperpod_dpd.errors import ConfigError

TIERED = {"l2": {"backend": "tieredstorage"}}
REDIS = {"l2": {"backend": "redis", "url": "redis://cache.internal:6379"}}


def _kv(kv_cache: dict[str, Any], *, tiered: dict[str, Any] | None = None,
        **endpoint: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        data["endpoints"][0]["kv_cache"] = kv_cache
        data["endpoints"][0].update(endpoint)
        if tiered is not None:
            data["hyperpod"]["tiered_storage"] = tiered
    return mutate


def _one_line(config_dir: Path, env: str = "dev") -> str:
    with pytest.raises(ConfigError) as raised:
        load_environment(env, config_dir)
    message = str(raised.value)
    assert len(message.splitlines()) == 1, message
    return message.split(f"{env}.yaml: ", 1)[1]


def test_tiered_storage_with_the_cluster_setting_loads_and_warns_of_its_caveats(write_config: Callable[..., Path]) -> None:
    # GIVEN dev with a tieredstorage L2 and the cluster's tiered storage at 20% of instance memory
    config = load_environment("dev", write_config(_kv(TIERED, tiered={"memory_percent": 20})))
    # THEN it loads, the cluster renders mode Enable at 20%
    assert config.hyperpod.tiered_storage == TieredStorage(memory_percent=20)
    assert config.hyperpod.tiered_storage.mode == "Enable"
    kv = config.endpoints[0].kv_cache
    assert kv is not None and kv.l2 is not None and kv.l2.backend == "tieredstorage"
    # AND the caveats are one warning on the endpoint's backend: shared without isolation, unencrypted at rest
    warnings = [w for w in environment_warnings(config) if w.path == "endpoints[0].kv_cache.l2.backend"]
    assert len(warnings) == 1
    assert "shared by every deployment" in warnings[0].message and "not encrypted at rest" in warnings[0].message


def test_tiered_storage_without_the_cluster_setting_is_one_line_naming_both_fields(
        write_config: Callable[..., Path]) -> None:
    message = _one_line(write_config(_kv(TIERED)))
    assert message.startswith("endpoints[0].kv_cache.l2.backend: 'tieredstorage': needs the cluster's tiered storage")
    assert "hyperpod.tiered_storage is not set" in message and "hyperpod.tiered_storage.memory_percent" in message


@pytest.mark.parametrize(("tiered", "state"), [({"enabled": False}, "is disabled"),
                                               ({"memory_percent": 0}, "gives it 0% of instance memory")])
def test_tiered_storage_on_a_cluster_tier_without_memory_is_refused(write_config: Callable[..., Path],
                                                                     tiered: dict[str, Any], state: str) -> None:
    assert f"hyperpod.tiered_storage {state}" in _one_line(write_config(_kv(TIERED, tiered=tiered)))


def test_redis_on_operator_3_2_is_one_line_with_the_reason_and_the_issue(write_config: Callable[..., Path]) -> None:
    def on_3_2(data: dict[str, Any]) -> None:
        _kv(REDIS)(data)
        data["operator"]["version"] = "3.2"
    message = _one_line(write_config(on_3_2))
    assert message == ("endpoints[0].kv_cache.l2.backend: 'redis': is ignored by operator 3.2: it wires the managed "
                       "tiered-storage connector instead (LMCACHE_REMOTE_URL=sagemaker-hyperpod://...) and drops the "
                       f"Redis URL, see {REDIS_ISSUE_URL}; use 'tieredstorage'")


@pytest.mark.parametrize("release", [r for r in OPERATOR_RELEASES if supports(r, DPD_MINIMUM_OPERATOR)])
def test_redis_is_refused_on_every_release_no_source_confirms(release: str) -> None:
    # THEN no DPD release is confirmed to honour redis; tieredstorage is honoured from the DPD minimum on
    assert REDIS_ISSUE_URL in (backend_refusal("redis", release) or "")
    assert backend_refusal("tieredstorage", release) is None


def test_production_refuses_the_unaccepted_caveats_and_takes_an_explicit_acceptance(
        write_config: Callable[..., Path]) -> None:
    # GIVEN dev made a production environment, with the cluster's tiered storage and a tieredstorage L2
    def production(kv_cache: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
        def mutate(data: dict[str, Any]) -> None:
            _kv(kv_cache, tiered={"memory_percent": 20})(data)
            data.update(production=True, removal_policy="retain", termination_protection=True)
            data.setdefault("alerts", {}).update(emails=["oncall@example.com"],
                                                 no_log_alarm_reason="the test environment ships no logs")
        return mutate
    message = _one_line(write_config(production(TIERED)))
    # THEN the unaccepted caveats are one refusal; an explicit acceptance loads, without the warning
    assert message.startswith("endpoints[0].kv_cache.l2.accept_shared_unencrypted: false: a production endpoint must "
                              "accept the tier's caveats explicitly")
    accepted = {"l2": {"backend": "tieredstorage", "accept_shared_unencrypted": True}}
    config = load_environment("dev", write_config(production(accepted)))
    assert not [w for w in environment_warnings(config) if "kv_cache" in w.path]


def test_l1_cache_and_kv_cache_together_are_refused(write_config: Callable[..., Path]) -> None:
    message = _one_line(write_config(_kv({"l1": False}, l1_cache=False)))
    assert message == ("endpoints[0].l1_cache: false: is replaced by kv_cache.l1; set one of l1_cache and kv_cache, "
                       "not both")


@pytest.mark.parametrize(("kv_cache", "expected"), [
    ({"l2": {"backend": "redis"}}, "backend 'redis' needs 'url'"),
    ({"l2": {"backend": "tieredstorage", "url": "redis://x:6379"}}, "backend 'tieredstorage' takes no 'url'"),
    ({"l2": {"backend": "memcached"}}, "kv_cache.l2.backend: 'memcached'"),
])
def test_bad_l2_sections_are_one_line(write_config: Callable[..., Path], kv_cache: dict[str, Any], expected: str) -> None:
    assert expected in _one_line(write_config(_kv(kv_cache)))


@pytest.mark.parametrize("percent", [-1, 101])
def test_the_memory_share_is_bounded_by_the_cloudformation_schema(write_config: Callable[..., Path], percent: int) -> None:
    message = _one_line(write_config(_kv({"l1": True}, tiered={"memory_percent": percent})))
    assert message.startswith(f"hyperpod.tiered_storage.memory_percent: {percent}:")


def test_an_enabled_tier_must_state_its_memory_share(write_config: Callable[..., Path]) -> None:
    assert "set memory_percent" in _one_line(write_config(_kv({"l1": True}, tiered={})))


def test_an_override_that_is_not_a_spec_pointer_is_refused_at_load(write_config: Callable[..., Path]) -> None:
    message = _one_line(write_config(_kv({"l1": True}, overrides={"kvCacheSpec.enableL2Cache": True})))
    assert message.startswith("endpoints[0].overrides:") and "must be a JSON pointer into the IEC's spec" in message


@pytest.mark.parametrize("pointer", ["/spec/kvCacheSpec/enableL2Cache", "/spec/kvCacheSpec",
                                     "/spec/kvCacheSpec/cacheConfigFile"])
def test_an_override_of_the_kv_tiers_is_refused_for_kv_cache(write_config: Callable[..., Path], pointer: str) -> None:
    # GIVEN a production environment without tiered storage whose endpoint turns the managed L2 on by override
    def mutate(data: dict[str, Any]) -> None:
        data.update(production=True, removal_policy="retain", termination_protection=True)
        data.setdefault("alerts", {}).update(emails=["oncall@example.com"],
                                             no_log_alarm_reason="the test environment ships no logs")
        data["endpoints"][0]["overrides"] = {pointer: True if pointer.endswith("L2Cache") else {}}
    message = _one_line(write_config(mutate))
    # THEN it is refused in one line pointing at kv_cache, where the cluster and the caveats are checked
    assert message.startswith(f"endpoints[0].overrides['{pointer}']:")
    assert "spec.kvCacheSpec is rendered from kv_cache" in message


@pytest.mark.parametrize(("key", "value"), [("kv_cache", {"l1": False}), ("l1_cache", False)])
def test_turning_l1_off_on_an_operator_that_ignores_it_is_refused(write_config: Callable[..., Path], key: str,
                                                                  value: Any) -> None:
    def mutate(data: dict[str, Any]) -> None:
        data["operator"]["version"] = "3.2"
        data["endpoints"][0][key] = value
    message = _one_line(write_config(mutate))
    field = "kv_cache.l1" if key == "kv_cache" else "l1_cache"
    assert message == (f"endpoints[0].{field}: false: is ignored by operator 3.2: enableL1Cache false is honoured "
                       "from operator 3.3 on (L1 stays on); raise operator.version")


def test_turning_l1_off_from_operator_3_3_loads(write_config: Callable[..., Path]) -> None:
    def mutate(data: dict[str, Any]) -> None:
        data["operator"]["version"] = "3.3"
        data["endpoints"][0]["kv_cache"] = {"l1": False}
    config = load_environment("dev", write_config(mutate))
    kv = config.endpoints[0].kv_cache
    assert kv is not None and kv.l1 is False
