"""Every kind of name a configuration holds, each with its length limit and its pattern, and the other patterned
strings (ids, ARNs, DNS names, URIs) of the endpoint section.

The limits come from the services that will receive the names, so a name that would fail at synthesis or deployment
fails here, with one line naming the field:

* HyperPod cluster and instance group names, SageMaker endpoint names: 1-63 characters matching
  ``^[a-zA-Z0-9](-*[a-zA-Z0-9])*$`` (SageMaker API reference, ``ClusterName``, ``InstanceGroupName``, ``EndpointName``).
  The API documents the pattern with ``{0,62}`` repetitions *and* a separate maximum length of 63; a repetition
  may hold several hyphens, so the pattern alone lets through names of up to 125 characters.
* EKS cluster names: 1-100 characters matching ``^[0-9A-Za-z][A-Za-z0-9\\-_]*$`` (EKS API reference, ``CreateCluster``).
* Kubernetes: namespaces are RFC 1123 labels (63), Service-forming names RFC 1035 labels (63), Secret and
  IngressClass names RFC 1123 subdomains (253); label keys are an optional DNS prefix (253) and a name (63), label
  values at most 63 characters.
* S3 general purpose buckets: 3-63 characters with the prefixes and suffixes S3 reserves.
* IAM role names (checked where they are derived, in the operator and pipeline sections): 1-64 characters.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator

_TOKEN = re.compile(r"\$\{Token\[[^\]]*\]\}")

HYPERPOD_NAME = r"[a-zA-Z0-9](-*[a-zA-Z0-9])*"
HYPERPOD_NAME_RULE = "1-63 letters, digits and hyphens, starting and ending with a letter or digit"
DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
_RFC1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_RFC1123_SUBDOMAIN = rf"{_RFC1123_LABEL}(\.{_RFC1123_LABEL})*"
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]*[a-z0-9]")
# Prefixes and suffixes S3 reserves for its own bucket kinds (S3 User Guide, general purpose bucket naming rules).
_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
BUCKET_RULE = ("a valid S3 bucket name: 3-63 characters of a-z, 0-9, '.' and '-', starting and ending with a letter "
               "or digit")


def is_unresolved(value: Any) -> bool:
    """True for an AWS CDK string token (``${Token[...]}``), e.g. a bucket name another construct creates.

    Such values are known only at deploy time, so pattern checks skip them instead of failing.
    """
    return isinstance(value, str) and bool(_TOKEN.search(value))


def name_problem(value: str, regex: str, what: str, *, max_length: int, min_length: int = 1) -> str | None:
    """Why ``value`` is not ``what`` (length first, then the pattern), or None."""
    if not min_length <= len(value) <= max_length:
        return f"has {len(value)} characters; must be {what}"
    if not re.fullmatch(regex, value):
        return f"must be {what}"
    return None


def checked_name(regex: str, what: str, *, max_length: int, min_length: int = 1, tokens: bool = False) -> AfterValidator:
    """A string field holding a name: ``min_length``-``max_length`` characters fully matching ``regex``.

    ``tokens``: let CDK tokens through (names another construct makes, known only at deploy time).
    """
    def check(value: str) -> str:
        if tokens and is_unresolved(value):
            return value
        problem = name_problem(value, regex, what, max_length=max_length, min_length=min_length)
        if problem:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


def bucket_name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid general purpose S3 bucket name, or None."""
    if not 3 <= len(name) <= 63:
        return f"has {len(name)} characters; must be {BUCKET_RULE}"
    if not _BUCKET.fullmatch(name) or ".." in name or re.fullmatch(r"\d+\.\d+\.\d+\.\d+", name):
        return f"must be {BUCKET_RULE}, without '..', not an IP address"
    reserved = next((p for p in _BUCKET_PREFIXES if name.startswith(p)), None) \
        or next((s for s in _BUCKET_SUFFIXES if name.endswith(s)), None)
    if reserved:
        return f"must be {BUCKET_RULE}; S3 reserves names with {reserved!r}"
    return None


def _bucket(value: str) -> str:
    if is_unresolved(value):
        return value
    problem = bucket_name_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes label (or taint) key: ``[prefix/]name``, or None."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > DNS_SUBDOMAIN_MAX or not re.fullmatch(_RFC1123_SUBDOMAIN, prefix)):
        return (f"label key {key!r}: the prefix before '/' must be a DNS subdomain of at most {DNS_SUBDOMAIN_MAX} "
                "characters such as 'example.com'")
    if not name or len(name) > DNS_LABEL_MAX or not _LABEL_NAME.fullmatch(name):
        return (f"label key {key!r}: the name must be 1-{DNS_LABEL_MAX} letters, digits, '-', '_' and '.', starting "
                "and ending with a letter or digit")
    return None


def label_value_problem(key: str, value: Any) -> str | None:
    """Why ``value`` is not a Kubernetes label value (at most 63 characters, empty allowed), or None."""
    text = str(value)
    if len(text) > DNS_LABEL_MAX or (text and not _LABEL_NAME.fullmatch(text)):
        return (f"label value {text!r} of {key!r} must be at most {DNS_LABEL_MAX} letters, digits, '-', '_' and '.', "
                "starting and ending with a letter or digit")
    return None


