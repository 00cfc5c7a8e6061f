"""The package's layout: every module imports on its own in a fresh interpreter, the module graph has no
import cycle (counting every import, inside functions too: a function-level import hides a cycle, it does not
remove it), the models never import the layers above them (formulations, backends, io, frames' builders,
datasets, the CLI), and no module swaps itself for another (the package is unreleased: no deprecated module
paths). The packaging names no missing data."""

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import dpopt

ROOT = Path(dpopt.__file__).resolve().parent
MODULES = sorted(m.name for m in pkgutil.walk_packages([str(ROOT)], prefix="dpopt."))


def _module_file(name: str) -> Path:
    rel = Path(*name.split(".")[1:])
    pkg = ROOT / rel / "__init__.py"
    return pkg if pkg.exists() else ROOT / (str(rel) + ".py")


def _imports(name: str, everywhere: bool = True) -> set[str]:
    """dpopt modules imported by module ``name``: every import statement of the module (``everywhere``: also
    those inside functions, classes and conditionals, an AST walk over the whole module) or only
    those at module level."""
    path = _module_file(name)
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in (ast.walk(tree) if everywhere else tree.body):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("dpopt"):
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    out.add(sub if sub in MODULES else target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("dpopt"))
    return {m for m in out if m in MODULES and m != name}


def _top_level_imports(name: str) -> set[str]:
    """dpopt modules imported at module level (not inside functions) by module ``name``."""
    return _imports(name, everywhere=False)


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` as a path (first module repeated at the end), or []."""
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(m, stack):
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycle.extend(stack[stack.index(t):] + [m, t] if t in stack else [m, t])
                return True
            if state.get(t) is None and visit(t, stack + [m]):
                return True
        state[m] = 2
        return False

    for m in sorted(graph):
        if state.get(m) is None and visit(m, []):
            break
    return cycle


def _graph(imports) -> dict[str, set[str]]:
    # submodules of a package are imported after the package's __init__, so edges into a parent package are
    # the package's own business: count edges between modules that are not ancestors of each other
    return {m: {t for t in imports(m) if not m.startswith(t + ".") and not t.startswith(m + ".")}
            for m in MODULES}


def test_every_module_imports_in_isolation():
    code = ("import importlib, sys\nfailed = []\nfor name in sys.argv[1:]:\n"
            "    for m in [k for k in sys.modules if k == 'dpopt' or k.startswith('dpopt.')]:\n"
            "        del sys.modules[m]\n"
            "    try:\n        importlib.import_module(name)\n"
            "    except Exception as exc:\n        failed.append(f'{name}: {type(exc).__name__}: {exc}')\n"
            "print('\\n'.join(failed))\nsys.exit(1 if failed else 0)\n")
    # one interpreter per module would take a minute; clearing dpopt from sys.modules before each import
    # makes every import start from nothing but the third-party libraries
    res = subprocess.run([sys.executable, "-W", "ignore", "-c", code, *MODULES], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr


def test_no_import_cycle_at_module_level():
    cycle = _cycle(_graph(_top_level_imports))
    assert not cycle, " -> ".join(cycle)


def test_no_import_cycle_at_all():
    """Issue 19 item 5: no cycle even through imports inside functions (reports and model-file loaders
    register themselves from the io side, the datasets and frames' readers never import back, ...)."""
    cycle = _cycle(_graph(_imports))
    assert not cycle, " -> ".join(cycle)


def test_cycle_finder_sees_function_level_imports():
    graph = {"a": {"b"}, "b": {"a"}}
    assert _cycle(graph) == ["a", "b", "a"]
    # a cycle closed only inside a function is seen by the AST walk, not by the module-level reading
    assert "dpopt.backends._status" in _imports("dpopt.registry")
    assert "dpopt.backends._status" not in _top_level_imports("dpopt.registry")


#: what the models may never import, not even inside a function: the layers built on them
ABOVE_MODELS = ("dpopt.formulations", "dpopt.backends", "dpopt.io", "dpopt.cli", "dpopt.cli_frames", "dpopt.compare",
                "dpopt.datasets", "dpopt.release", "dpopt.plots")


@pytest.mark.parametrize("name", [m for m in MODULES if m.startswith("dpopt.models.")])
def test_models_do_not_import_backends_or_io(name):
    bad = {t for t in _imports(name) if t.startswith(ABOVE_MODELS)}
    assert not bad, f"{name} imports {sorted(bad)}"


@pytest.mark.parametrize("name", ["dpopt.feasibility", "dpopt.frames", "dpopt.numerics", "dpopt.result",
                                  "dpopt._validate"])
def test_low_level_modules_do_not_import_models(name):
    bad = {t for t in _imports(name) if t.startswith(("dpopt.models",) + ABOVE_MODELS)}
    assert not bad, f"{name} imports {sorted(bad)}"


def test_no_module_swaps_itself():
    """Issue 19 item 6: no ``sys.modules`` swap or module-class swap (deprecated aliases are gone)."""
    assert not (ROOT / "modelfile.py").exists() and not (ROOT / "_deprecated.py").exists()
    for name in MODULES:
        text = _module_file(name).read_text()
        assert "sys.modules[__name__]" not in text, name
        assert ".__class__ = " not in text, name


def test_packaging_names_no_missing_data():
    import tomllib
    repo = ROOT.parent
    cfg = tomllib.loads((repo / "pyproject.toml").read_text())
    package_data = cfg.get("tool", {}).get("setuptools", {}).get("package-data", {})
    for package, globs in package_data.items():
        for g in globs:
            assert list((repo / package.replace(".", "/")).glob(g)), f"package-data {package}: {g} matches nothing"
