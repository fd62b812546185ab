"""Ingress CIDR lists judged by the address space they cover (hyperpod_dpd.config.network.public_exposure): a list
that admits more publicly routable addresses than one /8 (IPv4) or /32 (IPv6) is public. Production refuses it for
the EKS API (``eks.public_access_cidrs``) and for the router NetworkPolicy (``endpoints[].router.allowed_cidrs``);
other environments warn."""

from __future__ import annotations

import ipaddress
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.catalogue.addresses import GLOBAL_UNICAST_IPV6, NON_PUBLIC_IPV4, NON_PUBLIC_IPV6
from hyperpod_dpd.config import load_environment
from hyperpod_dpd.config.network import public_cidrs_problem, public_exposure
from hyperpod_dpd.errors import ConfigError

ALL_IPV4 = ["0.0.0.0/1", "128.0.0.0/1"]
# 2^32 minus the blocks the internet cannot send from (private, shared, loopback, link-local, documentation,
# benchmarking, multicast, reserved), computed from the registry's blocks, not from the code under test.
PUBLIC_IPV4 = 2**32 - sum(ipaddress.IPv4Network(n).num_addresses for n in NON_PUBLIC_IPV4)


# -- the measure ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cidrs", [["0.0.0.0/0"], ALL_IPV4, ["0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2", "192.0.0.0/2"],
                                   ["0.0.0.0/0", "0.0.0.0/1", "10.0.0.0/8"]],
                         ids=["the literal", "two halves", "four quarters", "overlapping"])
def test_every_spelling_of_all_of_ipv4_covers_the_same_public_addresses(cidrs: list[str]) -> None:
    # GIVEN a list that covers all of IPv4, however written
    # WHEN its exposure is measured
    [exposure] = public_exposure(cidrs)
    # THEN the networks count once, merged, and only the publicly routable part of them counts
    assert (exposure.version, exposure.public_addresses, exposure.public) == (4, PUBLIC_IPV4, True)


@pytest.mark.parametrize(("cidrs", "public"), [
    (["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"], False),  # private and shared space only
    (["17.0.0.0/8"], False),  # one organisation's /8: at the threshold, not above it
    (["17.0.0.0/8", "8.8.8.8/32"], True),  # one address more than a /8
    (["16.0.0.0/7"], True),
    (["10.0.0.0/7"], False),  # 10/8 is private, so 11/8 alone is public: exactly a /8
    (["203.0.113.0/24", "198.51.100.0/24"], False),
])
def test_the_threshold_is_more_public_addresses_than_one_slash_8(cidrs: list[str], public: bool) -> None:
    assert (public_cidrs_problem(cidrs) is not None) is public


def test_ipv6_is_judged_by_its_global_unicast_space() -> None:
    # GIVEN all of IPv6, the documentation prefix and one ISP-sized block
    # THEN all of IPv6 is public, the documentation prefix admits no one, and a /32 is at the threshold
    assert public_cidrs_problem(["::/0"]) is not None
    assert public_exposure(["2001:db8::/32"])[0].public_addresses == 0
    assert public_cidrs_problem(["2600:1f00::/32"]) is None
    assert public_cidrs_problem(["2600:1f00::/31"]) is not None


@pytest.mark.parametrize(("blocks", "inside"), [(NON_PUBLIC_IPV4, "0.0.0.0/0"), (NON_PUBLIC_IPV6, GLOBAL_UNICAST_IPV6)])
def test_the_catalogues_non_public_blocks_are_disjoint_so_their_addresses_add_up(blocks: tuple[str, ...],
                                                                               inside: str) -> None:
    networks = [ipaddress.ip_network(b) for b in blocks]
    space = ipaddress.ip_network(inside)
    assert all(not a.overlaps(b) for i, a in enumerate(networks) for b in networks[i + 1:])  # type: ignore[arg-type]
    assert all(n.subnet_of(space) for n in networks)  # type: ignore[arg-type]


def test_each_family_is_measured_on_its_own() -> None:
    exposures = public_exposure(["198.51.100.0/24", "::/0"])
    assert [(e.version, e.public) for e in exposures] == [(4, False), (6, True)]


# -- the EKS API endpoint -----------------------------------------------------------------------------------------

def _public_api(cidrs: list[str]) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        data["eks"].update(endpoint_access="public_and_private", public_access_cidrs=cidrs)
    return mutate