def labels_problem(labels: dict[str, Any]) -> str | None:
    for key, value in labels.items():
        problem = label_key_problem(key) or label_value_problem(key, value)
        if problem:
            return problem
    return None


def _labels(value: dict[str, str]) -> dict[str, str]:
    problem = labels_problem(value)
    if problem:
        raise ValueError(problem)
    return value


# -- identifiers, addresses and other patterned strings ------------------------------------------------------------------

def checked(regex: str, what: str, *, tokens: bool = True) -> AfterValidator:
    """A string field fully matching ``regex`` (CDK tokens let through unless ``tokens`` is false)."""
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if tokens and is_unresolved(value):
            return value
        if not compiled.fullmatch(value):
            raise ValueError(f"must be {what}")
        return value

    return AfterValidator(check)


ModelName = Annotated[str, checked(
    r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", "1-63 letters, digits, '.', '_' and '-', starting with a letter or digit")]
RegionName = Annotated[str, checked(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d", "an AWS Region code such as 'us-west-2'")]
FsxId = Annotated[str, checked(r"fs-[0-9a-f]{8,17}", "an FSx file system id such as 'fs-0123456789abcdef0'")]
HuggingFaceId = Annotated[str, checked(
    r"[a-zA-Z0-9_.-]{1,96}/[a-zA-Z0-9_.-]{1,96}", "a Hugging Face model id 'owner/name' (each at most 96 characters)")]
CommitSha = Annotated[str, checked(r"[0-9a-f]{40}", "a 40-character lower-case commit SHA")]
SecretKey = Annotated[str, checked(r"[-._a-zA-Z0-9]{1,253}", "a Secret key of letters, digits, '-', '_' and '.'")]
AcmArn = Annotated[str, checked(
    r"arn:aws:acm:[a-z0-9-]+:[0-9]{12}:certificate/[a-fA-F0-9-]+",
    "an ACM certificate ARN 'arn:aws:acm:<region>:<account>:certificate/<id>' (the CRD accepts the aws partition only)")]
DomainName = Annotated[str, checked(
    r"(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*",
    "a lower-case DNS name such as 'llm.example.com'")]
S3Uri = Annotated[str, checked(r"s3://([^/]+)/?(.*)", "an S3 URI such as 's3://bucket/prefix'")]
AmpUrl = Annotated[str, checked(
    r"https://aps-workspaces\.[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)*\.amazonaws\.com/workspaces/ws-[a-zA-Z0-9-]+|",
    "an Amazon Managed Prometheus workspace URL 'https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-...' "
    "or empty")]
UrlPath = Annotated[str, checked(r"/?[A-Za-z0-9._~/-]*", "a URL path such as 'v1/chat/completions'", tokens=False)]
PlacementGroupName = Annotated[str, checked(r"[\x20-\x7e]{1,255}", "an EC2 placement group name: 1-255 ASCII characters")]


# -- AWS ----------------------------------------------------------------------------------------------------------------

HyperPodClusterName = Annotated[str, checked_name(HYPERPOD_NAME, f"a HyperPod cluster name: {HYPERPOD_NAME_RULE}",
                                                  max_length=63)]
InstanceGroupName = Annotated[str, checked_name(
    HYPERPOD_NAME, f"a HyperPod instance group name: {HYPERPOD_NAME_RULE}", max_length=63)]
EksClusterName = Annotated[str, checked_name(
    r"[0-9A-Za-z][A-Za-z0-9_-]*",
    "an EKS cluster name: 1-100 letters, digits, hyphens and underscores, starting with a letter or digit",
    max_length=100)]
SageMakerEndpointName = Annotated[str, checked_name(
    HYPERPOD_NAME, f"a SageMaker endpoint name: {HYPERPOD_NAME_RULE}", max_length=63, tokens=True)]
BucketName = Annotated[str, AfterValidator(_bucket)]
HostedZoneId = Annotated[str, checked_name(
    r"Z[A-Z0-9]+", "a Route 53 hosted zone id such as 'Z0123456789ABCDEFGHIJ' (at most 32 characters)", max_length=32,
    tokens=True)]
FsxMountName = Annotated[str, checked_name(
    r"[A-Za-z0-9_-]+", "an FSx for Lustre mount name: 1-8 letters, digits, '_' and '-'", max_length=8)]

# -- Kubernetes ---------------------------------------------------------------------------------------------------------

# Names that form other names (router Service, containers, the generation hash) must be literal: no tokens.
EndpointName = Annotated[str, checked_name(
    r"[a-z]([-a-z0-9]*[a-z0-9])?",
    "a DNS-1035 label: 1-63 lower-case letters, digits and '-', starting with a letter and ending with a letter or "
    "digit (the operator's router Service name starts with it)", max_length=DNS_LABEL_MAX)]
Namespace = Annotated[str, checked_name(
    _RFC1123_LABEL, "a Kubernetes namespace: 1-63 lower-case letters, digits and '-', starting and ending with a "
    "letter or digit", max_length=DNS_LABEL_MAX)]
SubdomainName = Annotated[str, checked_name(
    _RFC1123_SUBDOMAIN, "a Kubernetes object name (DNS-1123 subdomain): 1-253 lower-case letters, digits, '-' and '.'",
    max_length=DNS_SUBDOMAIN_MAX, tokens=True)]
Labels = Annotated[dict[str, str], AfterValidator(_labels)]
