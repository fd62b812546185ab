"""The YAML reader of the configuration: PyYAML's SafeLoader, bounded before anything is built from the file.

Why each bound, and where it is enforced:

* **Aliases are not copies.** PyYAML's composer returns the anchored node itself for every alias
  (``yaml/composer.py``, ``compose_node``: ``return self.anchors[anchor]``) and its constructor builds each node once
  (``constructed_objects``), so a 1 KB "billion laughs" file parses quickly into a small graph that *means* 10^11
  values. Everything after the loader (pydantic, the checks, error rendering) walks values per reference. So while
  composing, each node's *expanded* size (values and characters, counting every alias at its full size) and depth
  are computed from its children's, once per node, and the file is refused as soon as one exceeds its budget, before
  the constructor runs.
* **A recursive alias** (``&a [*a]``) is an alias to a node still being composed: refused where it is written.
* **Nesting** is bounded while composing: PyYAML's composer recurses once per level (``compose_node`` ->
  ``compose_sequence_node`` -> ``compose_node``), so 500 levels would end in a RecursionError.
* **Keys** must be scalars: a list or mapping key (``? [a, b]``) builds an unhashable key.
* **YAML 1.1 numbers** that YAML 1.2 reads as text (PyYAML implements YAML 1.1: ``yaml/resolver.py``, the implicit
  resolvers of ``tag:yaml.org,2002:int`` and ``float``) are refused with the quoted form as the fix: sexagesimal
  ``1:30`` (90), ``0b11`` (3), ``1_000`` (1000), and ``0x10`` (16; YAML 1.2 reads it as 16 too, but in a
  configuration it is far more often an identifier than a number). A leading-zero octal such as ``010`` is kept as
  :class:`~hyperpod_dpd.config.base.YamlOctal` for the field checks, which say what it became.
* **The merge key** ``<<`` (YAML 1.1's merge type, https://yaml.org/type/merge.html) is supported: keys written in
  the mapping override merged ones, earlier mappings of a merged list override later ones, and a key written twice
  in the same mapping is still an error.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from hyperpod_dpd.config.base import YamlOctal
from hyperpod_dpd.errors import Issue, Verbatim

# Budgets. A shipped environment file holds about 300 values, 3 KB and 6 levels; 60 endpoints stay under 4,000 values.
MAX_FILE_BYTES = 2 * 1024 * 1024  # read no more than this; pure-Python PyYAML parses about 1 MB/s
MAX_VALUES = 10_000  # values (scalars and containers) after expanding every alias
MAX_CHARACTERS = MAX_FILE_BYTES  # characters of scalars after expanding every alias: a file without aliases fits
MAX_DEPTH = 32  # nested lists and mappings, aliases expanded
MAX_ALIASES = 500  # alias references in one file

MERGE_TAG = "tag:yaml.org,2002:merge"
INT_TAG = "tag:yaml.org,2002:int"
FLOAT_TAG = "tag:yaml.org,2002:float"
_OCTAL = re.compile(r"[-+]?0[0-7_]+")  # PyYAML's octal int form (yaml/resolver.py)


class YamlRefused(yaml.MarkedYAMLError):
    """Well-formed YAML the configuration refuses (a bound exceeded, a list as a key): ``problem`` says why."""


class YamlAmbiguities(yaml.YAMLError):
    """Plain scalars that YAML 1.1 and YAML 1.2 read differently, each an :class:`Issue` at its field path."""

    def __init__(self, issues: list[Issue]) -> None:
        super().__init__(f"{len(issues)} ambiguous values")
        self.issues = issues


_KEY = object()  # the path part of a mapping key being composed


def field_path(loc: tuple[Any, ...] | list[Any]) -> str:
    """``a.b[0].c``; a key that is not plain text (spaces, control characters) is quoted so the message stays one line."""
    out = ""
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif not _PLAIN_KEY.match(str(part)):
            out += f"[{str(part)!r}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_.:/-]+$")


def _kind_of(node: ScalarNode) -> tuple[str, str] | None:
    """How YAML 1.1 reads this int or float where YAML 1.2 would not, and the advice that goes with it."""
    text = node.value
    digits = text.lstrip("+-")
    if ":" in text:
        return "the base-60 (sexagesimal) number", ""
    if digits[:2] in ("0x", "0X"):
        return "the hexadecimal number", ""
    if digits[:2] in ("0b", "0B"):
        return "the binary number", ""
    if node.tag == INT_TAG and _OCTAL.fullmatch(text):
        return None  # kept as YamlOctal: the field checks refuse it and say what it became
    if "_" in text:
        return "the number", " (underscores dropped)"
    return None


class ConfigLoader(yaml.SafeLoader):
    """SafeLoader with the bounds above, unique keys and the merge key. Use :func:`load_yaml`."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._measures: dict[int, tuple[int, int, int]] = {}  # id(node) -> (values, characters, depth), expanded
        self._open: set[str] = set()  # anchors whose node is being composed
        self._path: list[Any] = []
        self._depth = 0
        self._aliases = 0
        self._ambiguous: list[Issue] = []

    # -- composing: every bound is checked here, before anything is constructed ------------------------------------

    def get_single_node(self) -> Node | None:
        node = super().get_single_node()
        if self._ambiguous:
            raise YamlAmbiguities(self._ambiguous)
        return node

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise YamlRefused(None, None, f"more than {MAX_ALIASES} aliases in one file; write the values out",
                                  event.start_mark)
            if event.anchor in self._open:
                raise YamlRefused(None, None, f"the alias *{event.anchor} refers to the value that contains it (a "
                                  "recursive alias); a configuration value cannot contain itself", event.start_mark)
            target = self.anchors.get(event.anchor)
            if target is not None and _part(parent, index) is _KEY:
                _refuse_key(target, event.start_mark)  # where the alias is written, not where its value is
            return super().compose_node(parent, index)  # the anchored node itself, measured when it was composed
        event = self.peek_event()
        if self._depth >= MAX_DEPTH:
            raise YamlRefused(None, None, f"nested more than {MAX_DEPTH} levels deep; a configuration needs a "
                              "handful", event.start_mark)
        anchor = event.anchor
        if anchor is not None:
            self._open.add(anchor)
        self._depth += 1
        self._path.append(_part(parent, index))
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
            self._path.pop()
            if anchor is not None:
                self._open.discard(anchor)
        self._measure(node, event.start_mark)
        return node

    def compose_scalar_node(self, anchor: str | None) -> ScalarNode:
        node: ScalarNode = super().compose_scalar_node(anchor)
        if node.tag in (INT_TAG, FLOAT_TAG) and node.style is None:
            kind = _kind_of(node)
            if kind is not None:
                self._ambiguous.append(self._ambiguity(node, *kind))
        return node

    def _ambiguity(self, node: ScalarNode, kind: str, note: str) -> Issue:
        parts = self._path[:-1] if self._path and self._path[-1] is _KEY else self._path
        what = "the key" if self._path and self._path[-1] is _KEY else "the unquoted"
        try:
            value = self.construct_yaml_int(node) if node.tag == INT_TAG else self.construct_yaml_float(node)
            number = f" {value}"
            fix = f"write{number} for the number, or "
        except ValueError:  # more digits than Python converts
            number, fix = "", ""
        return Issue(field_path([p for p in parts if p is not None and p is not _KEY]), Verbatim(node.value),
                     f"is ambiguous: YAML 1.1 reads {what} {node.value} as {kind}{number}{note}, YAML 1.2 as text; "
                     f"{fix}quote it ('{node.value}') for the text")

    def _measure(self, node: Node, mark: Any) -> None:
        """Record the node's expanded size from its children's (aliases count in full) and refuse it over budget."""
        if isinstance(node, ScalarNode):
            values, characters, depth = 1, len(node.value), 0
        else:
            children: list[Node] = node.value if isinstance(node, SequenceNode) else \
                [n for pair in node.value for n in pair]
            if isinstance(node, MappingNode):
                for key, _ in node.value:
                    _refuse_key(key, key.start_mark)
            values, characters, depth = 1, 0, 0
            for child in children:
                child_values, child_characters, child_depth = self._measures[id(child)]
                values += child_values
                characters += child_characters
                depth = max(depth, child_depth)
            depth += 1
        if values > MAX_VALUES:
            raise YamlRefused(None, None, f"expands to more than {MAX_VALUES:,} values through its aliases (a YAML "
                              "alias bomb?); a configuration needs a few hundred", mark)
        if characters > MAX_CHARACTERS:
            raise YamlRefused(None, None, f"expands to more than {MAX_CHARACTERS:,} characters through its aliases; "
                              "write the values out once", mark)
        if depth > MAX_DEPTH:
            raise YamlRefused(None, None, f"nests more than {MAX_DEPTH} levels deep through its aliases", mark)
        self._measures[id(node)] = (values, characters, depth)

    # -- constructing: only graphs that passed the bounds get here ---------------------------------------------------

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except Exception as exc:  # e.g. !!int x, !!bool maybe, 2001-13-45, a 5,000-digit number: one line, not a trace
            raise ConstructorError(None, None, f"cannot read this {node.tag.rsplit(':', 1)[-1]} value: {exc}",
                                   node.start_mark) from None


