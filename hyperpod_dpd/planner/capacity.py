"""What an environment holds (``hpdpd plan --env``): the nodes a plan may assume, and what-if layouts beyond them.

With an environment the recommendation is sized within its prefill groups, so that the recommended layout, the
predictions and the verdict are one layout. A layout given explicitly (``--prefill-nodes``, ``--decode-nodes``,
``--baseline-nodes``) may go beyond the groups: it is planned as asked and labelled "what if", since deploying it
needs larger instance groups first.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Capacity:
    """Running nodes of the planned instance type in an environment's prefill and decode groups."""

    environment: str
    source: str  # the environment file, as displayed in messages
    instance_type: str
    prefill_nodes: int
    decode_nodes: int

    def __post_init__(self) -> None:
        if self.prefill_nodes < 1 or self.decode_nodes < 1:
            raise ValueError(f"environment {self.environment} needs at least one prefill and one decode node, has "
                             f"{self.prefill_nodes} and {self.decode_nodes}")

    @property
    def total_nodes(self) -> int:
        return self.prefill_nodes + self.decode_nodes

    def sized(self, wanted: int) -> int:
        """The prefill nodes a recommendation may use: what the workload wants, within the environment."""
        return min(wanted, self.prefill_nodes)

    def what_if(self, *, prefill: int, decode: int, baseline: int) -> tuple[str, ...]:
        """One label per role the layout takes beyond the environment's groups."""
        out = []
        for role, value, limit in (("prefill", prefill, self.prefill_nodes), ("decode", decode, self.decode_nodes),
                                   ("colocated baseline", baseline, self.total_nodes)):
            if value > limit:
                out.append(f"what if: {value} {role} node(s), beyond environment {self.environment}'s {limit} x "
                           f"{self.instance_type} ({self.source}); grow its instance groups before deploying this "
                           "layout")
        return tuple(out)
