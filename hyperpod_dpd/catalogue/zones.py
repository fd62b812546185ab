"""The Availability Zones of every Region the toolkit supports: which AZ IDs exist and which AZ names an account may
see, so a zone that does not exist (``us-west-2e``) is refused before synthesis instead of by CloudFormation.

Names and IDs (AWS, "AZ IDs", docs.aws.amazon.com/global-infrastructure/latest/regions/az-ids.html, and "AWS
Availability Zones", .../aws-availability-zones.html): an AZ *name* is the Region code and a letter (``us-west-2a``);
in the oldest Regions it is mapped to a physical zone independently for each account created before November 2025,
so ``us-west-2a`` of one account may be ``us-west-2b`` of another. An AZ *ID* (``usw2-az2``) "has the same physical
location in every AWS account". GPU capacity (training plans' reserved capacity, capacity blocks) is reported per AZ
ID, so the GPU zone may be given as either.

The rows: the names and IDs that EC2 ``DescribeAvailabilityZones`` returned in the account moto 5.2.5 recorded
(getmoto/moto, ``moto/ec2/models/availability_zones_and_regions.py``, pinned in requirements-dev.txt;
tests/hyperpod_dpd/catalogue/test_zones.py cross-checks every row against the installed copy). A row is ``confirmed`` when a
second, independent public list gives the Region the same number of zones (the AZ count per non-opt-in Region
in qiita.com/MH35JP/items/1df91ccd2874e09c3598, "zones available to ordinary accounts") and no source reports zones
that exist for some accounts only. A zone outside a confirmed row is refused; outside an unconfirmed row it is a
warning (the row's ``note`` says why it is unconfirmed), and ``hpdpd preflight`` checks every configured zone against
the account's own answer either way.

Local Zones (``us-west-2-lax-1a``, ID ``usw2-lax1-az1``) and Wavelength Zones (``us-east-1-wl1-bos-wlz-1``) are not
zones for this toolkit: the EKS control plane "can't run in the Local Zone" (Amazon EKS User Guide, "Launch
low-latency EKS clusters with AWS Local Zones"), and every subnet here is either a control-plane subnet or the GPU
subnet of the HyperPod cluster, whose instance types the catalogue only knows in Regions' AZs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

# ``us-west-2a``, ``us-gov-west-1a``: a Region code and one letter.
AZ_NAME = re.compile(r"(?P<region>[a-z]{2}(?:-gov)?-[a-z]+-\d)(?P<letter>[a-z])")
# ``usw2-az2``: the Region's short code, ``-az`` and a number (AWS, "AWS Availability Zones").
AZ_ID = re.compile(r"(?P<prefix>[a-z]{3,6}\d)-az(?P<number>\d{1,2})")
# ``us-west-2-lax-1a`` (Local Zone), ``us-east-1-wl1-bos-wlz-1`` (Wavelength Zone): the parent Region, then a location.
LOCAL_NAME = re.compile(r"[a-z]{2}(?:-gov)?-[a-z]+-\d-[a-z0-9]+(?:-[a-z0-9]+)*")
# ``usw2-lax1-az1``, ``use1-wl1-bos-wlz1``: the parent Region's short code, then a location.
LOCAL_ID = re.compile(r"[a-z]{3,6}\d-[a-z0-9]+(?:-[a-z0-9]+)*")
LOCAL_ZONE_WHY = ("is a Local Zone or Wavelength Zone, not an Availability Zone: the EKS control plane cannot run "
                  "there (Amazon EKS User Guide, \"Launch low-latency EKS clusters with AWS Local Zones\") and the "
                  "GPU subnet must be in one of the Region's AZs")
ZoneKind = Literal["name", "id"]
SOURCE = "moto 5.2.5's recorded DescribeAvailabilityZones answer (hyperpod_dpd.catalogue.zones)"


def zone_kind(value: str) -> ZoneKind | None:
    """``name`` (``us-west-2a``), ``id`` (``usw2-az2``), or None for anything else (Local Zones included)."""
    if AZ_NAME.fullmatch(value):
        return "name"
    if AZ_ID.fullmatch(value):
        return "id"
    return None


def is_local_zone(value: str) -> bool:
    """A Local Zone's or a Wavelength Zone's name or ID (``us-west-2-lax-1a``, ``usw2-lax1-az1``)."""
    return zone_kind(value) is None and bool(LOCAL_NAME.fullmatch(value) or LOCAL_ID.fullmatch(value))


@dataclass(frozen=True, kw_only=True)
class RegionZones:
    """One Region's zones: the AZ IDs that exist and the letters of the AZ names an account may see."""

    region: str
    zone_ids: tuple[str, ...]
    letters: str
    confirmed: bool
    note: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f"{self.region}{letter}" for letter in self.letters)

    @property
    def id_prefix(self) -> str:
        """``usw2``: what every AZ ID of the Region starts with."""
        return self.zone_ids[0].split("-az")[0]

    def knows(self, zone: str) -> bool:
        return zone in self.names or zone in self.zone_ids

    def describe(self) -> str:
        """``us-west-2a, us-west-2b, us-west-2c, us-west-2d (names; which ID each is differs per account) or
        usw2-az1, usw2-az2, usw2-az3, usw2-az4 (IDs)``"""
        return f"{', '.join(self.names)} (names) or {', '.join(self.zone_ids)} (IDs)"


