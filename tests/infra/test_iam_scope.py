"""Every identity policy of the fixture environments' stacks grants each action on what IAM authorizes it on: ``*``
only for actions that take no resource type, never an ARN for those (which would grant nothing), no ``service:*``,
no ``iam:PassRole`` without ``iam:PassedToService`` (tests/iam_reference.py, over the Service Authorization Reference
as cfn-lint ships it). The few actions kept otherwise are listed there, each with its reason."""

from __future__ import annotations

from hyperpod_dpd.stacks.assembly import Synthesized
from tests.iam_reference import scoping_problems


def test_every_stage_policy_scopes_each_action_to_what_iam_authorizes_it_on(synthesized: Synthesized) -> None:
    # GIVEN every stack of every fixture environment (network, platform, endpoints), as synthesized
    templates = {f"{env}/{part}": template for (env, part), template in synthesized.templates.items()}
    assert {part for _, part in synthesized.templates} >= {"network", "platform"}
    # WHEN each Allow statement's actions are compared with the resource types IAM authorizes them on
    problems = scoping_problems(templates)
    # THEN nothing is on "*" that takes a resource, nothing void is on an ARN, and every exemption is still needed
    assert problems == []
