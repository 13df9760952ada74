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


# A pointer to a section of a page of docs/: `docs/api.md, "Error codes"` (several names may follow, `docs/api.md,
# "Endpoints", "Field formats"`), possibly across a line break, in a comment or a docstring. The name is the start of
# a heading or of a bold lead-in of the page (`**Two-approval threshold.**`), in any case: what a reader finds with
# the browser's search.
SECTION_REFERENCE = re.compile(r'docs/([a-z0-9-]+)\.md`?,?\s*((?:"[A-Za-z][^"]{0,100}"(?:,\s*)?)+)')


def _sections(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    headings = [re.sub(r"^#+\s*", "", line).strip() for line in text.splitlines() if line.startswith("#")]
    titles = [heading.split(": ", 1)[1] for heading in headings if ": " in heading]  # "Development: what make run does"
    bold = re.findall(r"\*\*([^*\n]+)\*\*", text)
    return [name.replace("`", "").lower() for name in headings + titles + bold]


def _broken_references(text: str, sections: dict) -> list[str]:
    text = re.sub(r"\n\s*#\s*", " ", text)
    broken = []
    for match in SECTION_REFERENCE.finditer(text):
        page = match.group(1)
        for name in re.findall(r'"([^"]+)"', match.group(2)):
            name = re.sub(r"\s+", " ", name).replace("`", "").lower()
            if not any(section.startswith(name) for section in sections.get(page, ())):
                broken.append(f'docs/{page}.md, "{name}"')
    return broken


def _all_sections() -> dict:
    return {path.stem: _sections(path) for path in (ROOT / "docs").glob("*.md")}


def test_every_reference_to_a_section_of_a_doc_names_one_of_its_headings():
    sections = _all_sections()
    broken = [f"{file.relative_to(ROOT)}: {reference}" for file in _files()
              for reference in _broken_references(file.read_text(encoding="utf-8", errors="replace"), sections)]
    assert not broken, "no such heading:\n" + "\n".join(sorted(set(broken)))


def test_the_reference_check_finds_a_missing_section_across_a_line_break():
    sections, docs = _all_sections(), _joined("do", "cs/")  # joined: this file's own text has no reference to check
    assert _broken_references(f'"""({docs}faults.md, "A worker that stopped\nconsuming")"""', sections)
    assert _broken_references(f'# see {docs}back-office.md, "In front of the platform"', sections)
    assert _broken_references(f'{docs}no-such-page.md, "Anything"', sections)
    assert not _broken_references(f'"""({docs}faults.md, "Why the broker\'s QoS\nis ours")"""', sections)
    assert not _broken_references(f'# {docs}back-office.md, "Two-approval\n# threshold"', sections)
    assert not _broken_references(f'({docs}development.md, "What make run does")', sections)


def test_the_check_finds_what_it_forbids():
    samples = [_joined("as measured in iss", "ue 22"), _joined("test_of_iss", "ue_22"), _joined("see hel", 'per "p5"'),
               _joined("../shared", "/", "spec/contract.md"), _joined("cont", "ract §", "3"), _joined("inter", "face §", "4.1"),
               _joined("inter", "face.md"), _joined("Cont", "ract §", "2"), _joined("(§", "6.1)")]
    for sample in samples:
        assert any(pattern.search(sample) for pattern in FORBIDDEN.values()), sample
    assert not any(pattern.search('docs/api.md, "Error codes"') for pattern in FORBIDDEN.values())