def _refusal(config_dir: Path, env: str) -> str:
    with pytest.raises(ConfigError) as raised:
        load_environment(env, config_dir)
    message = str(raised.value)
    assert len(message.splitlines()) == 1, message
    return message.split(f"{env}.yaml: ", 1)[1]


@pytest.mark.parametrize("cidrs", [ALL_IPV4, ["0.0.0.0/0"], ["1.0.0.0/8", "2.0.0.0/8"]],
                         ids=["two halves", "the literal", "two slash 8s"])
def test_production_refuses_a_public_api_however_its_cidrs_are_spelled(
        write_config: Callable[..., Path], cidrs: list[str]) -> None:
    # GIVEN production with a public API endpoint open to a share of the internet
    # WHEN it loads
    message = _refusal(write_config(_public_api(cidrs), env="prod"), "prod")
    # THEN one line refuses the CIDRs, whichever check (the literal or the coverage) sees them
    assert message.startswith(f"eks.public_access_cidrs: {cidrs!r}: a production API endpoint must be private or "
                              "restricted to known CIDRs"), message


def test_production_keeps_a_public_api_restricted_to_known_ranges(write_config: Callable[..., Path]) -> None:
    env = load_environment("prod", write_config(_public_api(["198.51.100.0/24", "203.0.113.0/24"]), env="prod"))
    assert env.eks.public_access_cidrs == ("198.51.100.0/24", "203.0.113.0/24")
    assert [w for w in env.warnings() if w.path == "eks.public_access_cidrs"] == []


def test_another_environment_loads_a_public_api_with_a_warning(write_config: Callable[..., Path]) -> None:
    # GIVEN dev with all of IPv4 as its API CIDRs
    env = load_environment("dev", write_config(_public_api(ALL_IPV4)))
    # THEN it loads, and its warnings name the field and the share of the internet it admits
    [warning] = [w for w in env.warnings() if w.path == "eks.public_access_cidrs"]
    assert warning.value == ALL_IPV4
    assert warning.message.startswith("the Kubernetes API is open to the internet: together they admit "
                                      f"{PUBLIC_IPV4:,} publicly routable IPv4 addresses")


def test_a_private_endpoint_has_no_public_cidrs_to_judge() -> None:
    env = load_environment("prod")
    assert env.eks.endpoint_access == "private" and env.eks.public_access_problem() is None


# -- the router NetworkPolicy ----------------------------------------------------------------------------------------

def _router_cidrs(cidrs: list[str], *, production: bool = False) -> Callable[[dict[str, Any]], None]:
    """dev's endpoint admitting ``cidrs`` to its router; with ``production``, dev made a production environment (its
    alert guards switched off with a reason, as the alerts section allows)."""
    def mutate(data: dict[str, Any]) -> None:
        data["endpoints"][0].setdefault("router", {})["allowed_cidrs"] = cidrs
        if production:
            data.update(production=True, removal_policy="retain", termination_protection=True)
            data["alerts"] = {"no_log_alarm_reason": "a test environment", "no_subscribers_reason": "a test environment"}
    return mutate


def test_production_refuses_a_router_open_to_the_internet(write_config: Callable[..., Path]) -> None:
    message = _refusal(write_config(_router_cidrs(ALL_IPV4, production=True)), "dev")
    assert message.startswith(f"endpoints[0].router.allowed_cidrs: {ALL_IPV4!r}: a production router must admit "
                              "known sources only: together they admit"), message


def test_production_keeps_a_router_restricted_to_the_vpc(write_config: Callable[..., Path]) -> None:
    env = load_environment("dev", write_config(_router_cidrs(["10.192.0.0/16", "10.0.0.0/8"], production=True)))
    assert env.production and env.endpoints[0].router.allowed_cidrs == ("10.192.0.0/16", "10.0.0.0/8")


def test_another_environment_renders_a_public_router_with_a_warning(write_config: Callable[..., Path]) -> None:
    # GIVEN dev's endpoint admitting all of IPv4 to its router
    env = load_environment("dev", write_config(_router_cidrs(["0.0.0.0/0"])))
    # WHEN its warnings are read
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = [w for w in env.endpoints[0].warnings() if w.path == "router.allowed_cidrs"]
    # THEN one warning names the field and what it admits
    assert [(w.value, w.message.split(":")[0]) for w in found] == [
        (["0.0.0.0/0"], "the router NetworkPolicy admits the internet")]
