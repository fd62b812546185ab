"""The configuration's warnings as CDK annotations, on the construct each one concerns.

A warning of the environment (``eks.version``, ``alerts``, ...) goes on the platform (the ``HyperPodDpdPlatform``
construct, or the project's platform stack); an endpoint's goes on that endpoint's ``KubernetesManifest``, or, where
the endpoint has none (``delivery.endpoints: gitops``, ``endpoints=False``), on the construct that stands for its
delivery. ``cdk synth`` and ``cdk deploy`` then show each warning of the stacks they select once, as the CDK CLI shows
every annotation, and an app acknowledges one like any other (aws-cdk-lib ``Annotations``):

    cdk.Annotations.of(platform).acknowledge_warning("hpdpd:config:eks.version", "1.35 is what we run")

The id is ``hpdpd:config:<field path>``, for an endpoint the path inside the endpoint (``hpdpd:config:image``), so it
survives reordering the endpoints and names one kind of warning wherever it is acknowledged (a construct and its
children). The message is the warning's one line: file, full field path, value and what to do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import aws_cdk as cdk
from constructs import Construct

from hyperpod_dpd.config import EnvironmentConfig
from hyperpod_dpd.config.endpoint_checks import environment_warnings
from hyperpod_dpd.errors import Issue

ID_PREFIX = "hpdpd:config:"
_ENDPOINT_PATH = re.compile(r"endpoints\[(\d+)\]\.(.+)")


def warning_id(path: str) -> str:
    """The acknowledgement id of the warning at field ``path``: ``endpoints[0].image`` -> ``hpdpd:config:image``."""
    match = _ENDPOINT_PATH.fullmatch(path)
    return ID_PREFIX + (match.group(2) if match else path)


def annotate_warnings(config: EnvironmentConfig, *, environment: Construct,
                      endpoints: Mapping[str, Construct] | None = None,
                      endpoint_fallback: Construct | None = None) -> list[Issue]:
    """Add each warning of ``config`` (:func:`~hyperpod_dpd.config.endpoint_checks.environment_warnings`) once as a
    warning annotation: an endpoint's on ``endpoints[<endpoint name>]``, else on ``endpoint_fallback`` (default
    ``environment``); the environment's on ``environment``. Returns the warnings annotated."""
    found = environment_warnings(config)
    by_name = endpoints or {}
    for warning in found:
        match = _ENDPOINT_PATH.fullmatch(warning.path)
        target = environment
        if match is not None and int(match.group(1)) < len(config.endpoints):
            name = config.endpoints[int(match.group(1))].name
            target = by_name.get(name) or endpoint_fallback or environment
        cdk.Annotations.of(target).add_warning_v2(warning_id(warning.path), warning.render(config.source))
    return found
