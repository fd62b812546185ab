"""The package's structure, read from the source: no import cycle, and two wings on one ground (docs/structure.md).

The import graph is built with :mod:`ast` from every module of ``hyperpod_dpd`` (``infra/``, ``k8s/`` and ``stacks/``
through their links inside the package), nothing imported. What counts as an import:

* every ``import`` and ``from ... import`` of a ``hyperpod_dpd`` module, at module level *and inside functions* (a lazy
  import runs as soon as the function does, so it is a dependency like any other);
* ``if TYPE_CHECKING:`` imports too. They never run, but the module is written against the names they bring (its
  annotations, which mypy and editors resolve), a type-only cycle becomes a run-time one the day a check needs
  ``isinstance`` or a default, and layering is about what a module needs to be understood. grimp, the graph under
  import-linter, counts them by default as well (python-grimp/grimp ``src/grimp/main.py``, ``build_graph(...,
  exclude_type_checking_imports=False)``). They are drawn dashed;
* ``from pkg import name`` is an import of ``pkg.name`` when that is a module, else of ``pkg``; importing ``a.b`` is not
  counted as importing the package ``a`` (Python runs ``a/__init__.py`` first, but every module of a package would then
  be in a cycle with an ``__init__`` that imports it; grimp does the same).

Run as a script to draw the graph: ``.venv/bin/python tests/test_structure.py`` writes ``.cache/structure.dot``
(``dot -Tsvg .cache/structure.dot -o .cache/structure.svg`` with Graphviz installed).
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "hyperpod_dpd"

Scope = Literal["module", "function", "type"]
# The two wings: deploy (stacks -> infra -> k8s, the CDK and cdk8s code) and operate (cli -> ops, the live-cluster
# and AWS client; hyperpod_dpd.aws is operate's boto3 client factory, which only operate may import). Everything else
# is the ground both stand on: config, catalogue, errors, monitoring, planner, ...
DEPLOY = ("stacks", "infra", "k8s")
OPERATE = ("cli", "ops", "aws")


@dataclass(frozen=True, kw_only=True)
class Import:
    importer: str
    imported: str
    line: int
    scope: Scope  # module level, inside a function, or under `if TYPE_CHECKING:` (wherever it sits)


@dataclass(frozen=True, kw_only=True)
class Graph:
    modules: Mapping[str, Path]
    imports: tuple[Import, ...]
    unresolved: tuple[Import, ...]  # names of the package that are no module of it (a typo, a deleted module)

    def targets(self, module: str) -> set[str]:
        return {i.imported for i in self.imports if i.importer == module}


def discover(package_dir: Path) -> dict[str, Path]:
    """Every module of the package, following directory links (``hyperpod_dpd/infra -> ../infra``)."""
    found: dict[str, Path] = {}
    for directory, subdirectories, files in os.walk(package_dir, followlinks=True):
        subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = Path(directory) / name
                parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
                if parts[-1] == "__init__":
                    parts.pop()
                found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports_of(module: str, path: Path, modules: Mapping[str, Path], package: str) -> Iterator[Import]:
    is_package = path.name == "__init__.py"

    def resolve(node: ast.ImportFrom) -> str | None:
        if not node.level:
            return node.module
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        return ".".join([*base, *([node.module] if node.module else [])])

    def visit(node: ast.AST, scope: Scope) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            inner: Scope = scope
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for statement in child.body:  # the else branch runs at run time: keep its scope
                    yield from visit_statement(statement, "type")
                for statement in child.orelse:
                    yield from visit_statement(statement, scope)
                continue
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and scope == "module":
                inner = "function"
            yield from visit_statement(child, inner)

    def visit_statement(node: ast.AST, scope: Scope) -> Iterator[Import]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == package or alias.name.startswith(package + "."):
                    yield Import(importer=module, imported=alias.name, line=node.lineno, scope=scope)
        elif isinstance(node, ast.ImportFrom):
            source = resolve(node)
            if source and (source == package or source.startswith(package + ".")):
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    yield Import(importer=module, imported=submodule if submodule in modules else source,
                                 line=node.lineno, scope=scope)
        yield from visit(node, scope)

    yield from visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), "module")


def build_graph(package_dir: Path) -> Graph:
    modules = discover(package_dir)
    package = package_dir.name
    found = [i for name, path in modules.items() for i in _imports_of(name, path, modules, package)]
    return Graph(modules=modules, imports=tuple(i for i in found if i.imported in modules and i.imported != i.importer),
                 unresolved=tuple(i for i in found if i.imported not in modules))


def cycles(graph: Graph) -> list[list[Import]]:
    """One cycle through each strongly connected component of more than one module (Tarjan), as its imports."""
    adjacency: dict[str, list[Import]] = {m: [] for m in graph.modules}
    for i in graph.imports:
        adjacency[i.importer].append(i)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(start: str) -> None:  # iterative: the graph is deep enough for Python's recursion limit to matter
        work = [(start, iter(adjacency[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                target = step.imported
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(adjacency[target])))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)

    for module in sorted(graph.modules):
        if module not in index:
            connect(module)
    return [_cycle_in(component, adjacency) for component in components]


def _cycle_in(component: set[str], adjacency: Mapping[str, list[Import]]) -> list[Import]:
    """A shortest path from the component's first module back to itself (breadth first, inside the component)."""
    start = min(component)
    came: dict[str, Import] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for step in sorted(adjacency[node], key=lambda i: (i.imported, i.line)):
                if step.imported == start:
                    path = [step]
                    while path[0].importer != start:
                        path.insert(0, came[path[0].importer])
                    return path
                if step.imported in component and step.imported not in came:
                    came[step.imported] = step
                    following.append(step.imported)
        frontier = following
    raise AssertionError(f"no cycle through {start} in its component")  # Tarjan's components always hold one


