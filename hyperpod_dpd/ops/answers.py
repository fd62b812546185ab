"""Is an AWS answer the service's? The ``before-parse`` check every client of :class:`hyperpod_dpd.aws.ClientFactory`
carries.

botocore parses whatever comes back with the operation's protocol and trusts it (botocore 1.44.8
``botocore/parsers.py``): a JSON-protocol body that is not JSON is read as ``{"message": <body>}`` and yields an
*empty* result (``BaseJSONParser._parse_body_as_json``), an HTML page on the ``ec2`` protocol parses as an empty
answer, garbage raises a ``UnicodeDecodeError`` or a ``KeyError`` from inside the parser, and
``ResponseParserError`` derives from ``Exception``, not ``BotoCoreError``; a value of the wrong type (a string where
the model says integer) passes through untouched. So before botocore parses a response, it is checked here:

1. a 2xx body must be the protocol's document: a JSON object for ``json``/``rest-json``, XML for ``query``/``ec2``/
   ``rest-xml`` whose root is not ``<html>``, and for ``query``/``ec2`` the ``<OperationResponse>`` element those
   protocols wrap every answer in; a body may be empty only when the output has no body members (``rest-*``
   operations that answer in headers);
2. botocore's own parser must parse it (2xx and error answers alike);
3. every value must have the type of its shape (structure, list, map, string, integer, ...): in the JSON body
   itself (``rest-json`` coerces what it parses: ``ensure_boolean("yes")`` is ``False``, ``RestJSONParser``), and in
   what botocore parsed.

Streaming and event-stream outputs are not read here (their body is a stream). Anything else that fails becomes
:class:`~hyperpod_dpd.aws.MalformedAnswer` (one line, exit 2) rather than a traceback or a fail-open "nothing".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from hyperpod_dpd.errors import HpdpdError

JSON_PROTOCOLS = frozenset({"json", "rest-json"})
XML_PROTOCOLS = frozenset({"query", "ec2", "rest-xml"})
WRAPPED_PROTOCOLS = frozenset({"json", "query", "ec2"})  # every answer is one document, even an empty one
# The first element of an XML document, past a BOM, the declaration, comments and a doctype.
XML_ROOT = re.compile(rb"\A(?:\xef\xbb\xbf)?(?:\s|<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^>]*>)*<(?:[A-Za-z_][\w.\-]*:)?"
                      rb"([A-Za-z_][\w.\-]*)", re.DOTALL)
PREVIEW_CHARS = 60
SCALARS: Mapping[str, tuple[type, ...]] = {
    "string": (str,), "character": (str,), "integer": (int,), "long": (int,), "short": (int,), "byte": (int,),
    "boolean": (bool,), "float": (int, float), "double": (int, float), "bigdecimal": (int, float, str),
    "biginteger": (int, str), "timestamp": (datetime, str, int, float), "blob": (bytes, bytearray, str),
}
NUMBERS = frozenset({"integer", "long", "short", "byte", "float", "double", "bigdecimal", "biginteger"})


class MalformedAnswer(HpdpdError):
    """An answer that is not the service's: one line naming the operation and the endpoint (exit 2)."""

    def __init__(self, *, operation: str, endpoint: str, detail: str) -> None:
        super().__init__(f"{operation} at {endpoint}: the answer is not the service's ({detail}); check "
                         "AWS_ENDPOINT_URL and any proxy in between")
        self.operation, self.endpoint, self.detail = operation, endpoint, detail


def answer_check(endpoint: str) -> Callable[..., None]:
    """The ``before-parse`` handler of a client whose endpoint is ``endpoint``."""

    def check(operation_model: Any = None, response_dict: Any = None, **_: Any) -> None:
        if operation_model is None or not isinstance(response_dict, dict):
            return
        problem = answer_problem(operation_model, response_dict)
        if problem:
            raise MalformedAnswer(operation=str(operation_model.name), endpoint=endpoint, detail=problem)

    return check


def answer_problem(operation: Any, response: Mapping[str, Any]) -> str | None:
    """Why ``response`` (botocore's response dict: status_code, headers, body) is not an answer of ``operation``."""
    if operation.has_event_stream_output or operation.has_streaming_output:
        return None
    body = response.get("body")
    if not isinstance(body, bytes | bytearray):
        return None
    status = int(response.get("status_code") or 0)
    service = operation.service_model
    protocol = str(getattr(service, "resolved_protocol", None) or service.metadata.get("protocol", ""))
    shape = operation.output_shape
    what = f"HTTP {status}, {_content_type(response)}"
    if status < 300:
        problem = document_problem(protocol, str(operation.name), bytes(body), shape)
        if problem:
            return f"{what}: {problem}: {preview(bytes(body))}"
        if protocol in JSON_PROTOCOLS and shape is not None and body.strip():
            found = shape_problem(json.loads(bytes(body)), _body_shape(shape), "", raw=True)
            if found:
                return f"{what}: {found}"
    from botocore.parsers import create_parser

    try:
        parsed = create_parser(protocol).parse(dict(response), shape)
    except Exception as exc:  # the parser's own failure on this body, whatever its type
        return f"{what}: botocore cannot parse it ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})"
    if status < 300 and shape is not None:
        found = shape_problem(parsed, shape, "")
        if found:
            return f"{what}: {found}"
    return None


