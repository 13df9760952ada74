"""Code, tests and docs say how things are, and the repository is self-contained (STYLE.md, "Docs and comments: how it
is, not how it came to be"): no issue number, no name of who measured, and no pointer to a contract outside the
repository; the merchant's contract is docs/api.md, and a reference to a rule names its section there."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("apps", "config", "docs", "bench", "sdk", "tests", "templates", "README.md", "Makefile")
SKIPPED_DIRS = {"__pycache__", ".venv", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", "dist", "build"}
TEXT_SUFFIXES = {".py", ".md", ".html", ".txt", ".lua", ".sql", ".sh", ".toml", ".yml", ".yaml", ".css", ".js", ""}


def _joined(*parts: str) -> str:
    """Patterns and samples are joined at run time, so that neither this file nor its compiled form (where Python
    folds "a" + "b" into one constant) matches what it forbids."""
    return "".join(parts)


FORBIDDEN = {
    "an issue number": re.compile(_joined("iss", r"ue[\s_]+#?\d+"), re.IGNORECASE),
    "who measured": re.compile(_joined("hel", r'pers?\s+(?:#\s*)?"')),  # the name may follow on the next line
    "a path outside the repository": re.compile(_joined("shared", "/", "spec")),
    "a section of the contract outside the repository": re.compile(_joined("cont", r"ract\s+§"), re.IGNORECASE),
    "a numbered section of a document outside the repository": re.compile(_joined(r"(?<![0-9] )", "§", r"\s*\d")),
    "the interface document outside the repository": re.compile(_joined("inter", r"face(\.md|\s+§)"), re.IGNORECASE),
}


def _files():
    for name in SCANNED:
        path = ROOT / name
        if path.is_file():
            yield path
            continue
        for file in path.rglob("*"):
            if file.is_file() and not SKIPPED_DIRS.intersection(file.relative_to(ROOT).parts) \
                    and file.suffix in TEXT_SUFFIXES:
                yield file


def test_no_issue_numbers_names_of_who_measured_or_pointers_outside_the_repository():
    found = []
    for file in _files():
        text = file.read_text(encoding="utf-8", errors="replace")
        for what, pattern in FORBIDDEN.items():
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{file.relative_to(ROOT)}:{line}: {what}: {match.group(0)!r}")
    assert not found, "say how it is, and point to docs/ instead:\n" + "\n".join(found)


# A pointer to a section of one of the pages that replaced the contract: `docs/api.md, "Error codes"` (several names may
# follow, `docs/api.md, "Endpoints", "Field formats"`), possibly across a comment's line break.
SECTION_REFERENCE = re.compile(r'docs/(api|performance|runbook|architecture)\.md`?,?\s*'
                               r'((?:"[A-Za-z][^"\n]*"(?:,\s*)?)+)')


def _headings(page: str) -> list[str]:
    text = (ROOT / "docs" / f"{page}.md").read_text(encoding="utf-8")
    return [re.sub(r"^#+\s*", "", line).strip().replace("`", "") for line in text.splitlines() if line.startswith("#")]


def test_every_reference_to_a_section_of_api_performance_runbook_or_architecture_names_one_of_its_headings():
    headings = {page: _headings(page) for page in ("api", "performance", "runbook", "architecture")}
    broken = []
    for file in _files():
        text = re.sub(r"\n\s*#\s*", " ", file.read_text(encoding="utf-8", errors="replace"))
        for match in SECTION_REFERENCE.finditer(text):
            for name in re.findall(r'"([^"]+)"', match.group(2)):
                if not any(heading.startswith(name) for heading in headings[match.group(1)]):
                    broken.append(f'{file.relative_to(ROOT)}: docs/{match.group(1)}.md, "{name}"')
    assert not broken, "no such heading:\n" + "\n".join(sorted(set(broken)))


def test_the_check_finds_what_it_forbids():
    samples = [_joined("as measured in iss", "ue 22"), _joined("test_of_iss", "ue_22"), _joined("see hel", 'per "p5"'),
               _joined("../shared", "/", "spec/contract.md"), _joined("cont", "ract §", "3"), _joined("inter", "face §", "4.1"),
               _joined("inter", "face.md"), _joined("Cont", "ract §", "2"), _joined("(§", "6.1)")]
    for sample in samples:
        assert any(pattern.search(sample) for pattern in FORBIDDEN.values()), sample
    assert not any(pattern.search('docs/api.md, "Error codes"') for pattern in FORBIDDEN.values())