def render_cycle(cycle: Iterable[Import]) -> str:
    return " -> ".join(f"{i.importer} (line {i.line}, {i.scope})" for i in cycle) + f" -> {next(iter(cycle)).importer}"


def wing(module: str) -> str:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    if top in DEPLOY:
        return "deploy"
    if top in OPERATE:
        return "operate"
    return "ground"


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def closure(graph: Graph, start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph.targets(todo.pop()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def dot_source(graph: Graph) -> str:
    """The graph in Graphviz DOT: one cluster per wing and ground, one node per module, one edge per importing pair
    (solid: module level; dotted: inside a function only; dashed: under TYPE_CHECKING only)."""
    scopes: dict[tuple[str, str], set[str]] = {}
    for i in graph.imports:
        scopes.setdefault((i.importer, i.imported), set()).add(i.scope)
    lines = ["digraph hyperpod_dpd {", "  rankdir=LR;", '  node [shape=box, fontsize=10, fontname="Helvetica"];']
    for name, label in (("deploy", "deploy: stacks -> infra -> k8s"), ("operate", "operate: cli -> ops"),
                        ("ground", "ground: config, catalogue, errors, ...")):
        lines.append(f'  subgraph cluster_{name} {{ label="{label}";')
        lines += [f'    "{m}";' for m in sorted(graph.modules) if wing(m) == name]
        lines.append("  }")
    for (importer, imported), seen in sorted(scopes.items()):
        style = "solid" if "module" in seen else "dotted" if "function" in seen else "dashed"
        lines.append(f'  "{importer}" -> "{imported}" [style={style}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _forbidden(graph: Graph, importer_wing: str, imported: Iterable[str]) -> list[str]:
    banned = tuple(imported)
    return sorted({f"{i.importer} line {i.line} ({i.scope}) imports {i.imported}" for i in graph.imports
                   if wing(i.importer) == importer_wing and layer(i.imported) in banned})


# -- the package --------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def graph() -> Graph:
    return build_graph(ROOT / PACKAGE)


def test_the_graph_holds_every_module_of_both_wings_and_resolves_every_import(graph: Graph) -> None:
    # GIVEN the package read from the source, through its links to infra/, k8s/ and stacks/
    # WHEN its modules and imports are listed
    # THEN the linked folders' modules are there, a known import of each kind is found, and no import names a module
    # that does not exist (the graph would silently miss it)
    assert {"hyperpod_dpd.infra.platform", "hyperpod_dpd.k8s.charts", "hyperpod_dpd.stacks.application",
            "hyperpod_dpd.ops.kube", "hyperpod_dpd.config.loader"} <= set(graph.modules)
    assert Import(importer="hyperpod_dpd.k8s.operations_rbac", imported="hyperpod_dpd.catalogue.operator_api",
                  line=_line_of(graph, "hyperpod_dpd.k8s.operations_rbac", "hyperpod_dpd.catalogue.operator_api"),
                  scope="module") in graph.imports
    assert {i.scope for i in graph.imports} == {"module", "function", "type"}
    assert not graph.unresolved, [f"{i.importer} line {i.line}: {i.imported}" for i in graph.unresolved]


def _line_of(graph: Graph, importer: str, imported: str) -> int:
    return next(i.line for i in graph.imports if i.importer == importer and i.imported == imported)


def test_no_module_is_part_of_an_import_cycle(graph: Graph) -> None:
    # GIVEN every import of every module (module level, in functions, under TYPE_CHECKING)
    # WHEN the strongly connected components are found
    # THEN there are none: the layers read bottom up (a cycle is reported as its path, with each import's line)
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(render_cycle(c) for c in found)


def test_the_deploy_wing_imports_nothing_of_the_operate_wing(graph: Graph) -> None:
    # GIVEN stacks/, infra/ and k8s/ (CDK and cdk8s: what is deployed)
    # WHEN their imports are read
    # THEN none reaches cli, ops or the boto3 client factory: what both wings need is on the ground (the catalogue)
    assert not _forbidden(graph, "deploy", OPERATE)


def test_the_deploy_wing_flows_one_way_stacks_infra_k8s(graph: Graph) -> None:
    # GIVEN the deploy wing, stacks -> infra -> k8s
    # WHEN their imports are read
    # THEN k8s (the cdk8s charts and the GitOps tree, plain manifests) imports nothing of infra or stacks, and infra
    # nothing of stacks: a manifest both apply (Karpenter's, the operations RBAC) is built in k8s
    backwards = [f"{i.importer} line {i.line} imports {i.imported}" for i in graph.imports
                 if (layer(i.importer), layer(i.imported)) in {("k8s", "infra"), ("k8s", "stacks"), ("infra", "stacks")}]
    assert not backwards, backwards


def test_the_operate_wing_imports_nothing_of_stacks_or_infra_and_ops_nothing_of_k8s(graph: Graph) -> None:
    # GIVEN cli/, ops/ and aws.py (what runs against a live environment)
    # WHEN their imports are read
    # THEN none reaches the CDK constructs (stacks, infra), and ops none of the cdk8s charts either: ops works on
    # manifests as data, so it never starts cdk8s's jsii runtime
    assert not _forbidden(graph, "operate", ("stacks", "infra"))
    assert not [f"{i.importer} line {i.line} imports {i.imported}" for i in graph.imports
                if layer(i.importer) in ("ops", "aws") and layer(i.imported) == "k8s"]


def test_the_cli_renders_with_k8s_only_lazily_and_only_through_charts_that_need_no_construct(graph: Graph) -> None:
    # GIVEN the one thing the operate wing takes from the deploy wing: the CLI renders the desired IEC with the charts
    # (hpdpd rollout applies what the endpoints stack would; a second rendering would drift from the first)
    uses = [i for i in graph.imports if layer(i.importer) == "cli" and layer(i.imported) == "k8s"]
    # WHEN those imports and everything they pull in are read
    # THEN each is inside a function (cdk8s's jsii runtime starts only for the command that renders), and nothing they
    # reach is a CDK construct or an operate module
    assert uses, "the CLI no longer renders with k8s: drop this rule and its paragraph in docs/structure.md"
    assert not [f"{i.importer} line {i.line}" for i in uses if i.scope != "function"]
    for use in uses:
        reached = closure(graph, use.imported)
        assert not sorted(m for m in reached if layer(m) in ("stacks", "infra", *OPERATE)), use


def test_the_ground_imports_no_wing(graph: Graph) -> None:
    # GIVEN config, catalogue, errors, monitoring, planner and the package's own top-level modules
    # WHEN their imports are read
    # THEN none reaches either wing: both stand on it, it stands on nothing of theirs
    assert not _forbidden(graph, "ground", (*DEPLOY, *OPERATE))


def test_nothing_below_the_stacks_imports_them(graph: Graph) -> None:
    # GIVEN the stacks, the top of the deploy wing
    # WHEN the imports of every other module are read
    # THEN only the stacks import the stacks
    assert not [f"{i.importer} line {i.line} imports {i.imported}" for i in graph.imports
                if layer(i.imported) == "stacks" and layer(i.importer) != "stacks"]


def test_the_drawing_has_one_node_per_module_and_one_edge_per_importing_pair(graph: Graph) -> None:
    # GIVEN the graph
    # WHEN it is drawn
    # THEN the DOT text names every module once as a node and every importing pair once as an edge
    text = dot_source(graph)
    node_lines = [line for line in text.splitlines() if line.startswith('    "')]
    edge_lines = [line for line in text.splitlines() if " -> " in line and line.startswith('  "')]
    assert sorted(line.strip().rstrip(";").strip('"') for line in node_lines) == sorted(graph.modules)
    assert len(edge_lines) == len({(i.importer, i.imported) for i in graph.imports})


# -- the checker on a package of its own --------------------------------------------------------------------------------

def _package(tmp: Path, files: Mapping[str, str]) -> Path:
    root = tmp / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_cycle_through_a_lazy_and_a_type_checking_import_is_found_with_its_path(tmp_path: Path) -> None:
    # GIVEN a package whose model imports its checks inside a method, and whose checks import the model for types only
    root = _package(tmp_path, {
        "__init__.py": "",
        "model.py": "def issues():\n    from pkg.checks import run\n    return run()\n",
        "checks.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.model import Thing\n",
        "loader.py": "from . import model\n",
    })
    # WHEN its graph is built and its cycles are found
    found = cycles(build_graph(root))
    # THEN the one cycle is reported as its path, with the scope of each import; the loader is not in it
    assert [render_cycle(c) for c in found] == [
        "pkg.checks (line 3, type) -> pkg.model (line 2, function) -> pkg.checks"]


def test_relative_and_submodule_imports_resolve_to_the_module_named(tmp_path: Path) -> None:
    # GIVEN relative imports of a module, of a name in a package and of a module that does not exist
    root = _package(tmp_path, {
        "__init__.py": "VALUE = 1\n",
        "sub/__init__.py": "from .. import VALUE\nfrom . import leaf\n",
        "sub/leaf.py": "from ..sub import leaf as again\nimport pkg.missing\n",
    })
    # WHEN the graph is built
    built = build_graph(root)
    # THEN each import points at the module it names, and the missing one is reported unresolved
    assert {(i.importer, i.imported) for i in built.imports} == {("pkg.sub", "pkg"), ("pkg.sub", "pkg.sub.leaf")}
    assert [(i.importer, i.imported) for i in built.unresolved] == [("pkg.sub.leaf", "pkg.missing")]


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / ".cache" / "structure.dot"
    target.parent.mkdir(parents=True, exist_ok=True)
    drawn = build_graph(ROOT / PACKAGE)
    target.write_text(dot_source(drawn), encoding="utf-8")
    found = cycles(drawn)
    print(f"{target}: {len(drawn.modules)} modules, {len({(i.importer, i.imported) for i in drawn.imports})} "
          f"importing pairs, {len(found)} cycles")
    for cycle in found:
        print(f"cycle: {render_cycle(cycle)}")
    sys.exit(1 if found else 0)
