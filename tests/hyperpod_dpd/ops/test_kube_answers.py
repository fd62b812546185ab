"""What the Kubernetes client takes for an answer of the API server: the official client against the fake API server,
with the fault proxy in front of it answering what a proxy, a load balancer or a broken network would."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.ops import workloads
from hyperpod_dpd.ops.kube import Kube, KubeError, get_iec
from hyperpod_dpd.ops.kube_answers import BadKubeconfig
from tests.fakes.fault_proxy import FaultProxy
from tests.fakes.fault_proxy import serve as serve_proxy
from tests.fakes.kube_api import FakeKube, pod

IEC_PATH = "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/serving/inferenceendpointconfigs/llama-1a2b3c"
READY = {"status": {"state": "DeploymentComplete"}}


@pytest.fixture
def proxied(fake_kube: FakeKube, tmp_path: Path) -> Iterator[tuple[FaultProxy, Kube]]:
    """The fake API server holding a ready IEC and a pod with a log, behind a fault proxy, and a client of the proxy."""
    fake_kube.iecs[("serving", "llama-1a2b3c")] = READY
    fake_kube.pods.append(pod("decode-llama-1a2b3c-x", namespace="serving", node_name="n1", role="decode",
                              container="decode-llama-1a2b3c"))
    fake_kube.logs[("serving", "decode-llama-1a2b3c-x", "decode-llama-1a2b3c")] = "Retrieved 8 out of 8 required tokens\n"
    with serve_proxy(fake_kube.url) as proxy:
        config = tmp_path / "proxied-kubeconfig"
        FakeKube(url=proxy.url).kubeconfig(config)
        yield proxy, Kube(kubeconfig=str(config), timeout_seconds=2.0)


def _pods(kube: Kube) -> list[Any]:
    return workloads.dpd_pods(kube, namespace="serving", iec="llama-1a2b3c")


def test_answers_that_are_the_api_servers_are_read(proxied: tuple[FaultProxy, Kube]) -> None:
    _, kube = proxied
    # WHEN the IEC, its pods and a log are read through the proxy without a fault, THEN they are what the server has
    assert get_iec(kube, name="llama-1a2b3c", namespace="serving")["status"] == READY["status"]
    (decoder,) = _pods(kube)
    assert workloads.pod_log(kube, decoder) == "Retrieved 8 out of 8 required tokens"


@pytest.mark.parametrize("fault", ["html", "garbage", "truncated"])
def test_a_body_that_is_not_json_is_never_an_empty_object(proxied: tuple[FaultProxy, Kube], fault: str) -> None:
    # GIVEN a proxy answering 200 with an HTML login page, garbage or half of the server's JSON
    proxy, kube = proxied
    proxy.set(fault)
    # WHEN the IEC is read
    with pytest.raises(KubeError) as raised:
        get_iec(kube, name="llama-1a2b3c", namespace="serving")
    # THEN it is an error that names the call and the server, and the status built on it is unknown, not pending
    assert raised.value.cause == "malformed" and raised.value.fatal and not raised.value.not_found
    assert raised.value.reason.startswith(f"GET {IEC_PATH}: the answer of {proxy.url} is not the Kubernetes API's")
    status = kube.iec_status(name="llama-1a2b3c", namespace="serving")
    assert not status.known and status.cause == "malformed"


@pytest.mark.parametrize(("body", "problem"), [
    ({"kind": "PodList"}, "a list without its 'items'"),
    ({"kind": "PodList", "items": ["prefill"]}, "a list whose items are not Kubernetes objects"),
    ([], "a JSON list, not an object"),
], ids=["no-items", "not-objects", "array"])
def test_a_list_of_another_shape_is_an_error_not_an_empty_list(proxied: tuple[FaultProxy, Kube], body: Any,
                                                               problem: str) -> None:
    # GIVEN a list answer reshaped by something in between
    proxy, kube = proxied
    proxy.set("reshape", reshape=lambda _: json.dumps(body).encode())
    # WHEN the IEC's pods are listed, THEN that is not "no pods"
    with pytest.raises(KubeError) as raised:
        _pods(kube)
    assert raised.value.cause == "malformed" and f"({problem})" in raised.value.reason


def test_an_object_without_its_metadata_is_malformed(proxied: tuple[FaultProxy, Kube]) -> None:
    proxy, kube = proxied
    proxy.set("reshape", reshape=lambda _: b'{"status": {"state": "DeploymentComplete"}}')
    with pytest.raises(KubeError) as raised:
        get_iec(kube, name="llama-1a2b3c", namespace="serving")
    assert "(an object without its 'metadata')" in raised.value.reason


def test_a_log_that_is_an_html_page_is_not_a_log(proxied: tuple[FaultProxy, Kube]) -> None:
    # GIVEN the pod's log answered with an HTML page (pod logs are text/plain from the API server)
    proxy, kube = proxied
    (decoder,) = _pods(kube)
    proxy.set("html", when=lambda method, path: path.split("?")[0].endswith("/log"))
    # WHEN the log is read, THEN it is an error, not a log without the lines the checks look for
    with pytest.raises(KubeError) as raised:
        workloads.pod_log(kube, decoder)
    assert raised.value.cause == "malformed" and "(text/html; charset=utf-8, not the text/plain of a log" in \
        raised.value.reason


def test_only_the_api_servers_own_404_is_not_found(proxied: tuple[FaultProxy, Kube], fake_kube: FakeKube) -> None:
    proxy, kube = proxied
    # GIVEN the API server's NotFound (a Status), for an IEC it does not have
    with pytest.raises(KubeError) as absent:
        get_iec(kube, name="other", namespace="serving")
    # AND a 404 HTML page of a proxy for the IEC it has
    proxy.set("404")
    with pytest.raises(KubeError) as proxied_404:
        get_iec(kube, name="llama-1a2b3c", namespace="serving")
    # THEN only the first is "not found"; the second says it is not the API server's
    assert absent.value.not_found
    assert not proxied_404.value.not_found and proxied_404.value.cause == "malformed"
    assert "404 that is not the Kubernetes API server's" in proxied_404.value.reason


def test_a_409_that_is_not_the_api_servers_is_no_conflict(proxied: tuple[FaultProxy, Kube],
                                                           fake_kube: FakeKube) -> None:
    # GIVEN the client Service, and a proxy answering its PATCH with an HTML 409
    proxy, kube = proxied
    fake_kube.services[("serving", "llama")] = {"metadata": {"name": "llama", "namespace": "serving"}, "spec": {}}
    proxy.set("409", when=lambda method, path: method == "PATCH")
    # WHEN the rollout patches it with its resourceVersion
    with pytest.raises(KubeError) as raised:
        workloads.patch_service(kube, namespace="serving", name="llama",
                                body={"metadata": {"resourceVersion": "1", "annotations": {"a": "b"}}})
    # THEN it is an error, not the optimistic-concurrency Conflict a rollout lease would take as "someone else won"
    assert not isinstance(raised.value, workloads.Conflict) and raised.value.cause == "error"


# ---- the kubeconfig ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("content", "message"), [
    (b"apiVersion: v1\nclusters: \xff\xfe\n", "not UTF-8 (byte 0xff at offset 25); a kubeconfig is a UTF-8 YAML file"),
    (b"apiVersion: v1\nclusters: [\n", "not YAML at line 3, column 1"),
    (b"- a\n- b\n", "a YAML list, not a mapping with clusters, users and contexts"),
], ids=["not-utf-8", "not-yaml", "not-a-mapping"])
def test_a_kubeconfig_that_cannot_be_read_is_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    # GIVEN a kubeconfig the client's loader would crash on
    config = tmp_path / "kubeconfig"
    config.write_bytes(content)
    # WHEN the client is made, THEN the error names the file and what is wrong with it, on one line
    with pytest.raises(BadKubeconfig) as raised:
        Kube(kubeconfig=str(config)).api_client()
    assert str(raised.value).startswith(f"kubeconfig {config}: {message}") and "\n" not in str(raised.value)


def test_a_kubeconfig_that_is_a_directory_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(BadKubeconfig) as raised:
        Kube(kubeconfig=str(tmp_path)).api_client()
    assert str(raised.value) == f"kubeconfig {tmp_path}: cannot be read: Is a directory"


def test_every_path_of_kubeconfig_is_checked(tmp_path: Path, fake_kube: FakeKube,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN KUBECONFIG listing a good file, a missing one and a broken one (the loader merges them)
    good, broken = tmp_path / "good", tmp_path / "broken"
    fake_kube.kubeconfig(good)
    broken.write_bytes(b"\xc3\x28")
    monkeypatch.setenv("KUBECONFIG", f"{good}:{tmp_path / 'missing'}:{broken}")
    # WHEN the client is made, THEN the broken one is named
    with pytest.raises(BadKubeconfig, match=f"kubeconfig {broken}: not UTF-8"):
        Kube.from_environment(None).api_client()
