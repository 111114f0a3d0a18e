"""The package layout: one import root (``steadyrank``) over the top-level folders, imports only downward.

Layers, lowest first: ``metrics`` (numpy only) ← ``retrieval`` ← ``serve``. A module may import from its
own layer and the layers below it, never from a layer above (docs/ARCHITECTURE.md, "Layers").

Inside ``serve`` the same rule holds between its parts, lowest first (``SERVE_LAYERS``): a part is a
module or package of ``serve/``, or of one of its role folders ``server/`` and ``tools/`` (``GROUPS``),
e.g. ``errors``, ``runtime``, ``settings``, ``server.http``, ``server.hosting``, ``tools.golden``, ``cli``.
A part imports itself and parts of lower rank only (parts of equal rank do not import each other).
Ray is imported only where the app is hosted (``RAY_PARTS``); the HTTP edge (``serve/server/http``)
imports no Ray at all (docs/ARCHITECTURE.md, "Inside serve/").
"""

from __future__ import annotations

import ast
import graphlib
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10, the floor (requires-python): the dev extra installs tomli there
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
LAYERS = ("metrics", "retrieval", "serve")
#: The parts of serve/ by rank (docs/ARCHITECTURE.md, "Inside serve/"); a part without a rank fails the test.
SERVE_LAYERS = {
    "errors": 0, "output": 0, "telemetry": 0, "tracing": 0, "tools.probes": 0,
    "runtime": 1,
    "settings": 2, "tools.precision": 2,
    "server.calls": 3, "server.admission": 3, "server.cpu_priority": 3, "server.memory": 3,
    "server.default": 3, "server.model_refs": 3,
    "server.handles": 4, "server.quality": 4, "server.retry": 4,
    "server.components": 5, "server.http": 5, "server.golden_guard": 5, "tools.golden": 5, "tools.clq": 5,
    "tools.score_calibration": 5,
    "server.hosting": 6,
    "launcher": 7, "app": 7,
    "cli": 8,
}
#: Folders of serve/ whose children are the parts (a role: the server, the offline tools).
GROUPS = ("server", "tools")
#: The parts that may import Ray: where the app is hosted on Ray Serve, and what starts and stops it.
RAY_PARTS = ("server.hosting", "launcher", "cli")
#: Modules outside RAY_PARTS that may import Ray inside a function (never at import), and why.
LAZY_RAY = {"serve/server/components/common.py": "in_replica: whether the process is a Serve replica (the renice)"}


def _package_folders() -> set[str]:
    found = {"steadyrank"}
    for top in LAYERS:
        for init in (REPO / top).rglob("__init__.py"):
            found.add("steadyrank." + ".".join(init.parent.relative_to(REPO).parts))
    return found


def test_every_package_folder_is_listed_in_pyproject():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert set(config["packages"]) == _package_folders()
    assert config["package-dir"] == {"steadyrank": "steadyrank", **{f"steadyrank.{t}": t for t in LAYERS}}


def test_installed_import_names_are_namespaced(fresh_imports):
    """Outside the source tree only ``steadyrank.*`` is importable, never the bare folder names."""
    assert fresh_imports["bare"] == []


def test_metrics_needs_numpy_alone(fresh_imports):
    """Importing every metrics module pulls in numpy and the standard library, nothing else."""
    new = fresh_imports["metrics"]
    third = {n.split(".")[0] for n in new} - set(fresh_imports["stdlib"]) - {"steadyrank", "numpy"}
    # the runtime modules Cython-compiled extensions (numpy's, before numpy 2) register: not imports
    third = {n for n in third if not n.startswith("_cython_") and n != "cython_runtime"}
    own = sorted(n for n in new if n.startswith("steadyrank.") and not n.startswith("steadyrank.metrics"))
    assert (sorted(third), own) == ([], [])


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            if node.module in ("steadyrank", "steadyrank.serve", *(f"steadyrank.serve.{g}" for g in GROUPS)):
                found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def test_imports_only_run_downward_and_through_the_root():
    problems = []
    for rank, layer in enumerate(LAYERS):
        above = LAYERS[rank + 1:]
        for path in sorted((REPO / layer).rglob("*.py")):
            for line, module in _imported_modules(path):
                parts = module.split(".")
                where = f"{path.relative_to(REPO)}:{line} imports {module}"
                if parts[0] in LAYERS:
                    problems.append(f"{where} (bare name; use steadyrank.{module})")
                elif parts[0] == "steadyrank" and len(parts) > 1 and parts[1] in above:
                    problems.append(f"{where} (upward: {layer} is below {parts[1]})")
    assert problems == []


def _part_of(names: list[str]) -> str | None:
    """The part of serve/ a module path (below serve/) lies in, e.g. ``["server", "http", "app"]`` →
    ``server.http``; None for serve/__init__ and a group's own __init__."""
    names = [n.removesuffix(".py") for n in names]
    if names and names[0] in GROUPS:
        return f"{names[0]}.{names[1]}" if len(names) > 1 and names[1] != "__init__" else None
    return names[0] if names and names[0] != "__init__" else None


def _serve_part(module: str) -> str | None:
    parts = module.split(".")
    return _part_of(parts[2:]) if len(parts) > 2 and parts[:2] == ["steadyrank", "serve"] else None


