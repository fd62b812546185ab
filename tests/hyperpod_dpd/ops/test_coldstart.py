"""Cold-start phases read from a fake Kubernetes API shaped like the real one (core/v1 pods, nodes and events):
each phase has its start, end and duration from the evidence, and is unknown, never a number, without it."""

from __future__ import annotations

from pathlib import Path
from string import Template
from typing import Any

import pytest
import yaml

from hyperpod_dpd.ops.coldstart import PHASES, ColdStart, duration_text, go_duration, pod_phases, read_cold_start

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "cold-start" / "cluster.yaml"
IEC, NAMESPACE = "llama-abc1234", "llm-serving"


def cluster(iec: str = IEC, namespace: str = NAMESPACE) -> dict[str, list[dict[str, Any]]]:
    """The fixture's nodes, pods and events for one IEC generation."""
    return yaml.safe_load(Template(FIXTURE.read_text()).substitute(iec=iec, namespace=namespace))


def seed(fake: Any, objects: dict[str, list[dict[str, Any]]]) -> None:
    fake.nodes.extend(objects["nodes"])
    fake.pods.extend(objects["pods"])
    fake.events.extend(objects["events"])


def phases(cold: ColdStart, role: str) -> dict[str, Any]:
    [pod] = [p for p in cold.pods if p.role == role]
    return {p.name: p for p in pod.phases}


def test_each_phase_of_a_cold_start_is_read_from_conditions_events_and_nodes(fake_kube: Any) -> None:
    # GIVEN a prefill pod whose node joined late, that pulled its image and ran an init container, and a decode pod
    # whose image was on the node already and that is not Ready yet
    seed(fake_kube, cluster())
    # WHEN the cold start of the IEC is read
    cold = read_cold_start(fake_kube.client(), namespace=NAMESPACE, iec=IEC)
    # THEN the prefill pod's four phases carry the durations the evidence gives
    assert cold.unknown == "" and [p.name for p in cold.pods[0].phases] == list(PHASES)
    prefill = phases(cold, "prefill")
    assert prefill["node ready"].seconds == 240.0  # created 10:00:00, node Ready 10:04:00 (after PodScheduled)
    assert "after the pod was created" in prefill["node ready"].detail
    assert prefill["image pulled"].seconds == pytest.approx(114.5)  # the kubelet's "in 1m54.5s", not the init's pull
    assert prefill["image pulled"].to_json()["start"] == "2026-03-01T10:09:01Z"
    assert prefill["weights loaded"].seconds == 290.0 and prefill["weights loaded"].detail == (
        "init containers: model-prefetch")
    assert prefill["engine healthy"].seconds == 330.0  # worker started 10:11:00, Ready 10:16:30
    # AND the decode pod: scheduled at once onto a ready node, image cached, no init containers, not Ready: unknown
    decode = phases(cold, "decode")
    assert decode["node ready"].seconds == 1.0
    assert decode["image pulled"].seconds == 0.0 and decode["image pulled"].detail == "already present on the node"
    assert decode["weights loaded"].seconds is None and "no init containers" in decode["weights loaded"].detail
    engine = decode["engine healthy"]
    assert (engine.seconds, engine.end) == (None, None) and engine.detail.startswith("Ready is False (ContainersNotReady")
    assert engine.to_json() == {"phase": "engine healthy", "start": "2026-03-01T10:00:05Z", "end": None,
                                "seconds": None, "detail": engine.detail}


def test_missing_events_leave_the_image_phase_unknown(fake_kube: Any) -> None:
    # GIVEN the same pods after the API server dropped their events (--event-ttl, one hour by default)
    objects = cluster()
    objects["events"] = []
    seed(fake_kube, objects)
    cold = read_cold_start(fake_kube.client(), namespace=NAMESPACE, iec=IEC)
    image = phases(cold, "prefill")["image pulled"]
    # THEN the image phase is unknown, with why, and the table says unknown instead of a number
    assert image.seconds is None and image.start is None
    assert image.detail == "no Pulled event of the worker container (events expire after an hour)"
    row = next(r for r in cold.rows() if r[0] == "prefill" and r[2] == "image pulled")
    assert row[5] == "unknown"
    # AND the other phases are still read
    assert phases(cold, "prefill")["engine healthy"].seconds == 330.0


