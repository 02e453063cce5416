"""The floors of the code (docs/architecture.md), derived from its own imports, so the layering stays true.

Each top-level folder is placed at its import path (``search/`` is ``evoforge.search``...), every ``import``
statement is read (at module level or inside a function: a lazy import is still an import), and the graph is
held to two rules: no module imports one of a higher floor (the engine never imports the face), and there is no
import circle, registries included.

``python -m tests.test_architecture`` prints the floors and what each package imports.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FOLDERS = {"evoforge": "evoforge", "knowledge": "evoforge.knowledge", "backends": "evoforge.backends",
           "mutators": "evoforge.mutators", "search": "evoforge.search", "judge": "evoforge.judge"}
# Kernel templates are candidate sources shipped as data: they import what a candidate imports (a CuTe seed
# imports evoforge.backends.cute to load its CUDA source), and only the chain executes them.
DATA = ("evoforge.knowledge.templates",)

VOCABULARY = frozenset({"evoforge.core", "evoforge.task"})
# The face: commands, the Python API, the campaign driver, reports, ablations, the dashboard. It stands on the
# engine; nothing of the engine imports it. Each subsystem's command module (``knowledge/cli.py``...) is face too.
FACE = frozenset({"evoforge.cli", "evoforge.campaign_cli", "evoforge.experiments_cli", "evoforge.api",
                  "evoforge.campaign", "evoforge.campaign_setup", "evoforge.route", "evoforge.baseline", "evoforge.confirm", "evoforge.task_start", "evoforge.starts", "evoforge.starts.files", "evoforge.starts.generate", "evoforge.starts.inductor", "evoforge.starts.knowledge", "evoforge.starts.landscape", "evoforge.task_state", "evoforge.stopping", "evoforge.summary", "evoforge.children", "evoforge.config", "evoforge.export", "evoforge.progress", "evoforge.report",
                  "evoforge.ablation", "evoforge.ablation_stats", "evoforge.dashboard", "evoforge.kernelbench_fetch"})
# The package itself (``evoforge/__init__.py``) is the front door: it exports the vocabulary and, lazily, the
# Python API, so it stands with the face. Python runs it before any module of the package, so at module level it
# imports only the vocabulary (``test_the_package_loads_only_the_vocabulary``).
PACKAGE = "evoforge"
# What each floor may import (besides itself); mutators and backends stand side by side on knowledge.
MAY_IMPORT = {
    "vocabulary": set(),
    "knowledge": {"vocabulary"},
    "backends": {"vocabulary", "knowledge"},
    "judge": {"vocabulary", "knowledge", "backends"},
    "mutators": {"vocabulary", "knowledge"},
    "search": {"vocabulary", "knowledge", "backends", "judge", "mutators"},
    "face": {"vocabulary", "knowledge", "backends", "judge", "mutators", "search"},
}


def modules() -> dict[str, Path]:
    out = {}
    for folder, package in FOLDERS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            if not name.startswith(DATA):
                out[name] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the modules of the code base it imports (any import statement anywhere in the file)."""
    mods = modules()

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(filter(None, (known(a.name) for a in node.names)))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = name.split(".") if is_package else name.split(".")[:-1]
                    parent = parent[: len(parent) - node.level + 1]
                    base = ".".join(parent + ([node.module] if node.module else []))
                for alias in node.names:  # ``from evoforge import knowledge`` imports evoforge.knowledge
                    full = f"{base}.{alias.name}"
                    target = full if full in mods else known(base)
                    if target:
                        targets.add(target)
        targets.discard(name)
        graph[name] = targets
    return graph


def floor(module: str) -> str:
    if module in VOCABULARY:
        return "vocabulary"
    if module in FACE or module == PACKAGE or module.endswith(".cli"):
        return "face"
    package = module.split(".")[1]
    if package in MAY_IMPORT:
        return package
    raise AssertionError(f"{module}: on no floor; add it to FACE or VOCABULARY in tests/test_architecture.py "
                         "and to docs/architecture.md")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_module_stands_on_its_floor_or_lower() -> None:
    graph = import_graph()
    wrong = [f"{m} ({floor(m)}) imports {t} ({floor(t)})" for m, targets in sorted(graph.items())
             for t in sorted(targets) if floor(t) != floor(m) and floor(t) not in MAY_IMPORT[floor(m)]]
    assert not wrong, "imports against the floors (docs/architecture.md):\n" + "\n".join(wrong)


def test_the_engine_never_imports_the_face() -> None:
    graph = import_graph()
    up = [f"{m} imports {t}" for m, targets in sorted(graph.items()) if floor(m) != "face"
          for t in sorted(targets) if floor(t) == "face"]
    assert not up, "\n".join(up)


