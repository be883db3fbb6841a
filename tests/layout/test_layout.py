"""The package's map holds: imports go one way, layer by layer, with no cycle; the NumPy-free layers import no NumPy.

docs/contributing.md draws the same map.  Imports inside functions count (a cycle closed inside a function is
still a cycle); those under ``if TYPE_CHECKING:`` do not, since they never run.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tracer"

# Bottom to top: a module may import its own layer and the layers below it, never one above.  Every module must fall
# under a prefix of some layer other than the API's own "tracer" (tracer/__init__.py alone is the API layer): a package
# the map does not name is an error, not a module of the top.
# Each package's Chinese catalogue sits beside its messages but is data of the foundation: tracer/zh.py reads them all.
CATALOGUES = tuple(f"tracer.{p.parent.name}.zh" for p in sorted(PACKAGE.glob("*/zh.py")))
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("tracer.errors", "tracer.process", "tracer.files", "tracer.reading", "tracer.i18n", "tracer.zh", "tracer.messages",
                    "tracer.version", *CATALOGUES)),
    ("model", ("tracer.model",)),
    ("checkpoint readers", ("tracer.checkpoints",)),
    ("spec", ("tracer.spec",)),
    ("engine", ("tracer.engine",)),
    ("views", ("tracer.views",)),
    # what the front's results are made of: each feature's own result and views (lens, gradients, a comparison, a
    # patch grid, a probe, the graph, the page)
    ("results", ("tracer.lens", "tracer.grad", "tracer.compare", "tracer.patching", "tracer.probe", "tracer.graph", "tracer.page",
                 "tracer.attribute")),
    # the front door (prepare) and the public results (Trace, Diff): below every command
    ("front", ("tracer.front",)),
    # what every command shares: the exit path, the console, the options
    ("command line", ("tracer.cli.shared", "tracer.cli.options")),
    # the commands, each beside its feature
    ("features", ("tracer.run", "tracer.lens.command", "tracer.lens.cli", "tracer.grad.command", "tracer.grad.cli", "tracer.compare.cli",
                  "tracer.patching.cli", "tracer.probe.cli", "tracer.graph.cli", "tracer.page.cli", "tracer.check", "tracer.grade",
                  "tracer.checkpoints.importer", "tracer.checkpoints.import_cli", "tracer.attribute.command", "tracer.attribute.cli")),
    ("api", ("tracer",)),
    ("cli", ("tracer.cli", "tracer.__main__")),
)
# Features may use one another only in this order within a layer (a result another result's; a command another
# command's): grad renders as run does; compare runs gradients; the page draws lenses, gradients and diffs.
FEATURES = ("tracer.run", "tracer.lens", "tracer.grad", "tracer.compare", "tracer.patching", "tracer.attribute", "tracer.probe", "tracer.check",
            "tracer.graph", "tracer.page", "tracer.grade", "tracer.checkpoints.importer")
NO_NUMPY = ("model", "checkpoint readers", "spec")
API = "tracer"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _owner(module: str, table: tuple[str, ...]) -> str | None:
    """The longest prefix in ``table`` that ``module`` falls under."""
    best = None
    for prefix in table:
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best)):
            best = prefix
    return best


def layer_of(module: str) -> int:
    best: tuple[int, int] | None = None
    for i, (_, prefixes) in enumerate(LAYERS):
        owner = _owner(module, prefixes)
        if owner is not None and (owner != API or module == API) and (best is None or len(owner) > best[1]):
            best = (i, len(owner))
    assert best is not None, f"{module} is in no layer of tests/layout/test_layout.py: add it to the map (and to docs/contributing.md)"
    return best[0]


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(module: str) -> set[str]:
    """The package's modules that ``module`` imports, anywhere in its body, but under TYPE_CHECKING."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in MODULES and m != module}


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Each module's imports of the package, parsed once, when the first test asks (not as each worker collects)."""
    return {m: imports_of(m) for m in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_one() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_imports_go_down_the_layers() -> None:
    upward = []
    for module, deps in import_graph().items():
        for dep in deps:
            if layer_of(dep) > layer_of(module):
                upward.append(f"{module} ({LAYERS[layer_of(module)][0]}) imports {dep} ({LAYERS[layer_of(dep)][0]})")
    assert upward == []


def test_features_use_one_another_in_one_order() -> None:
    backward = []
    for module, deps in import_graph().items():
        mine = _owner(module, FEATURES)
        for dep in deps:
            theirs = _owner(dep, FEATURES)
            if mine and theirs and mine != theirs and FEATURES.index(theirs) > FEATURES.index(mine) and layer_of(dep) == layer_of(module):
                backward.append(f"{module} imports {dep}")
    assert backward == []


def test_every_module_is_on_the_map() -> None:
    for module in MODULES:
        layer_of(module)


def test_a_package_the_map_does_not_name_is_refused() -> None:
    """A new feature (tracer/steering/, say) must be placed on the map: it does not fall into the API layer by its prefix."""
    with pytest.raises(AssertionError, match="tracer.steering.core is in no layer"):
        layer_of("tracer.steering.core")
    assert layer_of("tracer") == [name for name, _ in LAYERS].index("api")


@pytest.mark.parametrize("layer", NO_NUMPY)
def test_numpy_free_layers_import_no_numpy(layer: str) -> None:
    prefixes = dict(LAYERS)[layer]
    names = [m for m in MODULES if layer_of(m) == [n for n, _ in LAYERS].index(layer) and _owner(m, prefixes)]
    code = "import sys\n" + "".join(f"import {m}\n" for m in names) + "print(sorted(m for m in sys.modules if m == 'numpy' or m.startswith('numpy.'))[:1])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent, check=True).stdout.strip()
    assert out == "[]", f"importing the {layer} layer imports NumPy"


def test_all_error_classes_live_in_errors() -> None:
    elsewhere = []
    for module, path in MODULES.items():
        if module == "tracer.errors":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception", "Exit"))
                                                                                 or b.id in ("TracerError", "BrokenContract"))
                                                      for b in node.bases):
                elsewhere.append(f"{module}.{node.name}")
    assert elsewhere == []


