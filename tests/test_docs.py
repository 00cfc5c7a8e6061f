"""The documentation in docs/ is self-contained: every pointer to it resolves, and nothing cites a file
outside the repository."""

import re
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