def test_no_import_circle() -> None:
    """Registries included: a registry loads its built-in members by name (lazily), and the members import their
    names and base classes from leaves (``search/strategies/names.py``, ``backends/base.py``), never the registry."""
    assert cycles(import_graph()) == []


def test_the_graph_is_read_from_the_code() -> None:
    """The reader sees lazy imports and ``from package import module`` (a reader that saw nothing passes all)."""
    graph = import_graph()
    assert FACE | VOCABULARY | {PACKAGE} <= set(graph), \
        f"no such module: {sorted((FACE | VOCABULARY | {PACKAGE}) - set(graph))}"
    assert "evoforge.api" in graph[PACKAGE]  # inside __getattr__
    assert "evoforge.backends.cuda" in graph["evoforge.backends.registry"]  # lazy, inside _load_builtin
    assert "evoforge.knowledge" in graph["evoforge.mutators.rules"]  # from evoforge import knowledge
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_package_loads_only_the_vocabulary() -> None:
    """``import evoforge.search.store`` runs ``evoforge/__init__.py`` first: at module level it may import only the
    vocabulary, the API's names resolve when first used (PEP 562 ``__getattr__``), and nothing of the face is
    loaded by importing the package or the vocabulary."""
    import subprocess

    tree = ast.parse((REPO / "evoforge" / "__init__.py").read_text())
    eager = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    eager |= {n.module or "" for n in tree.body if isinstance(n, ast.ImportFrom) and n.module != "typing"}
    assert eager <= VOCABULARY, f"evoforge/__init__.py imports at module level: {sorted(eager - VOCABULARY)}"
    probe = ("import sys, evoforge, evoforge.core, evoforge.task\n"
             f"print(sorted(m for m in sys.modules if m in {sorted(FACE)!r} or m.endswith('.cli')))\n"
             "evoforge.run\n"
             "print('evoforge.api' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[]", "True"], out.stdout


def test_nothing_outside_backends_and_the_judge_branches_on_a_backend_name() -> None:
    """Backend-specific set-up belongs to the backend (``evaluation_process``, ``device_count``), not to callers. The
    judge drives the device backends (an arena's handle is keyed by its device's kind; the interpreter's times say
    nothing of a GPU), as it did when it lived in ``backends/``; everything above them may not branch on a name."""
    names = {"cuda", "xpu", "interpreter", "replay"}
    found = []
    for module, path in modules().items():
        if module.startswith(("evoforge.backends", "evoforge.judge")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                for side in [node.left, *node.comparators]:
                    consts = [side, *getattr(side, "elts", [])]
                    if any(isinstance(c, ast.Constant) and c.value in names for c in consts):
                        found.append(f"{module}:{node.lineno}")
    assert not found, f"branches on a backend's name: {found}"


def test_docs_architecture_names_what_the_code_has() -> None:
    """docs/architecture.md lists every face module and points to conformance suites that exist."""
    import re

    doc = (REPO / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`(evoforge(?:\.\w+)*)`", doc))
    assert FACE - named == set(), f"face modules missing from docs/architecture.md: {sorted(FACE - named)}"
    paths = set(re.findall(r"`((?:tests|backends|mutators|search|knowledge|evoforge)/[\w/]+\.(?:py|yaml|md))`", doc))
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"
    assert {"test_conformance.py", "test_store_conformance.py", "test_llm_client_conformance.py"} <= {
        Path(p).name for p in paths}


def main() -> None:
    graph = import_graph()
    by_floor: dict[str, list[str]] = defaultdict(list)
    for m in graph:
        by_floor[floor(m)].append(m)
    for name in MAY_IMPORT:
        print(f"{name}: {', '.join(sorted(by_floor[name]))}")
    edges: dict[tuple[str, str], int] = defaultdict(int)
    for m, targets in graph.items():
        for t in targets:
            if floor(m) != floor(t):
                edges[floor(m), floor(t)] += 1
    print()
    for (a, b), n in sorted(edges.items()):
        print(f"{a} -> {b}: {n} import(s)")


if __name__ == "__main__":
    main()


def test_every_package_of_the_code_is_in_the_distribution() -> None:
    """``pyproject.toml`` lists the packages a wheel holds one by one (the folders map onto ``evoforge.*``): a new
    subpackage left out installs from a checkout (an editable install finds it) and is missing from ``pip install .``
    and the wheel."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {name for name, path in modules().items() if path.name == "__init__.py"}
    assert found == listed, f"not in pyproject.toml's packages: {sorted(found - listed)}; listed, not found: " \
        f"{sorted(listed - found)}"
