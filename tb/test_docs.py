"""The documentation: generated tables up to date, links and named paths that exist, a short
README.

``docs/generated/`` is written by ``scripts/update_docs.py`` (``make``, ``make docs``) from the
specification in ``sw/``; the hand-written pages (``README.md``, ``docs/*.md``) link to it. These
tests fail when a generated file is stale, missing or extra, when a shipped register file in
``hdl/`` is not what its register map writes, when the README grows past 300 lines, when a
relative Markdown link (or its ``#anchor``) points at nothing, and when a hand-written page
names, in backticks, a repository path or a ``sw.``/``rtl_gen.`` Python name that does not exist.
All of it reads files and imports host code: a second or two.
"""

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

import sw.driver  # noqa: F401 - first: sw.<block>.driver imported alone is a circular import
from sw import registry

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_MAX_LINES = 300
#: Every page, generated ones included (their links are checked too).
PAGES = [README] + sorted(DOCS.rglob("*.md"))
#: The hand-written pages whose backticked paths and names are checked: all but the changelog,
#: which names what was removed or renamed.
CURRENT = [README] + [p for p in sorted(DOCS.glob("*.md")) if p.name != "changelog.md"]


def _generator():
    spec = importlib.util.spec_from_file_location("update_docs", ROOT / "scripts" /
                                                  "update_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# -- generated tables ------------------------------------------------------------------------------
def test_generated_docs_are_fresh():
    gen = _generator()
    problems = gen.stale(gen.render())
    assert not problems, "\n".join(problems) + "\nrun `make docs` and commit docs/generated/"


@pytest.mark.parametrize("module", [m for m, b, _ in registry.SHIPPED
                                    if registry.BLOCKS[b].regmap is not None])
def test_hdl_register_files_are_the_register_map(module):
    """hdl/<module>/<module>_regs.{md,json,h}, which the docs' register pages repeat, are what
    the spec's register map writes (tb/test_hdl.py checks the Verilog and manifest)."""
    from sw.regmap import register_files

    block, config = registry.shipped_config(module)
    for name, text in register_files(block.regmap(config), config, module).items():
        path = ROOT / "hdl" / module / name
        assert path.exists() and path.read_text() == text, \
            f"{_rel(path)} is stale: run `make` and commit hdl/"


# -- README ----------------------------------------------------------------------------------------
def test_readme_is_short():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, \
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move detail to docs/"


def test_readme_names_every_shipped_module():
    text = README.read_text()
    missing = [m for m in registry.shipped_modules() if f"`{m}`" not in text]
    assert not missing, f"README.md's block table does not name {', '.join(missing)}"


# -- links and names -------------------------------------------------------------------------------
_FENCE = re.compile(r"^```.*?^```[ \t]*$", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]+`")
_LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
_TOP = ("sw/", "rtl_gen/", "tb/", "scripts/", "hdl/", "constraints/", "docs/", ".ci/")
_PY_NAME = re.compile(r"(?<![\w./-])(?:sw|rtl_gen)(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _prose(text: str) -> str:
    """The text without fenced code blocks (Mermaid diagrams, shell sessions)."""
    return _FENCE.sub("", text)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set:
    seen, out = {}, set()
    for h in _HEADING.findall(_prose(path.read_text())):
        s = _slug(h)
        out.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return out


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_relative_links_resolve(page):
    bad = []
    for target in _LINK.findall(_CODE.sub("", _prose(page.read_text()))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):          # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {_rel(dest)}")
    assert not bad, f"{_rel(page)}: " + "; ".join(bad)


def _code_spans(page: Path) -> list:
    return [s[1:-1] for s in _CODE.findall(_prose(page.read_text()))]


@pytest.mark.parametrize("page", CURRENT, ids=_rel)
def test_named_paths_exist(page):
    """A backticked repository path (``sw/gae/spec.py``, ``rtl_gen/shell/``) exists; paths with
    placeholders (``hdl/<module>/``) or globs are skipped."""
    bad = []
    for span in _code_spans(page):
        for word in span.split():
            word = word.rstrip(".,;:)")
            if not word.startswith(_TOP) or re.search(r"[<>*{}\[\]|$]", word):
                continue
            if not (ROOT / word.split("::")[0]).exists():
                bad.append(word)
    assert not bad, f"{_rel(page)} names missing paths: {', '.join(sorted(set(bad)))}"


def _resolves(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


@pytest.mark.parametrize("page", CURRENT, ids=_rel)
def test_named_python_objects_exist(page):
    """A backticked ``sw.…`` or ``rtl_gen.…`` name (module, class, function, attribute)
    imports."""
    names = {m for span in _code_spans(page) for m in _PY_NAME.findall(span)}
    bad = sorted(n for n in names if not _resolves(n))
    assert not bad, f"{_rel(page)} names missing Python objects: {', '.join(bad)}"