def test_no_module_is_named_like_a_public_function() -> None:
    import tracer

    public = {name for name in tracer.__all__ if name[0].islower()}
    clashing = [m for m in MODULES if m.rsplit(".", 1)[-1] in public]
    assert clashing == []


def test_the_map_in_contributing_names_every_module():
    """docs/contributing.md draws the map: every module of the package is named there (by its file name)."""
    doc = (PACKAGE.parent / "docs" / "contributing.md").read_text(encoding="utf-8")
    unnamed = [str(p.relative_to(PACKAGE.parent)) for p in sorted(PACKAGE.rglob("*.py"))
               if p.name != "__init__.py" and f"{p.stem}.py" not in doc and f"{p.stem}/" not in doc]
    assert not unnamed, f"docs/contributing.md does not name: {unnamed}"


# A name two modules define on purpose: each family file's LAYOUT (the registry reads them by module), and the
# --max-memory default the command line repeats so that --help imports nothing more (test_memory checks it equal).
SHARED_NAMES = {"LAYOUT", "DEFAULT_MAX_MEMORY"}


def test_no_two_classes_or_tables_share_a_name():
    """Names are unique when searched: a class, or an upper-case table or constant, is defined in one module."""
    where: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = [node.name] if isinstance(node, ast.ClassDef) else []
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names += [t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper() and len(t.id) > 1]
            for name in names:
                where.setdefault(name, []).append(module_name(path))
    shared = {name: [m for m in modules if m not in CATALOGUES] for name, modules in where.items() if name not in SHARED_NAMES}
    shared = {name: modules for name, modules in shared.items() if len(modules) > 1}  # the catalogues' tables are keyed the same on purpose
    assert not shared, shared


def test_the_tests_oracle_imports_nothing_from_tracer() -> None:
    """tests/helpers/oracle.py (and the random cases built on it) is the independent model: a kernel's mistake
    copied into it would hide the mistake, so it is written from the formulas and never imports tracer."""
    helpers = PACKAGE.parent / "tests" / "helpers"
    imported = []
    for name in ("oracle.py", "cases.py"):
        for node in ast.walk(ast.parse((helpers / name).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported += [(name, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.append((name, node.module))
    assert [(f, m) for f, m in imported if m == "tracer" or m.startswith("tracer.")] == []
    assert ("cases.py", "helpers.oracle") in imported  # the check reads the files it means
