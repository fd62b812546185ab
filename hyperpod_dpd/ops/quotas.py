"""SageMaker HyperPod instance quotas ("<instance type> for cluster usage") from Service Quotas.

Matching rule: a quota belongs to instance type ``T`` when its ``QuotaName``, compared case-insensitively with runs
of whitespace collapsed, is exactly ``"T for cluster usage"`` (e.g. ``ml.p5.48xlarge for cluster usage``) in service
code ``sagemaker``. The applied value (``ListServiceQuotas``) wins; a quota never adjusted in the account may be
listed only with its default (``ListAWSDefaultServiceQuotas``), which is then used. Both listings are paginated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SERVICE_CODE = "sagemaker"
QUOTA_SUFFIX = "for cluster usage"
QUOTA_PERMISSIONS = "servicequotas:ListServiceQuotas and servicequotas:ListAWSDefaultServiceQuotas"


@dataclass(frozen=True, kw_only=True)
class Quota:
    name: str
    code: str
    value: float
    applied: bool  # False: the AWS default, the account never changed it


def quota_name(instance_type: str) -> str:
    return f"{instance_type} {QUOTA_SUFFIX}"


def _key(name: str) -> str:
    return " ".join(name.split()).casefold()


def _listing(client: Any, operation: str) -> dict[str, Quota]:
    found: dict[str, Quota] = {}
    for page in client.get_paginator(operation).paginate(ServiceCode=SERVICE_CODE):
        for quota in page.get("Quotas", []):
            name = str(quota.get("QuotaName", ""))
            found.setdefault(_key(name), Quota(name=name, code=str(quota.get("QuotaCode", "")),
                                                value=float(quota.get("Value", 0.0)),
                                                applied=operation == "list_service_quotas"))
    return found


def cluster_quotas(client: Any, instance_types: list[str]) -> dict[str, Quota | None]:
    """The quota of each instance type (None when no quota carries the expected name)."""
    wanted = {t: _key(quota_name(t)) for t in instance_types}
    applied = _listing(client, "list_service_quotas")
    result: dict[str, Quota | None] = {t: applied.get(k) for t, k in wanted.items()}
    if any(q is None for q in result.values()):
        defaults = _listing(client, "list_aws_default_service_quotas")
        result = {t: q or defaults.get(wanted[t]) for t, q in result.items()}
    return result