def document_problem(protocol: str, operation: str, body: bytes, shape: Any) -> str | None:
    """Why a 2xx ``body`` is not a document of ``protocol`` (None when it is, or when the protocol is not checked)."""
    text = body.strip()
    if not text:
        return "an empty body" if protocol in WRAPPED_PROTOCOLS and _has_body_members(shape) else None
    if protocol in JSON_PROTOCOLS:
        try:
            document = json.loads(text.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return f"not UTF-8 (byte {text[exc.start]:#04x} at {exc.start})"
        except (ValueError, RecursionError):
            return "not JSON"
        return None if isinstance(document, dict) else f"a JSON {type(document).__name__}, not an object"
    if protocol in XML_PROTOCOLS:
        found = XML_ROOT.match(text)
        if found is None:
            return "not XML"
        root = found.group(1).decode("ascii", "replace")
        if root.lower() == "html":
            return "an HTML page"
        if protocol in ("query", "ec2") and root != f"{operation}Response":
            return f"an XML document <{root}>, not <{operation}Response>"
    return None


def shape_problem(value: Any, shape: Any, path: str, *, raw: bool = False) -> str | None:
    """The first value of ``value`` whose type is not its shape's, as ``<path>: <type> where <shape type> belongs``
    (``raw``: ``value`` is the JSON body, keyed by the members' serialized names, header members absent)."""
    if value is None or getattr(shape, "is_document_type", False):
        return None
    kind = str(shape.type_name).lower()
    where = path or "the answer"
    if kind == "structure" or kind == "union":
        if not isinstance(value, dict):
            return f"{where}: {_kind(value)} where an object belongs"
        for name, member in shape.members.items():
            if raw and "location" in (member.serialization or {}):
                continue
            key = (member.serialization or {}).get("name", name) if raw else name
            if key in value and (found := shape_problem(value[key], member, f"{path}.{name}" if path else name,
                                                        raw=raw)):
                return found
        return None
    if kind == "list":
        if not isinstance(value, list):
            return f"{where}: {_kind(value)} where a list belongs"
        return next((p for i, item in enumerate(value)
                     if (p := shape_problem(item, shape.member, f"{where}[{i}]", raw=raw))), None)
    if kind == "map":
        if not isinstance(value, dict):
            return f"{where}: {_kind(value)} where a map belongs"
        return next((p for k, item in value.items()
                     if (p := shape_problem(item, shape.value, f"{where}[{k!r}]", raw=raw))), None)
    allowed = SCALARS.get(kind)
    if allowed is None:
        return None  # a type botocore added after this check was written: not judged
    if not isinstance(value, allowed) or (kind in NUMBERS and isinstance(value, bool)):
        return f"{where}: {_kind(value)} where a {kind} belongs"
    return None


def preview(body: bytes) -> str:
    """The start of a body on one line, for the message (control characters and invalid UTF-8 escaped)."""
    text = body[:PREVIEW_CHARS].decode("utf-8", "backslashreplace")
    shown = " ".join("".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text).split())
    return repr(shown + ("..." if len(body) > PREVIEW_CHARS else ""))


def _body_shape(shape: Any) -> Any:
    """The shape of a JSON body: the output's ``payload`` member when it names one (rest-json), else the output."""
    payload = (shape.serialization or {}).get("payload")
    return shape.members[payload] if payload and payload in shape.members else shape


def _has_body_members(shape: Any) -> bool:
    members = getattr(shape, "members", None) or {}
    return any("location" not in (m.serialization or {}) for m in members.values())


def _content_type(response: Mapping[str, Any]) -> str:
    headers = response.get("headers") or {}
    value = headers.get("content-type") or headers.get("Content-Type") if hasattr(headers, "get") else None
    return str(value) if value else "no Content-Type"


def _kind(value: Any) -> str:
    return {str: "a string", bool: "a boolean", int: "a number", float: "a number", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)


def member(answer: Any, key: str, *, client: Any, operation: str) -> dict[str, Any]:
    """``answer[key]``, the object an operation's answer carries (``cluster`` of EKS DescribeCluster, ...): an
    answer without it is no answer of that operation (an empty ``{}`` from something in between)."""
    value = answer.get(key) if isinstance(answer, Mapping) else None
    if not isinstance(value, dict):
        endpoint = str(getattr(getattr(client, "meta", None), "endpoint_url", None) or "the AWS endpoint")
        raise MalformedAnswer(operation=operation, endpoint=endpoint, detail=f"it carries no {key!r} object")
    return value