def test_a_pod_not_scheduled_yet_has_every_phase_unknown() -> None:
    pod = {"metadata": {"name": "prefill-x-1", "creationTimestamp": "2026-03-01T10:00:00Z",
                        "labels": {"inference.sagemaker.aws.amazon.com/dpd-role": "prefill"}},
           "spec": {"containers": [{"name": "prefill-x"}]},
           "status": {"phase": "Pending", "conditions": [
               {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/3 nodes are available", "lastTransitionTime": "2026-03-01T10:00:01Z"}]}}
    result = pod_phases(pod, [], {})
    assert [p.seconds for p in result.phases] == [None, None, None, None]
    assert result.phases[0].detail == "PodScheduled is False (Unschedulable)"


def test_an_unreadable_cluster_leaves_the_cold_start_unknown_with_the_reason(fake_kube: Any) -> None:
    # GIVEN the pods, but events that the caller may not list
    seed(fake_kube, cluster())
    fake_kube.fail(f"/api/v1/namespaces/{NAMESPACE}/events", 403, "events is forbidden")
    cold = read_cold_start(fake_kube.client(), namespace=NAMESPACE, iec=IEC)
    # THEN no phase is made up: the whole read is unknown, naming the permission needed
    assert cold.pods == () and "403" in cold.unknown and "list on events in namespace llm-serving" in cold.unknown
    assert cold.to_json()["unknown"] == cold.unknown


def test_no_pods_yet_is_said_so(fake_kube: Any) -> None:
    cold = read_cold_start(fake_kube.client(), namespace=NAMESPACE, iec=IEC)
    assert cold.pods == () and cold.unknown == "no prefill or decode pods yet"


@pytest.mark.parametrize(("text", "seconds"), [("717ms", 0.717), ("1m54.5s", 114.5), ("3m10.96s", 190.96),
                                                ("1h2m3s", 3723.0), ("2.5", None), ("", None)])
def test_go_durations_as_the_kubelet_writes_them(text: str, seconds: float | None) -> None:
    assert go_duration(text) == (pytest.approx(seconds) if seconds is not None else None)


def test_durations_read_for_people() -> None:
    assert (duration_text(None), duration_text(12.34), duration_text(330.0)) == ("unknown", "12.3 s", "5 min 30 s")


def _prefill(objects: dict[str, list[dict[str, Any]]]) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                                 dict[str, dict[str, Any]]]:
    pod = objects["pods"][0]
    events = [e for e in objects["events"] if e["involvedObject"]["name"] == pod["metadata"]["name"]]
    return pod, events, {n["metadata"]["name"]: n for n in objects["nodes"]}


def test_a_restarted_worker_keeps_the_pull_of_its_cold_start() -> None:
    # GIVEN the prefill pod that pulled its image in 1m54.5s, whose worker was then restarted (OOM): the kubelet adds
    # a later Pulled event, "already present on machine", listed after the first
    pod, events, nodes = _prefill(cluster())
    restart = {**events[-1], "metadata": {"name": pod["metadata"]["name"] + ".restart", "namespace": NAMESPACE},
               "reason": "Pulled", "firstTimestamp": "2026-03-01T10:13:00Z", "lastTimestamp": "2026-03-01T10:13:00Z",
               "message": 'Container image "public.ecr.aws/deep-learning-containers/vllm:server-hyperpod-cuda-v1.1" '
                          "already present on machine"}
    # WHEN its phases are read
    image = {p.name: p for p in pod_phases(pod, [*events, restart], nodes).phases}["image pulled"]
    # THEN the image phase is the cold start's pull, not the restart's cache hit
    assert image.seconds == pytest.approx(114.5)
    assert "already present" not in image.detail


def test_a_node_ready_flap_after_the_pod_started_is_not_part_of_the_wait() -> None:
    # GIVEN the prefill pod's node, whose Ready condition changed two days after the pod started (a kubelet restart)
    pod, events, nodes = _prefill(cluster())
    node = nodes[pod["spec"]["nodeName"]]
    for condition in node["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition["lastTransitionTime"] = "2026-03-03T12:00:00Z"
    # WHEN its phases are read THEN the node phase ends when the pod was scheduled, and says why
    phase = {p.name: p for p in pod_phases(pod, events, nodes).phases}["node ready"]
    assert phase.seconds is not None and phase.seconds < 60
    assert "after the pod started: not part of this wait" in phase.detail
