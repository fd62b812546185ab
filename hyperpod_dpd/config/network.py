"""Network section: create an EFA-ready VPC, or adopt an existing one."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from hyperpod_dpd.catalogue.addresses import (
    ADDRESS_BITS,
    GLOBAL_UNICAST_IPV6,
    NON_PUBLIC_IPV4,
    NON_PUBLIC_IPV6,
    PUBLIC_PREFIX_LENGTH,
    PUBLIC_PREFIX_WHY,
)
from hyperpod_dpd.catalogue.zones import check_zone, zone_kind
from hyperpod_dpd.config.base import AvailabilityZone, AvailabilityZoneRef, Cidr, Model, join
from hyperpod_dpd.errors import Issue

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, kw_only=True)
class Exposure:
    """How much of the internet a CIDR list admits, in one address family: more than ``threshold`` publicly routable
    addresses (one ``/<prefix_length>``) is public (hyperpod_dpd.catalogue.addresses)."""

    version: int
    public_addresses: int
    prefix_length: int

    @property
    def threshold(self) -> int:
        return 2 ** (ADDRESS_BITS[self.version] - self.prefix_length)

    @property
    def public(self) -> bool:
        return self.public_addresses > self.threshold

    def describe(self) -> str:
        """``together they admit 3,702,258,688 publicly routable IPv4 addresses (86% of IPv4), more than one /8 ...``"""
        share = 100 * self.public_addresses / 2 ** ADDRESS_BITS[self.version]
        return (f"together they admit {self.public_addresses:,} publicly routable IPv{self.version} addresses "
                f"({share:.2g}% of IPv{self.version}), more than one /{self.prefix_length} ({self.threshold:,}, "
                f"{PUBLIC_PREFIX_WHY[self.version]})")


def _public_blocks(version: int) -> tuple[IpNetwork, tuple[IpNetwork, ...]]:
    """(the family's unicast space, the disjoint blocks inside it that the internet cannot send from)."""
    if version == 4:
        return ipaddress.IPv4Network("0.0.0.0/0"), tuple(ipaddress.IPv4Network(n) for n in NON_PUBLIC_IPV4)
    return ipaddress.IPv6Network(GLOBAL_UNICAST_IPV6), tuple(ipaddress.IPv6Network(n) for n in NON_PUBLIC_IPV6)


def _merged(networks: list[IpNetwork]) -> list[IpNetwork]:
    """The networks merged per family (``ipaddress.collapse_addresses``): disjoint, so their addresses add up."""
    v4 = [n for n in networks if isinstance(n, ipaddress.IPv4Network)]
    v6 = [n for n in networks if isinstance(n, ipaddress.IPv6Network)]
    return [*ipaddress.collapse_addresses(v4), *ipaddress.collapse_addresses(v6)]


def _overlap(a: IpNetwork, b: IpNetwork) -> int:
    """Addresses in both: two CIDR blocks are nested or disjoint, so it is the smaller one or nothing."""
    return min(a.num_addresses, b.num_addresses) if a.version == b.version and a.overlaps(b) else 0


def public_exposure(cidrs: Iterable[str]) -> list[Exposure]:
    """Per address family, the publicly routable addresses ``cidrs`` admit together. The networks are merged first
    (``ipaddress.collapse_addresses``), so overlaps count once and ``[0.0.0.0/1, 128.0.0.0/1]`` is ``0.0.0.0/0``;
    addresses the internet cannot send from (private, shared, loopback, documentation, multicast, reserved) do not
    count, so a list of private ranges is never public however large."""
    by_version: dict[int, list[IpNetwork]] = {}
    for cidr in cidrs:
        network = ipaddress.ip_network(cidr, strict=False)
        by_version.setdefault(network.version, []).append(network)
    found = []
    for version, networks in sorted(by_version.items()):
        space, excluded = _public_blocks(version)
        merged = _merged(networks)
        unicast = sum(_overlap(n, space) for n in merged)
        hidden = sum(_overlap(n, x) for n in merged for x in excluded)
        found.append(Exposure(version=version, public_addresses=unicast - hidden,
                              prefix_length=PUBLIC_PREFIX_LENGTH[version]))
    return found


def public_cidrs_problem(cidrs: Iterable[str]) -> str | None:
    """Why ``cidrs`` admit the public internet (the first family that does), or None."""
    return next((e.describe() for e in public_exposure(cidrs) if e.public), None)


class CreateVpc(Model):
    """A new VPC: small public and EKS subnets per AZ, plus one large pod subnet in the GPU AZ.

    Every pod takes a VPC IP (VPC CNI), so the GPU subnet lives in its own secondary CIDR block.
    """

    cidr: Cidr = "10.192.0.0/16"
    availability_zones: tuple[AvailabilityZone, ...] = Field(min_length=2, max_length=6)
    public_subnet_mask: int = Field(default=24, ge=16, le=28)
    private_subnet_mask: int = Field(default=20, ge=16, le=28)
    gpu_subnet_cidr: Cidr = "10.1.0.0/16"
    nat_gateways: int = Field(default=1, ge=1, le=6)
    flow_logs: bool = True

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        vpc = ipaddress.IPv4Network(self.cidr)
        gpu = ipaddress.IPv4Network(self.gpu_subnet_cidr)
        if vpc.overlaps(gpu):
            yield Issue(join(path, "gpu_subnet_cidr"), self.gpu_subnet_cidr,
                        f"must not overlap the VPC CIDR {self.cidr}; it is added as a secondary CIDR block")
        if not (16 <= gpu.prefixlen <= 24):
            yield Issue(join(path, "gpu_subnet_cidr"), self.gpu_subnet_cidr,
                        "must be between /16 and /24 (secondary VPC CIDR limits)")
        needed = len(self.availability_zones) * (2 ** (32 - self.public_subnet_mask) + 2 ** (32 - self.private_subnet_mask))
        if needed > vpc.num_addresses:
            yield Issue(join(path, "cidr"), self.cidr,
                        f"too small for {len(self.availability_zones)} AZs of /{self.public_subnet_mask} public and "
                        f"/{self.private_subnet_mask} private subnets ({needed} addresses needed)")
        if len(set(self.availability_zones)) != len(self.availability_zones):
            yield Issue(join(path, "availability_zones"), list(self.availability_zones), "lists an AZ twice")
        if self.nat_gateways > len(self.availability_zones):
            yield Issue(join(path, "nat_gateways"), self.nat_gateways,
                        f"must be at most the number of AZs ({len(self.availability_zones)})")
        for index, zone in enumerate(self.availability_zones):
            yield from zone_issues(root.region, join(join(path, "availability_zones"), index), zone)

    def zone_fields(self, path: str) -> Iterator[tuple[str, str]]:
        """(field path, zone) of every zone this section names."""
        for index, zone in enumerate(self.availability_zones):
            yield join(join(path, "availability_zones"), index), zone


class ExistingSubnet(Model):
    subnet_id: str = Field(pattern=r"^subnet-[0-9a-f]{8,17}$")
    availability_zone: AvailabilityZone
    route_table_id: str | None = Field(default=None, pattern=r"^rtb-[0-9a-f]{8,17}$")


class ExistingVpc(Model):
    """An existing VPC adopted without lookups, so synthesis stays offline."""

    vpc_id: str = Field(pattern=r"^vpc-[0-9a-f]{8,17}$")
    cidr: Cidr
    private_subnets: tuple[ExistingSubnet, ...] = Field(min_length=2)
    public_subnets: tuple[ExistingSubnet, ...] = ()
    gpu_subnet: ExistingSubnet
    efa_security_group_id: str | None = Field(default=None, pattern=r"^sg-[0-9a-f]{8,17}$")

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        zones = {s.availability_zone for s in self.private_subnets}
        if len(zones) < 2:
            yield Issue(join(path, "private_subnets"), sorted(zones), "must span at least two AZs (EKS control plane)")
        for where, zone in self.zone_fields(path):
            yield from zone_issues(root.region, where, zone)

    def zone_fields(self, path: str) -> Iterator[tuple[str, str]]:
        """(field path, zone) of every adopted subnet's zone."""
        for key in ("private_subnets", "public_subnets"):
            for index, subnet in enumerate(getattr(self, key)):
                yield join(join(join(path, key), index), "availability_zone"), subnet.availability_zone
        yield join(path, "gpu_subnet.availability_zone"), self.gpu_subnet.availability_zone


class NetworkConfig(Model):
    """The network: exactly one of ``create`` and ``existing``, and the GPU zone, given by its name (``us-west-2a``)
    or, because GPU capacity is reported per AZ ID and names map to IDs differently in every account, by its ID
    (``usw2-az2``): the GPU subnet is then created with ``AvailabilityZoneId`` (infra/efa_network.py)."""

    gpu_availability_zone: AvailabilityZoneRef
    create: CreateVpc | None = None
    existing: ExistingVpc | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> NetworkConfig:
        if (self.create is None) == (self.existing is None):
            raise ValueError("set exactly one of 'create' (a new VPC) or 'existing' (adopt a VPC)")
        return self

    @property
    def gpu_zone_is_id(self) -> bool:
        """Whether the GPU zone is given as an AZ ID (``usw2-az2``), whose name is known only in the account."""
        return zone_kind(self.gpu_availability_zone) == "id"

    @property
    def gpu_zone_name(self) -> str | None:
        """The GPU zone's name when the configuration knows it: the name given, or with an AZ ID an adopted GPU
        subnet's configured name; None for an AZ ID and a created VPC (the name is resolved at deploy time)."""
        if not self.gpu_zone_is_id:
            return self.gpu_availability_zone
        return self.existing.gpu_subnet.availability_zone if self.existing else None

    @property
    def availability_zones(self) -> tuple[str, ...]:
        """Every AZ *name* the network uses, sorted: the created VPC's, or the adopted subnets', and the GPU AZ when
        it is given by name (an AZ ID is not a name: CDK's availability-zone context holds names only)."""
        if self.create:
            zones = set(self.create.availability_zones)
        else:
            assert self.existing
            existing = self.existing
            zones = {s.availability_zone for s in (*existing.private_subnets, *existing.public_subnets, existing.gpu_subnet)}
        if not self.gpu_zone_is_id:
            zones.add(self.gpu_availability_zone)
        return tuple(sorted(zones))

    def zone_fields(self, path: str) -> Iterator[tuple[str, str]]:
        """(field path, zone) of every zone of the network section, the GPU zone first."""
        yield join(path, "gpu_availability_zone"), self.gpu_availability_zone
        if self.create:
            yield from self.create.zone_fields(join(path, "create"))
        if self.existing:
            yield from self.existing.zone_fields(join(path, "existing"))

    def is_gpu_zone(self, zone: str) -> bool:
        """Whether ``zone`` (an instance group's or an endpoint's) is the GPU subnet's zone as far as the configuration
        can tell: the GPU zone as given, or its name when that is configured (an adopted GPU subnet next to an AZ ID,
        which preflight checks is that ID's name: hyperpod_dpd/ops/zones.py)."""
        return zone in (self.gpu_availability_zone, self.gpu_zone_name)

    def gpu_zone_rule(self) -> str:
        """The zones :meth:`is_gpu_zone` accepts, for the message that refuses another one."""
        gpu, name = self.gpu_availability_zone, self.gpu_zone_name
        if name is not None and name != gpu:
            return f"network.gpu_availability_zone ({gpu}) or the adopted GPU subnet's zone ({name})"
        return f"network.gpu_availability_zone ({gpu})"

    def gpu_zone_form_hint(self) -> str:
        """With an AZ ID whose name the configuration does not know, why a zone name cannot match it."""
        if self.gpu_zone_is_id and self.gpu_zone_name is None:
            return "; it is an AZ ID, and which name it has is the account's: give the ID here too"
        return ""

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        gpu = self.gpu_availability_zone
        unknown = list(zone_issues(root.region, join(path, "gpu_availability_zone"), gpu))
        yield from unknown  # a zone the Region lacks is one message: nothing below would add to it
        if self.create:
            yield from self.create.issues(root, join(path, "create"))
            # With an AZ ID the zone's name is the account's: preflight checks it (hyperpod_dpd/ops/zones.py).
            if not unknown and not self.gpu_zone_is_id and gpu not in self.create.availability_zones:
                yield Issue(join(path, "gpu_availability_zone"), gpu,
                            f"must be one of network.create.availability_zones {list(self.create.availability_zones)}")
        if self.existing:
            yield from self.existing.issues(root, join(path, "existing"))
            if not unknown and not self.gpu_zone_is_id and self.existing.gpu_subnet.availability_zone != gpu:
                yield Issue(join(path, "existing.gpu_subnet.availability_zone"),
                            self.existing.gpu_subnet.availability_zone,
                            f"must equal network.gpu_availability_zone ({gpu})")

    def warnings(self, root: Any, path: str) -> list[Issue]:
        """Zones outside an unconfirmed catalogue row (hyperpod_dpd.catalogue.zones): let through, preflight decides."""
        return [Issue(where, zone, verdict.warning) for where, zone in self.zone_fields(path)
                if (verdict := check_zone(root.region, zone)).warning]


def zone_issues(region: str, where: str, zone: str) -> Iterator[Issue]:
    """The error for a zone that is not one of ``region``'s Availability Zones (hyperpod_dpd.catalogue.zones)."""
    verdict = check_zone(region, zone)
    if verdict.error:
        yield Issue(where, zone, verdict.error)
