"""S3 prefixes an object key can fit under: S3 keys have at most 1,024 bytes of UTF-8, prefix and delimiter included
(Amazon S3 User Guide, "Naming Amazon S3 objects"), so a prefix has at most 1,023. Counted in bytes, not characters."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_dpd.catalogue.limits import S3_PREFIX_MAX_BYTES
from hyperpod_dpd.config.endpoints import parse_endpoint
from hyperpod_dpd.errors import ConfigError

ENDPOINT: dict[str, Any] = {"name": "llama", "instance_type": "ml.p5.48xlarge",
                            "model": {"name": "Llama-3.3-70B-Instruct", "s3": {"bucket": "models-bucket",
                                                                               "region": "us-west-2"}}}


def _with_prefix(prefix: str) -> dict[str, Any]:
    return {**ENDPOINT, "model": {**ENDPOINT["model"], "s3": {**ENDPOINT["model"]["s3"], "prefix": prefix}}}


@pytest.mark.parametrize("prefix", ["m" * S3_PREFIX_MAX_BYTES, "é" * (S3_PREFIX_MAX_BYTES // 2), ""])
def test_a_prefix_an_object_key_fits_under_is_accepted(prefix: str) -> None:
    assert parse_endpoint(_with_prefix(prefix)).model.s3.prefix == prefix  # type: ignore[union-attr]


@pytest.mark.parametrize(("prefix", "size"), [("m" * 1024, 1024), ("é" * 600, 1200)],
                         ids=["1,024 ASCII characters", "600 two-byte characters"])
def test_a_prefix_no_object_key_fits_under_is_one_line_in_bytes(prefix: str, size: int) -> None:
    # GIVEN a prefix of more bytes than any S3 key below it can have (600 characters are 1,200 bytes of UTF-8)
    with pytest.raises(ConfigError) as raised:
        parse_endpoint(_with_prefix(prefix), source="my endpoint")
    # THEN one line names the field, shows the value cut short, and gives the size and the limit in bytes
    [line] = str(raised.value).splitlines()
    assert line.startswith("my endpoint: model.s3.prefix: '" + prefix[:10]), line
    assert line.endswith(f": has a key prefix of {size:,} bytes (UTF-8); an S3 object key has at most 1,024 bytes, "
                         "prefix included, so the prefix may have at most 1,023"), line


def test_the_certificate_output_uri_is_held_to_the_same_bound() -> None:
    uri = "s3://certificates-bucket/" + "c" * 1024
    with pytest.raises(ConfigError) as raised:
        parse_endpoint({**ENDPOINT, "tls": {"certificate_output_s3_uri": uri}}, source="my endpoint")
    assert str(raised.value).startswith("my endpoint: tls.certificate_output_s3_uri: 's3://certificates-bucket/ccc")
    assert "has a key prefix of 1,024 bytes" in str(raised.value)


def test_a_certificate_uri_whose_bucket_is_known_only_at_deploy_time_still_has_its_key_measured() -> None:
    # GIVEN a bucket another construct names (a CDK token) and a literal key too long for S3
    uri = "s3://${Token[Bucket.Name.1234]}/" + "c" * 1024
    # THEN the key is still refused; a key that is itself a token is left to the deploy
    with pytest.raises(ConfigError) as raised:
        parse_endpoint({**ENDPOINT, "tls": {"certificate_output_s3_uri": uri}})
    assert "has a key prefix of 1,024 bytes" in str(raised.value)
    deferred = "s3://certificates-bucket/${Token[Prefix.5678]}"
    assert parse_endpoint({**ENDPOINT, "tls": {"certificate_output_s3_uri": deferred}}).tls is not None
