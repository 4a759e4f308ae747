"""The documentation: generated tables up to date, links and named paths that exist, a short
README.

``docs/generated/`` is written by ``scripts/update_docs.py`` (``make``, ``make docs``) from the
specification in ``sw/``; the hand-written pages (``README.md``, ``docs/*.md``) link to it. These
tests fail when a generated file is stale, missing or extra, when a shipped register file in
``hdl/`` is not what its register map writes, when the README grows past 300 lines, when a
relative Markdown link (or its ``#anchor``) points at nothing, and when a hand-written page
names, in backticks, a repository path or a ``sw.``/``rtl_gen.`` Python name that does not exist.
They also fail when the docs or the code's comments cite a development round or an issue number
(history is the changelog's), when a ```python block of a page a reader pastes from does not
run on the golden devices, and when a cycle count a page quotes is not the cycle model's.
All of it reads files, imports host code and runs the golden devices: a few seconds.
"""

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

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
    from sw.regfiles import register_files

    block, config = registry.shipped_config(module)
    for name, text in register_files(block.regmap(config), config, module,
                                     memory=block.memory_window(config)).items():
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


# -- a manual, not a development log ---------------------------------------------------------------
#: The trees whose text a reader meets: every page, and the code's comments and docstrings.
HISTORY_TREES = [ROOT / "docs", ROOT / "sw", ROOT / "rtl_gen", ROOT / "scripts", ROOT / "tb"]
HISTORY_FILES = [README, ROOT / "Makefile"]
_HISTORY_SUFFIXES = {".md", ".py", ".tcl", ".xdc", ".sh", ".cfg", ".toml"}
#: A development round by number (the word for it followed by a number, or a heading of a
#: measurement log that starts with the word "After" and a number) or a reference into an
#: issue tracker that a reader cannot open (the word "issue" with a number, a hash number
#: followed by "item", a hash number in brackets). A driver "session" in its ordinary sense
#: has no number after it.
_HISTORY = re.compile(
    r"\b[Ss]essions? \d+"
    r"|^#{1,6}[ \t]+After[ -]\d+\b|\bAfter-\d+\b"
    r"|(?<![-\w])[Rr]ound \d+\b"
    r"|\b[Ii]ssues? #?\d+"
    r"|#\d+,? item\b"
    r"|\(#\d+\)", re.MULTILINE)


def _history_files():
    files = list(HISTORY_FILES)
    for tree in HISTORY_TREES:
        files += [p for p in sorted(tree.rglob("*")) if p.suffix in _HISTORY_SUFFIXES
                  and "__pycache__" not in p.parts and p.is_file()]
    return files


def test_no_development_rounds_or_issue_numbers():
    """The docs and the code's comments state what is true now; how it got there is the
    changelog's, as release notes without round or issue numbers."""
    bad = []
    for path in _history_files():
        text = path.read_text(errors="replace")
        for m in _HISTORY.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            bad.append(f"{_rel(path)}:{line}: {m.group(0)!r}")
    assert not bad, ("development rounds or issue numbers (state what is true now; history "
                     "goes to docs/changelog.md):\n" + "\n".join(bad))


def test_changelog_is_release_notes_of_the_current_version():
    """The changelog's sections are versions, newest first, the newest the package's."""
    import tomllib
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    heads = re.findall(r"^## (\d+)\.(\d+)\.(\d+)\b", (DOCS / "changelog.md").read_text(),
                       re.MULTILINE)
    assert heads, "docs/changelog.md has no '## X.Y.Z' version sections"
    assert ".".join(heads[0]) == version, (heads[0], version)
    numbers = [tuple(map(int, h)) for h in heads]
    assert numbers == sorted(numbers, reverse=True) and len(set(numbers)) == len(numbers), heads


# -- snippets that run, figures that are the code's ------------------------------------------------
#: Pages whose ```python blocks run, in order and in one namespace per page, on the golden
#: devices, as a reader pastes them. Fragments that need a board, a library's objects or a long
#: run are ```py blocks on these pages (or live on other pages).
SNIPPET_PAGES = [README, DOCS / "gae.md", DOCS / "learner.md", DOCS / "replay.md"]
_PY_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_IMPORT = re.compile(r"^(?:from|import)[ \t]+([A-Za-z_][\w]*)", re.MULTILINE)


