"""The documentation in docs/ is self-contained: every pointer to it resolves, nothing cites a file
outside the repository, and the options table of docs/api.md is the registered backends' own.

``python tests/test_docs.py`` rewrites that table after a backend's options change."""

import inspect
import re
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SOURCES = [p for d in ("dpopt", "tests", "examples", "benchmarks") for p in (ROOT / d).rglob("*.py")]
TEXTS = SOURCES + list((ROOT / "models").glob("*.toml")) + list(DOCS.glob("*.md")) + [ROOT / "README.md"]


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = unicodedata.normalize("NFKC", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(md: Path) -> set[str]:
    out = set()
    in_code = False
    for line in md.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            out.add(_slug(line.lstrip("#")))
    return out


def test_docs_index_lists_every_page():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    for page in DOCS.glob("*.md"):
        if page.name != "README.md":
            assert f"]({page.name})" in index, f"docs/README.md does not link {page.name}"


def test_markdown_links_resolve():
    for md in list(DOCS.glob("*.md")) + [ROOT / "README.md"]:
        text = md.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue                                   # http(s), mailto
            path, _, anchor = target.partition("#")
            dest = (md.parent / path).resolve() if path else md
            assert dest.exists(), f"{md.relative_to(ROOT)}: broken link {target}"
            if anchor and dest.suffix == ".md":
                assert anchor in _anchors(dest), f"{md.relative_to(ROOT)}: no heading for #{anchor} in {path or md.name}"


def test_code_points_to_existing_docs():
    for f in TEXTS:
        for page, anchor in re.findall(r"docs/([A-Za-z_]+\.md)(?:#([\w-]+))?", f.read_text(encoding="utf-8")):
            assert (DOCS / page).is_file(), f"{f.relative_to(ROOT)} cites docs/{page}, which does not exist"
            if anchor:
                assert anchor in _anchors(DOCS / page), f"{f.relative_to(ROOT)} cites docs/{page}#{anchor}"


def test_nothing_cites_a_specification_outside_the_repository():
    for f in TEXTS:
        if f == Path(__file__).resolve():
            continue
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            assert not re.search(r"\bSPEC\b", line), f"{f.relative_to(ROOT)}:{i} cites SPEC: {line.strip()}"


# ------------------------------------------------------------------ the options table of docs/api.md
COMMON = ("solver", "time_limit", "rel_gap", "verbose", "solver_options")
TABLE_START = "<!-- options table: generated from the registered handlers' signatures -->"
TABLE_END = "<!-- end of options table -->"
BACKEND_ORDER = ["exact", "algorithm1", "enumerate", "pyomo", "cvxpy", "scipy", "monte-carlo"]


def options_table() -> str:
    """One row per (backend, model class): tasks, the common options it takes (✓, with the task when only
    one takes it and the default when not None/False) and its own options, from the handlers' signatures."""
    from dpopt import registry
    registry.available_backends()                      # imports every backend
    rows: dict = {}
    for (name, cls, task), fn in registry._HANDLERS.items():
        params = [q for q in list(inspect.signature(fn).parameters.values())[1:]
                  if q.kind in (q.POSITIONAL_OR_KEYWORD, q.KEYWORD_ONLY)]
        rows.setdefault((name, cls.__name__), []).append((task, params))
    lines = ["| backend | model | task | " + " | ".join(f"`{c}`" for c in COMMON) + " | its own options |",
             "|---|---|---|" + "---|" * len(COMMON) + "---|"]

    def order(key):
        return (BACKEND_ORDER.index(key[0]) if key[0] in BACKEND_ORDER else len(BACKEND_ORDER), key)

    for (name, model), entries in sorted(rows.items(), key=lambda kv: order(kv[0])):
        tasks = sorted(t for t, _ in entries)
        default, where, own = {}, {}, []
        for task, params in entries:
            for q in params:
                if q.name in COMMON:
                    default[q.name] = q.default
                    where.setdefault(q.name, set()).add(task)
                elif q.name not in own:
                    own.append(q.name)

        def cell(c):
            if c not in default:
                return "—"
            only = "" if len(where[c]) == len(tasks) else next(iter(where[c]))
            value = "" if default[c] in (None, False, inspect.Parameter.empty) else repr(default[c])
            inner = ": ".join(x for x in (only, value) if x)
            return "✓" + (f" ({inner})" if inner else "")

        lines.append(f"| `{name}` | {model} | {', '.join(tasks)} | " + " | ".join(cell(c) for c in COMMON)
                     + " | " + (", ".join(f"`{o}`" for o in own) or "—") + " |")
    return "\n".join(lines)


README_START = "<!-- README options table: generated -->"
README_END = "<!-- end of README options table -->"
SHORT = {"StratifiedDesign": "stratified", "MinCostDesign": "min-cost", "HierarchyBudget": "hierarchy",
         "SampleSizeProgram": "sample size", "SampleSizeStudy": "study", "ImportanceSampling": "importance"}


def readme_options_table() -> str:
    """The README's one options table: per backend, which common options it takes (✓ for every family it
    solves, else the families that take it), from the handlers' signatures."""
    from dpopt import registry
    registry.available_backends()
    fams: dict = {}
    takes: dict = {}
    for (name, cls, _task), fn in registry._HANDLERS.items():
        fams.setdefault(name, set()).add(cls.__name__)
        for q in inspect.signature(fn).parameters.values():
            if q.name in COMMON and q.kind in (q.POSITIONAL_OR_KEYWORD, q.KEYWORD_ONLY):
                takes.setdefault((name, q.name), set()).add(cls.__name__)
    lines = ["| backend | families | " + " | ".join(f"`{c}`" for c in COMMON) + " |",
             "|---|---|" + "---|" * len(COMMON)]
    for name in sorted(fams, key=lambda b: (BACKEND_ORDER.index(b) if b in BACKEND_ORDER else 99, b)):
        order = [c for c in SHORT if c in fams[name]]

        def cell(c):
            got = takes.get((name, c), set())
            if not got:
                return "—"
            return "✓" if got == fams[name] else ", ".join(SHORT[f] for f in order if f in got)

        lines.append(f"| `{name}` | {', '.join(SHORT[f] for f in order)} | " + " | ".join(cell(c) for c in COMMON)
                     + " |")
    return "\n".join(lines)


def test_readme_options_table_matches_the_backends():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    i, j = text.index(README_START) + len(README_START), text.index(README_END)
    assert text[i:j].strip() == readme_options_table(), \
        "README's options table is out of date: run python tests/test_docs.py to regenerate it"


DEFAULTS_START = "<!-- README defaults table: generated from dpopt/options.py -->"
DEFAULTS_END = "<!-- end of README defaults table -->"


def test_readme_defaults_table_is_the_declarations():
    from dpopt.options import defaults_table
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    i, j = text.index(DEFAULTS_START) + len(DEFAULTS_START), text.index(DEFAULTS_END)
    assert text[i:j].strip() == defaults_table(), \
        "README's defaults table is out of date: run python tests/test_docs.py to regenerate it"


def _api_table(text: str) -> str:
    i, j = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    return text[i:j].strip()


def test_api_options_table_matches_the_backends():
    text = (DOCS / "api.md").read_text(encoding="utf-8")
    assert _api_table(text) == options_table(), \
        "docs/api.md's options table is out of date: run python tests/test_docs.py to regenerate it"


if __name__ == "__main__":
    api = DOCS / "api.md"
    text = api.read_text(encoding="utf-8")
    i, j = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    api.write_text(text[:i] + "\n" + options_table() + "\n" + text[j:], encoding="utf-8")
    print(f"rewrote the options table of {api}", file=sys.stderr)
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    i, j = text.index(README_START) + len(README_START), text.index(README_END)
    text = text[:i] + "\n" + readme_options_table() + "\n" + text[j:]
    from dpopt.options import defaults_table
    i, j = text.index(DEFAULTS_START) + len(DEFAULTS_START), text.index(DEFAULTS_END)
    readme.write_text(text[:i] + "\n" + defaults_table() + "\n" + text[j:], encoding="utf-8")
    print(f"rewrote the options table of {readme}", file=sys.stderr)