def _parts_on_disk() -> set[str]:
    found = set()
    for folder, prefix in ((REPO / "serve", ""), *((REPO / "serve" / g, f"{g}.") for g in GROUPS)):
        for p in folder.iterdir():
            if p.name in GROUPS and folder == REPO / "serve":
                continue
            if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file():
                found.add(prefix + (p.stem if p.is_file() else p.name))
    return found


def test_serve_parts_import_only_lower_parts():
    assert _parts_on_disk() == set(SERVE_LAYERS), "every part of serve has a place in SERVE_LAYERS"
    problems = []
    for path in sorted((REPO / "serve").rglob("*.py")):
        rel = path.relative_to(REPO / "serve")
        own = _part_of(list(rel.parts))
        if own is None:
            continue
        for line, module in _imported_modules(path):
            other = _serve_part(module)
            if other is None or other == own:
                continue
            if SERVE_LAYERS[other] >= SERVE_LAYERS[own]:
                problems.append(f"serve/{rel}:{line} imports {module} ({own} may not import {other})")
    assert problems == []


def _ray_imports(tree: ast.Module) -> tuple[list[int], list[int]]:
    """Line numbers of the Ray imports of a module: at import time (module level, or under a
    module-level ``if``/``try``), and inside a function or class."""
    at_import, inside = [], []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            names = ([a.name for a in child.names] if isinstance(child, ast.Import)
                     else [child.module or ""] if isinstance(child, ast.ImportFrom) and child.level == 0 else [])
            if any(n == "ray" or n.startswith("ray.") for n in names):
                (inside if nested else at_import).append(child.lineno)
            visit(child, nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)))

    visit(tree, False)
    return at_import, inside


def test_the_http_edge_imports_no_ray():
    """No module of serve/server/http imports Ray, not even inside a function: what Ray's failures
    mean reaches it from the hosting layer (``Services.host``)."""
    found = {}
    for path in sorted((REPO / "serve" / "server" / "http").rglob("*.py")):
        at_import, inside = _ray_imports(ast.parse(path.read_text(), filename=str(path)))
        if at_import or inside:
            found[str(path.relative_to(REPO))] = at_import + inside
    assert found == {}


def test_ray_is_imported_only_where_the_app_is_hosted():
    """Outside ``RAY_PARTS`` no module imports Ray at import time (the components are plain classes,
    wrapped as deployments by the hosting layer), and inside a function only those of ``LAZY_RAY``."""
    problems = []
    for path in sorted((REPO / "serve").rglob("*.py")):
        rel = path.relative_to(REPO)
        part = _part_of(list(path.relative_to(REPO / "serve").parts))
        if part in RAY_PARTS:
            continue
        at_import, inside = _ray_imports(ast.parse(path.read_text(), filename=str(path)))
        problems += [f"{rel}:{line} imports Ray at import time" for line in at_import]
        if str(rel) not in LAZY_RAY:
            problems += [f"{rel}:{line} imports Ray (not where the app is hosted)" for line in inside]
    assert problems == []


def _module_name(path: Path) -> str:
    """The import name of a source file of a layer (``retrieval/shards/on_disk.py`` → ``steadyrank.retrieval.shards.on_disk``)."""
    parts = path.relative_to(REPO).with_suffix("").parts
    return "steadyrank." + ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(layer: str) -> dict[str, set[str]]:
    """``{module: modules of the same layer it imports}``: every import statement counts, at module
    level, inside a function or under ``if TYPE_CHECKING:`` (each is an edge a reader follows);
    ``from package import name`` points at the submodule ``package.name`` when there is one.
    Importing ``a.b.c`` is an edge to ``a.b.c`` only, not to the packages above it (a package's
    ``__init__`` runs first, but the lazy ones import nothing there)."""
    modules = {_module_name(p): p for p in (REPO / layer).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets.add(node.module)
                targets.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def test_no_import_cycles_in_retrieval():
    """No module of ``retrieval`` reaches itself through imports of any kind (issue 40: ``index`` →
    ``shards`` → ``pipeline`` → ``index`` was one): its modules can be read, and tested, bottom up."""
    graph = _import_graph("retrieval")
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle {' -> '.join(exc.args[1])}") from None
    assert set(order) == set(graph)


def _type_checking_imports(tree: ast.Module) -> dict[str, str]:
    """``{name: module}`` of the ``from module import name`` statements under ``if TYPE_CHECKING:``."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module, ast.dump(stmt)
                found.update({alias.name: stmt.module for alias in stmt.names})
    return found


def test_lazy_packages_declare_their_exports_alike_in_all_three_places():
    """A package with lazy exports (``steadyrank.lazy.lazy_exports``) names each export three times: in
    ``_EXPORTS`` (what ``__getattr__`` imports at run time), in the literal ``__all__`` and in the
    ``if TYPE_CHECKING:`` imports (what a type checker reads). They must agree, name and module."""
    import importlib

    for package, folder in (("steadyrank.retrieval", "retrieval"), ("steadyrank.retrieval.shards", "retrieval/shards"),
                            ("steadyrank.serve.runtime", "serve/runtime")):
        module = importlib.import_module(package)
        exports: dict[str, str] = module._EXPORTS
        assert module.__all__ == sorted(exports), package
        # importing a submodule binds its name in the package: an export of that name would be replaced
        submodules = {p.stem for p in (REPO / folder).glob("*.py")} | {p.parent.name for p in (REPO / folder).glob("*/__init__.py")}
        assert not set(exports) & submodules, package
        tree = ast.parse((REPO / folder / "__init__.py").read_text())
        assert _type_checking_imports(tree) == exports, package
