"""The chart digest check's Lambda handler against botocore's own ECR client and model (1.44.8), stubbed with botocore's
Stubber (a response that does not match the operation's output shape is refused by the Stubber itself), and its
answer to CloudFormation PUT over real HTTPS to a loopback server."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.stub import Stubber

from hyperpod_dpd.infra.handlers.chart_digest import index
from tests.fakes.oci_registry import self_signed_certificate

DIGEST = "sha256:" + "1a" * 32
OTHER = "sha256:" + "2b" * 32
NAME = "hyperpod-dpd/hyperpod-helm-chart"
PROPERTIES = {"ServiceToken": "arn", "RegistryId": "222222222222", "Region": "us-east-1", "RepositoryName": NAME,
              "Tag": "0.1.0", "Digest": DIGEST, "SourceCommit": "011ca927", "ChartFingerprint": "f"}
EVENT = {"RequestType": "Create", "ResponseURL": "https://127.0.0.1/response", "StackId": "stack", "RequestId": "r1",
         "LogicalResourceId": "DigestCheck", "ResourceProperties": PROPERTIES}


def _client() -> Any:
    return botocore.session.get_session().create_client(
        "ecr", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")


def _repository(mutability: str) -> dict[str, Any]:
    return {"repositories": [{"repositoryName": NAME, "registryId": "222222222222", "imageTagMutability": mutability,
                              "repositoryArn": f"arn:aws:ecr:us-east-1:222222222222:repository/{NAME}"}]}


def _image(digest: str) -> dict[str, Any]:
    return {"imageDetails": [{"registryId": "222222222222", "repositoryName": NAME, "imageDigest": digest,
                              "imageTags": ["0.1.0"]}]}


def _run(event: dict[str, Any], *answers: tuple[str, dict[str, Any] | str]) -> dict[str, Any]:
    """Run the handler with ECR answering ``answers`` in order (a string: that service error); the response body."""
    client, sent = _client(), []
    expected = {"describe_repositories": {"registryId": "222222222222", "repositoryNames": [NAME]},
                "describe_images": {"registryId": "222222222222", "repositoryName": NAME,
                                    "imageIds": [{"imageTag": "0.1.0"}]}}
    with Stubber(client) as stub:
        for operation, answer in answers:
            if isinstance(answer, str):
                stub.add_client_error(operation, answer, answer, http_status_code=400,
                                      expected_params=expected[operation])
            else:
                stub.add_response(operation, answer, expected[operation])
        index.handler(event, None, ecr=client, respond=lambda url, body: sent.append((url, body)))
        stub.assert_no_pending_responses()
    ((url, body),) = sent
    assert url == event["ResponseURL"]
    return json.loads(body)


def test_the_model_has_the_fields_and_values_the_handler_reads() -> None:
    # GIVEN botocore's ECR model (what the Stubber validates against)
    model = _client().meta.service_model
    repository = model.operation_model("DescribeRepositories").output_shape.members["repositories"].member
    image = model.operation_model("DescribeImages").output_shape.members["imageDetails"].member
    # THEN the mutability the handler accepts is a value of the enum, and the digest is the manifest's
    assert index.IMMUTABLE in repository.members["imageTagMutability"].enum
    assert "digest of the image manifest" in image.members["imageDigest"].documentation
    assert {"RepositoryNotFoundException", "ImageNotFoundException"} <= {
        shape.name for shape in model.operation_model("DescribeImages").error_shapes}


def test_the_recorded_digest_in_an_immutable_repository_passes() -> None:
    # GIVEN ECR holding the recorded digest under the tag, in a repository with immutable tags
    answer = _run(EVENT, ("describe_repositories", _repository("IMMUTABLE")), ("describe_images", _image(DIGEST)))
    # THEN CloudFormation is told SUCCESS, for this request, with the digest
    assert (answer["Status"], answer["Data"], answer["RequestId"], answer["StackId"]) == (
        "SUCCESS", {"Digest": DIGEST}, "r1", "stack")
    assert answer["PhysicalResourceId"] == f"222222222222/{NAME}:0.1.0"


def test_another_digest_under_the_tag_fails_the_deploy() -> None:
    # GIVEN the tag holding another chart than the one recorded
    answer = _run(EVENT, ("describe_repositories", _repository("IMMUTABLE")), ("describe_images", _image(OTHER)))
    # THEN the request fails, naming both digests and the configuration key
    assert answer["Status"] == "FAILED"
    assert OTHER in answer["Reason"] and DIGEST in answer["Reason"]
    assert "hyperpod.dependencies_chart.digest" in answer["Reason"]


@pytest.mark.parametrize("mutability", ["MUTABLE", "MUTABLE_WITH_EXCLUSION", "IMMUTABLE_WITH_EXCLUSION"])
def test_a_tag_that_can_move_fails_even_with_the_right_digest(mutability: str) -> None:
    # GIVEN the right digest today, in a repository where the tag could be pointed elsewhere before Helm pulls
    answer = _run(EVENT, ("describe_repositories", _repository(mutability)), ("describe_images", _image(DIGEST)))
    # THEN the request fails and says how to make the tags immutable
    assert answer["Status"] == "FAILED" and mutability in answer["Reason"]
    assert f"put-image-tag-mutability --registry-id 222222222222 --repository-name {NAME} --image-tag-mutability " \
           "IMMUTABLE" in answer["Reason"]


@pytest.mark.parametrize(("error", "says"), [("RepositoryNotFoundException", "no ECR repository"),
                                             ("ImageNotFoundException", "has no tag 0.1.0")])
def test_a_missing_repository_or_tag_fails_with_what_to_do(error: str, says: str) -> None:
    answers = [("describe_repositories", error)] if error.startswith("Repository") else [
        ("describe_repositories", _repository("IMMUTABLE")), ("describe_images", error)]
    # WHEN ECR answers that error THEN the request fails saying so
    answer = _run(EVENT, *answers)
    assert answer["Status"] == "FAILED" and says in answer["Reason"]


def test_an_unexpected_error_still_answers_cloudformation() -> None:
    # GIVEN ECR refusing the call (the role lacks the permission) THEN the request fails at once, with the error
    answer = _run(EVENT, ("describe_repositories", "AccessDeniedException"))
    assert answer["Status"] == "FAILED" and "AccessDeniedException" in answer["Reason"]


def test_a_delete_succeeds_without_calling_ecr() -> None:
    # GIVEN a Delete (the repository may be gone) THEN it succeeds with no ECR call (none is queued) and keeps its id
    answer = _run({**EVENT, "RequestType": "Delete", "PhysicalResourceId": "old-id"})
    assert (answer["Status"], answer["PhysicalResourceId"]) == ("SUCCESS", "old-id")


def test_an_incomplete_resource_fails() -> None:
    # GIVEN properties without the digest THEN nothing is checked and the request fails
    answer = _run({**EVENT, "ResourceProperties": {**PROPERTIES, "Digest": ""}})
    assert answer["Status"] == "FAILED" and "lacks Digest" in answer["Reason"]


@pytest.fixture
def response_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An HTTPS server on 127.0.0.1 standing in for the pre-signed S3 URL, trusted through SSL_CERT_FILE."""
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    cert, key = self_signed_certificate(tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}/stack/response?X-Amz-Signature=abc", received
    server.shutdown()
    server.server_close()


def test_the_answer_is_put_to_the_response_url_as_s3_expects(response_server: tuple[str, list[dict[str, Any]]]) -> None:
    url, received = response_server
    # WHEN a Delete is answered through the real PUT
    index.handler({**EVENT, "RequestType": "Delete", "PhysicalResourceId": "id", "ResponseURL": url}, None)
    # THEN one PUT reached the URL with its query, no content type, and the response object
    ((request,),) = [received]
    assert request["path"] == "/stack/response?X-Amz-Signature=abc"
    assert request["headers"].get("Content-Type", "") == ""
    assert request["body"]["Status"] == "SUCCESS" and request["body"]["LogicalResourceId"] == "DigestCheck"


def test_a_response_url_that_is_not_https_is_refused() -> None:
    with pytest.raises(ValueError, match="not an https URL"):
        index._put("http://127.0.0.1/response", b"{}")