def _refuse_key(key: Node, mark: Any) -> None:
    """A list or mapping as a key would build an unhashable key (and names no configuration field)."""
    if not isinstance(key, ScalarNode):
        what = "a list" if isinstance(key, SequenceNode) else "a mapping"
        raise YamlRefused(None, None, f"a key must be a single value such as a name, not {what}", mark)


def _part(parent: Node | None, index: Any) -> Any:
    """The path part of the node composed under ``parent`` (PyYAML passes the key node as ``index`` for values)."""
    if parent is None:
        return None
    if isinstance(parent, SequenceNode):
        return index
    if index is None:
        return _KEY
    return index.value if isinstance(index, ScalarNode) else "?"


def _construct_mapping(loader: ConfigLoader, node: Node, deep: bool = False) -> dict[Any, Any]:
    """A mapping with unique keys; ``<<`` merges mappings under the keys written here."""
    if not isinstance(node, MappingNode):
        raise ConstructorError(None, None, f"expected a mapping, found {node.id}", node.start_mark)
    written: dict[Any, Any] = {}
    merged: dict[Any, Any] = {}
    merge_seen = False
    for key_node, value_node in node.value:
        if key_node.tag == MERGE_TAG:
            if merge_seen:
                raise ConstructorError(None, None, "duplicate key '<<' (list the mappings to merge: <<: [*a, *b])",
                                       key_node.start_mark)
            merge_seen = True
            sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
            for source in sources:
                if not isinstance(source, MappingNode):
                    raise ConstructorError(None, None, "'<<' merges a mapping or a list of mappings (usually aliases "
                                           f"such as *defaults), not {source.id}", source.start_mark)
                for key, value in loader.construct_object(source, deep=deep).items():
                    merged.setdefault(key, value)  # the first mapping listed wins (the YAML merge type)
            continue
        key = loader.construct_object(key_node, deep=deep)
        if key in written:
            raise ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        written[key] = loader.construct_object(value_node, deep=deep)
    return {**merged, **written}


def _construct_int(loader: ConfigLoader, node: Node) -> int:
    """YAML 1.1 reads ``010`` as octal 8 (YAML 1.2: decimal 10); keep the text so the checks can refuse it."""
    value: int = loader.construct_yaml_int(node)
    return YamlOctal(value, node.value) if isinstance(node, ScalarNode) and _OCTAL.fullmatch(node.value) else value


ConfigLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
ConfigLoader.add_constructor(INT_TAG, _construct_int)


def load_yaml(text: str) -> Any:
    """Parse one YAML document of a configuration file. Raises :class:`yaml.YAMLError` (a :class:`YamlRefused`
    past a bound, :class:`YamlAmbiguities` for YAML 1.1 numbers) and nothing else."""
    loader = ConfigLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
