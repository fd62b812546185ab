"""Which IP addresses the internet can send from, and how much of it a CIDR list may admit before it counts as public.

The configuration's ingress guards (``eks.public_access_cidrs``, ``endpoints[].router.allowed_cidrs``) are judged by
the publicly routable addresses they cover (:func:`hyperpod_dpd.config.network.public_exposure`), not by how they are
spelled: ``[0.0.0.0/1, 128.0.0.0/1]`` is all of IPv4 as much as ``0.0.0.0/0`` is.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# Blocks that are not globally reachable unicast sources, so they never reach a public endpoint from the internet:
# the rows of the IANA IPv4 Special-Purpose Address Registry (RFC 6890,
# https://www.iana.org/assignments/iana-ipv4-special-registry) marked "Globally Reachable: False" (192.0.0.0/24 whole:
# only two of its /32s are reachable), multicast 224.0.0.0/4 (RFC 5771: never a source) and the reserved 240.0.0.0/4
# (RFC 1112, section 4; it holds the limited broadcast 255.255.255.255/32).
NON_PUBLIC_IPV4: tuple[str, ...] = (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
    "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4",
    "240.0.0.0/4",
)
# IPv6: only 2000::/3 is global unicast (IANA IPv6 Address Space registry,
# https://www.iana.org/assignments/ipv6-address-space); inside it the IETF protocol assignments 2001::/23 and the
# documentation prefix 2001:db8::/32 are not globally reachable (IANA IPv6 Special-Purpose Address Registry, RFC 6890,
# RFC 3849).
GLOBAL_UNICAST_IPV6 = "2000::/3"
NON_PUBLIC_IPV6: tuple[str, ...] = ("2001::/23", "2001:db8::/32")

# A CIDR list is public when it admits more publicly routable addresses than one block of this prefix length.
# IPv4: a /8 (16,777,216 addresses), the largest block ever assigned to one organisation (the legacy /8s of the IANA
# IPv4 Address Space Registry, https://www.iana.org/assignments/ipv4-address-space, such as 17/8 or 19/8). A list
# covering more spans several organisations' networks, so it is not "your office or VPN range" but a share of the
# internet. IPv6: a /32, the usual initial allocation of a regional registry to an ISP [? registry policies differ and
# some holders have more; the smaller block is the stricter choice]. Today the configuration's CIDR fields accept IPv4
# only (hyperpod_dpd.config.base.Cidr); the IPv6 row keeps the rule whole for when they take both.
PUBLIC_PREFIX_LENGTH: Mapping[int, int] = MappingProxyType({4: 8, 6: 32})
PUBLIC_PREFIX_WHY: Mapping[int, str] = MappingProxyType({
    4: "the largest block ever assigned to one organisation", 6: "a regional registry's usual allocation to an ISP"})
ADDRESS_BITS: Mapping[int, int] = MappingProxyType({4: 32, 6: 128})
