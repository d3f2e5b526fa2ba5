"""The README and docs/ describe the software as it is, from inside the repository.

No commit hashes, no story of how it was built, no diary of the machine it was built on, no
paths outside the repository; every repository path they name exists.
"""

import re

import pytest

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md"]

# A commit-like hash: 7 to 40 hex digits with at least one letter and one digit (so neither a
# plain number nor a word such as "defaced"), standing alone.
HASH = re.compile(r"(?<![0-9A-Za-z_./-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
FORBIDDEN = (
    "../shared", "/work/", "SPEC section", "SPEC 1", "SPEC 9", "SPEC 11",     # files outside the repository
    "this session", "last session", "this branch", "what changed", "what the last", "earlier session",
    "the issue's", "shared 2-core machine", "this 2-core machine", "this machine", "load average of",
)
# Paths in the repository that a page names (in backticks, links or code blocks).
PATH = re.compile(r"(?<![\w./-])((?:examples|tests|bin|docs|benchmarks|sphyr_hpc)/[\w./*{},-]*[\w*}])")
NOT_PATHS = {"sphyr_hpc/sphyr"}  # the Inspect AI task's registry name (sphyr_hpc/inspect/_registry.py)


def _page_ids():
    return [str(p.relative_to(ROOT)) for p in PAGES]


def test_there_are_docs_pages():
    names = {p.name for p in PAGES}
    for name in ("README.md", "scoring.md", "performance.md", "design.md", "development.md"):
        assert name in names


@pytest.mark.parametrize("page", PAGES, ids=_page_ids())
def test_no_commit_hashes(page):
    text = page.read_text(encoding="utf-8")
    found = [m.group(0) for m in HASH.finditer(text)]
    assert not found, f"{page.relative_to(ROOT)}: commit-like hashes {found}"


@pytest.mark.parametrize("page", PAGES, ids=_page_ids())
def test_no_build_narrative_machine_diary_or_outside_paths(page):
    text = page.read_text(encoding="utf-8").lower()
    found = [phrase for phrase in FORBIDDEN if phrase.lower() in text]
    assert not found, f"{page.relative_to(ROOT)}: {found}"


def _exists(path):
    path = path.rstrip(".,")
    if "{" in path:  # name.{json,md}
        stem, _, rest = path.partition("{")
        return all(_exists(stem + alternative + rest.partition("}")[2]) for alternative in rest.partition("}")[0].split(","))
    if "*" in path:
        return any(ROOT.glob(path))
    return (ROOT / path).exists()


@pytest.mark.parametrize("page", PAGES, ids=_page_ids())
def test_every_repository_path_named_exists(page):
    text = page.read_text(encoding="utf-8")
    base = page.parent
    missing = []
    for path in sorted(set(PATH.findall(text))):
        if path not in NOT_PATHS and not (_exists(path) or (base / path).exists()):
            missing.append(path)
    # relative links between docs pages: [x](score.md), [x](docs/score.md#anchor)
    for link in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
        if not (base / link).exists():
            missing.append(link)
    assert not missing, f"{page.relative_to(ROOT)} names what the repository does not hold: {missing}"


def test_the_hash_pattern_catches_hashes_and_spares_numbers_and_words():
    for text in ("against 9889ca1 now", "commit 1a6d9bb2c94d5020ab", "(e3fd1c5)"):
        assert HASH.search(text), text
    for text in ("24660 records", "1e-6", "defaced", "2.6e+07x", "0x1f", "sha256 digest", "docs/fields_record.png"):
        assert not HASH.search(text), text
