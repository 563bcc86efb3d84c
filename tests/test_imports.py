"""The package's import graph has no circles (docs/design/layout.rst, "Import rules").

Every ``import`` and ``from ... import`` statement of every module counts,
at module level and inside functions alike (a lazy import is still a
dependency: it only moves the moment it runs). Cython sources (.pyx) are
read for their Python-level imports.
"""

import ast
import re
from pathlib import Path

import pytest

import paralingam

# The sources in this checkout (an installed wheel need not carry the .pyx files).
PACKAGE = Path(__file__).resolve().parents[1] / "paralingam"
# A Python-level import line of a .pyx (cimport lines are compile-time only).
PYX_IMPORT = re.compile(r"^[ \t]*(from[ \t]+[.\w]+[ \t]+import[ \t]+[^\n]+|import[ \t]+[.\w, \t]+)$",
                        re.M)


def _modules(root=PACKAGE):
    """``{dotted name: (path, is_package)}`` of every Python and Cython module."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".py", ".pyx") or "__pycache__" in path.parts:
            continue
        if path.suffix == ".pyx" and re.search(r"_x86_64_v\d$", path.stem):
            continue  # generated build stubs (setup.py): they include the real source
        parts = ("paralingam",) + path.relative_to(root).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


def _statements(path):
    """The import statements of one source file, as ast nodes."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".pyx":
        text = "\n".join(m.group(1).strip().rstrip("\\") for m in PYX_IMPORT.finditer(text)
                         if "(" not in m.group(1) or ")" in m.group(1))
    return [node for node in ast.walk(ast.parse(text, str(path)))
            if isinstance(node, (ast.Import, ast.ImportFrom))]


def import_graph(modules=None):
    """``{module: set of package modules it imports}``."""
    modules = _modules() if modules is None else modules
    graph = {}
    for name, (path, is_package) in modules.items():
        here = name if is_package else name.rpartition(".")[0]
        targets = set()
        for node in _statements(path):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            base = node.module or ""
            if node.level:
                anchor = here.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                # ``from pkg import mod`` depends on the module pkg.mod, else on pkg
                sub = f"{base}.{alias.name}"
                targets.add(sub if sub in modules else base)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph):
    """One import circle as a list of modules (first repeated last), or None."""
    state = {}  # 1: on the current path, 2: done
    path = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_package_has_no_import_circles():
    graph = import_graph()
    assert len(graph) > 30  # every module was found (the search, adjacency and lingam wings)
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_the_graph_sees_lazy_imports_and_finds_circles(tmp_path):
    # a circle closed only by an import inside a function, and one in a .pyx
    pkg = tmp_path / "paralingam"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import a\n")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n")
    (pkg / "c.pyx").write_text("cimport numpy\nfrom .d import x\n")
    (pkg / "d.py").write_text("import numpy\n\n\ndef g():\n    import paralingam.c\n")
    graph = import_graph(_modules(pkg))
    assert graph["paralingam.sub.b"] == {"paralingam.a"}
    assert graph["paralingam.c"] == {"paralingam.d"}
    cycle = find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1]
    assert set(cycle) in ({"paralingam.a", "paralingam.sub.b"}, {"paralingam.c", "paralingam.d"})
    # without the lazy imports there is no circle
    (pkg / "sub" / "b.py").write_text("def f():\n    pass\n")
    (pkg / "d.py").write_text("import numpy\n")
    assert find_cycle(import_graph(_modules(pkg))) is None


@pytest.mark.parametrize("name", ["fit", "DirectLiNGAM", "VARLiNGAM", "MultiGroupDirectLiNGAM",
                                  "CausalEffect", "BootstrapResult", "VARBootstrapResult",
                                  "FitResult", "Tuning", "DegenerateDataWarning",
                                  "LinearDependenceError", "InsufficientMemoryError", "utils"])
def test_public_names_stay_importable_from_the_package(name):
    assert name in paralingam.__all__
    assert getattr(paralingam, name) is not None


def test_the_lingam_drop_in_keeps_its_module_names():
    import paralingam as lingam
    import paralingam.utils
    from paralingam.utils import make_dot, make_prior_knowledge  # noqa: F401

    assert lingam.utils is paralingam.utils
    assert callable(lingam.utils.make_dot) and callable(lingam.utils.print_causal_directions)


def test_no_product_module_imports_the_testing_hooks():
    graph = import_graph()
    hooks = {"paralingam._testing", "paralingam.search._cpu_testing",
             "paralingam.search._scheduler_testing"}
    assert hooks <= set(graph)
    users = sorted(m for m, deps in graph.items() if deps & hooks and m not in hooks)
    assert users == [], f"product modules import the testing hooks: {users}"


def test_the_cuda_search_carries_no_test_hooks():
    # The fault injection and the launch profilers live in paralingam._testing,
    # search/_scheduler_testing.pyx and kernels/testing.cu, not in the search.
    import inspect
    import re

    from paralingam import _constants, _testing
    from paralingam.search import _cuda, _scheduler, _scheduler_testing

    for name in ("launch_only", "empty_launch_and_poll"):
        assert not hasattr(_scheduler, name) and callable(getattr(_scheduler_testing, name))
    for fn in (_cuda.search, _scheduler.search):
        assert "inject_fault" not in inspect.signature(fn).parameters
    product = _cuda.kernel_source()
    testing = _constants.kernel_text("testing.cu")
    kernels = set(re.findall(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(',
                             product))
    assert {"prep", "update_cov", *_testing.PL_TESTING_RENAMED} <= kernels and "fault" not in kernels
    assert "globaltimer" not in product and "#undef" not in product
    # the testing kernels stand in for the round kernels the scheduler loads
    assert set(re.findall(r'extern "C" __global__ void (\w+)\(', testing)) == \
        set(_testing.PL_TESTING_RENAMED)