def _row(region: str, ids: str, letters: str, *, confirmed: bool = True, note: str = "") -> RegionZones:
    prefix, count = ids.split(":")
    zone_ids = tuple(f"{prefix}-az{n}" for n in count.split(","))
    return RegionZones(region=region, zone_ids=zone_ids, letters=letters, confirmed=confirmed, note=note)


_NOT_IN_SECOND_LIST = "an opt-in Region: no second public list of its zones was found"
# region -> "<id prefix>:<AZ numbers>", name letters (both from moto 5.2.5's recording, see the module docstring).
ZONES: Mapping[str, RegionZones] = MappingProxyType({z.region: z for z in (
    _row("ap-northeast-1", "apne1:1,2,4", "acd", confirmed=False,
         note="accounts created long ago also see ap-northeast-1b (apne1-az3), a zone being retired; which names an "
              "account sees differs"),
    _row("ap-northeast-2", "apne2:1,2,3,4", "abcd"),
    _row("ap-south-1", "aps1:1,2,3", "abc"),
    _row("ap-south-2", "aps2:1,2,3", "abc", confirmed=False, note=_NOT_IN_SECOND_LIST),
    _row("ap-southeast-1", "apse1:1,2,3", "abc"),
    _row("ap-southeast-2", "apse2:1,2,3", "abc"),
    _row("ap-southeast-3", "apse3:1,2,3", "abc", confirmed=False, note=_NOT_IN_SECOND_LIST),
    _row("ap-southeast-4", "apse4:1,2,3", "abc", confirmed=False, note=_NOT_IN_SECOND_LIST),
    _row("ca-central-1", "cac1:1,2,4", "abd", confirmed=False,
         note="its names skip a letter (ca-central-1c) and no source says whether some accounts see it"),
    _row("eu-central-1", "euc1:1,2,3", "abc"),
    _row("eu-north-1", "eun1:1,2,3", "abc"),
    _row("eu-south-2", "eus2:1,2,3", "abc", confirmed=False, note=_NOT_IN_SECOND_LIST),
    _row("eu-west-1", "euw1:1,2,3", "abc"),
    _row("eu-west-2", "euw2:1,2,3", "abc"),
    _row("sa-east-1", "sae1:1,2,3", "abc"),
    _row("us-east-1", "use1:1,2,3,4,5,6", "abcdef"),
    _row("us-east-2", "use2:1,2,3", "abc"),
    _row("us-west-1", "usw1:1,3", "ab", confirmed=False,
         note="accounts created long ago see two of us-west-1a, 1b and 1c, and some a third zone (usw1-az2); which "
              "names an account sees differs"),
    _row("us-west-2", "usw2:1,2,3,4", "abcd"),
)})


@dataclass(frozen=True, kw_only=True)
class ZoneVerdict:
    """What the catalogue says about one configured zone: ``error`` refuses it, ``warning`` lets it through with a
    reason (an unconfirmed row); both None when the zone is one of the Region's."""

    error: str | None = None
    warning: str | None = None


def check_zone(region: str, zone: str) -> ZoneVerdict:
    """Whether ``zone`` (a name or an ID) is one of ``region``'s Availability Zones."""
    if is_local_zone(zone):
        return ZoneVerdict(error=LOCAL_ZONE_WHY)
    row = ZONES.get(region)
    if row is None:
        return ZoneVerdict(error=f"the toolkit knows no Availability Zones of {region} ({SOURCE})")
    if row.knows(zone):
        return ZoneVerdict()
    kind = zone_kind(zone)
    match = AZ_NAME.fullmatch(zone) if kind == "name" else AZ_ID.fullmatch(zone) if kind == "id" else None
    foreign = match is not None and (match["region"] != region if kind == "name" else match["prefix"] != row.id_prefix)
    if foreign or match is None:
        return ZoneVerdict(error=f"must be an AZ of region {region}; its zones are {row.describe()}")
    if not row.confirmed:
        return ZoneVerdict(warning=f"is not one of the zones recorded for {region} ({row.describe()}) and that list is "
                                   f"unconfirmed ({row.note}); hpdpd preflight checks it against the account")
    return ZoneVerdict(error=f"does not exist: the zones of {region} are {row.describe()}")
