"""What an answer of the Kubernetes API server looks like, and what a readable kubeconfig is.

The API server answers every request the toolkit makes with JSON (``Accept: application/json``), except pod logs,
which are ``text/plain`` (kubernetes/kubernetes@00846fc ``pkg/registry/core/pod/rest/log.go``: the log's
``LocationStreamer`` has ``ContentType: "text/plain"``). Every failure is a ``Status`` object
(``{"kind": "Status", "status": "Failure", "reason": ..., "code": ...}``), its 404 for a missing object or for a
path no API serves (a CRD that is not installed) included: the handler at the end of the API server's chain answers
``Status{Reason: NotFound, Code: 404, Message: "the server could not find the requested resource"}``
(kubernetes/kubernetes@20cc31b ``staging/src/k8s.io/apiserver/pkg/util/notfoundhandler/not_found_handler.go``).

So something else answered when a JSON call gets a body that is not a JSON object (an authenticating proxy's login
page, a cut or garbled body), a list without its ``items``, an object without its ``metadata``, a log that is an
HTML page, or an error status whose body is not a ``Status``: such an answer is never read as "nothing there"; it is
a :class:`~hyperpod_dpd.ops.kube.KubeError` with the cause :data:`MALFORMED`, naming the API server.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Literal

from hyperpod_dpd.errors import HpdpdError

Expect = Literal["object", "list", "text"]
MALFORMED = "malformed"
PREVIEW_CHARS = 60
LOG_CONTENT_TYPE = "text/plain"


class BadKubeconfig(HpdpdError):
    """A kubeconfig that cannot be read at all (not a file, not UTF-8, not YAML, not a mapping): one line, exit 2."""


def preview(data: bytes) -> str:
    text = data[:PREVIEW_CHARS].decode("utf-8", "backslashreplace")
    shown = " ".join("".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text).split())
    return repr(shown + ("..." if len(data) > PREVIEW_CHARS else ""))


def content_type(response: Any) -> str:
    headers = getattr(response, "headers", None) or {}
    value = headers.get("Content-Type") if hasattr(headers, "get") else None
    return str(value or "")


def answer_problem(data: bytes, *, expect: Expect, media: str) -> tuple[Any, str | None]:
    """(the decoded answer, None), or (None, why it is not an answer of that kind)."""
    if expect == "text":
        if media and not media.lower().startswith(LOG_CONTENT_TYPE):
            return None, f"{media}, not the {LOG_CONTENT_TYPE} of a log: {preview(data)}"
        return data.decode("utf-8", "replace"), None
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (byte {data[exc.start]:#04x} at {exc.start}, {media or 'no Content-Type'})"
    except (ValueError, RecursionError):
        return None, f"not JSON ({media or 'no Content-Type'}): {preview(data)}"
    if not isinstance(document, dict):
        return None, f"a JSON {type(document).__name__}, not an object"
    if expect == "list":
        items = document.get("items", ())
        if items == () or not (items is None or isinstance(items, list)):
            return None, "a list without its 'items'"
        if any(not isinstance(i, dict) or not isinstance(i.get("metadata", {}), dict) for i in items or []):
            return None, "a list whose items are not Kubernetes objects"
        return document, None
    if not isinstance(document.get("metadata"), dict):
        return None, "an object without its 'metadata'"
    return document, None


def api_status(body: Any) -> Mapping[str, Any] | None:
    """The ``Status`` object of an error answer, or None when the body is not one (not the API server's)."""
    try:
        document = json.loads(body or b"")
    except (TypeError, ValueError, RecursionError):
        return None
    if isinstance(document, dict) and document.get("kind") == "Status" and isinstance(document.get("code", 0), int):
        return document
    return None


def check_kubeconfig(paths: str) -> None:
    """Refuse a kubeconfig the client's loader would crash on: each existing path of ``paths`` (``KUBECONFIG`` may
    list several, separated by ``os.pathsep``, as the loader reads them: kubernetes ``config/kube_config.py``
    ``KubeConfigMerger``) must be a readable UTF-8 YAML mapping. Missing paths are left to the loader, which skips
    them and says when none is left."""
    import yaml

    for path in filter(None, (os.path.expanduser(p) for p in paths.split(os.pathsep))):
        if not os.path.lexists(path):
            continue
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise BadKubeconfig(f"kubeconfig {path}: cannot be read: {exc.strerror or exc}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadKubeconfig(f"kubeconfig {path}: not UTF-8 (byte {data[exc.start]:#04x} at offset {exc.start}); "
                                "a kubeconfig is a UTF-8 YAML file") from None
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            raise BadKubeconfig(f"kubeconfig {path}: not YAML{where} "
                                f"({' '.join(str(getattr(exc, 'problem', '') or 'unreadable').split())})") from None
        except RecursionError:
            raise BadKubeconfig(f"kubeconfig {path}: nested too deeply to be a kubeconfig") from None
        if document is not None and not isinstance(document, dict):
            raise BadKubeconfig(f"kubeconfig {path}: a YAML {type(document).__name__}, not a mapping with clusters, "
                                "users and contexts")