@pytest.mark.parametrize("page", SNIPPET_PAGES, ids=_rel)
def test_python_snippets_run(page):
    blocks = _PY_FENCE.findall(page.read_text())
    assert blocks, f"{_rel(page)} has no ```python block"
    namespace, skipped = {"__name__": "__doc_snippet__"}, []
    for k, code in enumerate(blocks):
        missing = sorted({m for m in _IMPORT.findall(code)
                          if importlib.util.find_spec(m) is None})
        if missing:
            skipped.append(f"block {k + 1} needs {', '.join(missing)}")
            continue
        exec(compile(code, f"{_rel(page)}, python block {k + 1}", "exec"), namespace)
    if skipped:
        pytest.skip(f"{_rel(page)}: " + "; ".join(skipped))


def _figures():
    """(page, text) pairs: figures the pages quote, formatted from the cycle models that the
    tests assert against the RTL."""
    from sw.gae import spec as gae_spec
    from sw.learner.schedule import step_cycles
    from sw.replay import spec as replay_spec
    from sw.replay.spec import ReplayOp
    from sw.shell.spec import HOST_READ_LATENCY

    def cfg(module):
        config = registry.shipped_config(module)[1]
        return getattr(config, "accel", config)

    gae8, gae64, replay = cfg("gae_accel_n8"), cfg("gae_accel_n64"), cfg("replay_accel_k16")
    s4, s8 = cfg("learner_cartpole_s4"), cfg("learner_kernel_s8")
    n8, n64 = gae_spec.run_cycles(gae8, 1024, 64), gae_spec.run_cycles(gae64, 1024, 64)
    c4 = [step_cycles(s4, b) for b in (32, 64, 256)]
    c8 = [step_cycles(s8, b) for b in (32, 64, 256)]
    # the CYCLES registers read one less than run_cycles
    fused = replay_spec.run_cycles(replay, ReplayOp.UPDATE_SAMPLE, 64, 64) - 1
    insert = replay_spec.run_cycles(replay, ReplayOp.INSERT_MAX, 1) - 1
    dqn = step_cycles(s4, 64)
    us = [f"{c:,}, {c / 300:.1f} µs" for c in c4 + c8]
    return [
        (README, f"64 trajectories × 1024 steps: {n64:,} cycles with 64 PEs, {n8:,} with 8."),
        (README, f"4,096 samples in "
                 f"{replay_spec.run_cycles(replay, ReplayOp.SAMPLE, 4096):,} cycles"),
        (README, f"64 samples in {c4[1]:,} cycles on 4 × 4 arrays, {c8[1]:,} on 8 × 8."),
        (DOCS / "gae.md", f"{n64:,} cycles with 64 PEs"),
        (DOCS / "gae.md", f"{n8:,} with 8."),
        (DOCS / "rl.md", f"{gae_spec.run_cycles(gae8, 128, 8)} accelerator cycles on "
                         "`gae_accel_n8`"),
        (DOCS / "rl.md", f"one gradient step is {dqn:,} learner cycles plus {fused} for the "
                         f"fused replay run and {insert} for the insert of one transition (as "
                         f"the CYCLES registers read them): {dqn + fused + insert:,} cycles"),
        (DOCS / "learner.md", f"| `learner_cartpole_s4` (shipped) | {c4[0]:,} cycles, "
                              f"{c4[0] / 300:.1f} µs | {us[1]} | {us[2]} |"),
        (DOCS / "learner.md", f"| `learner_kernel_s8` (8 × 8, shipped) | {c8[0]:,} cycles, "
                              f"{c8[0] / 300:.1f} µs | {us[4]} | {us[5]} |"),
        (DOCS / "learner.md", " / ".join(f"{c:,}" for c in c8) + " cycles at B = 32 / 64 / "
                              "256 instead of " + " / ".join(f"{c:,}" for c in c4)),
        (DOCS / "timing.md", f"`sw.shell.spec.HOST_READ_LATENCY` = {HOST_READ_LATENCY}"),
        (DOCS / "timing.md", f"({replay.latency} on `replay_accel_k16`)"),
        (DOCS / "timing.md", f"a run drains in {gae8.READ_LATENCY} + {gae8.pe.latency} + "
                             f"{gae8.write_latency} = {gae8.drain_cycles + 1} cycles"),
    ]


def test_quoted_figures_are_the_cycle_models():
    """Cycle counts the pages quote are what the spec's cycle models give today."""
    bad = [f"{_rel(page)} does not say: {text}" for page, text in _figures()
           if text not in " ".join(page.read_text().split())]
    assert not bad, "\n".join(bad)
