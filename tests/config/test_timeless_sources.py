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
    "who measured": re.compile(_joined("hel", r'pers?\s+"')),
    "a path outside the repository": re.compile(_joined("shared", "/", "spec")),
    "a section of the contract outside the repository": re.compile(_joined("cont", r"ract\s+§")),
    "the interface document outside the repository": re.compile(_joined("inter", r"face(\.md|\s+§)")),
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


def test_the_check_finds_what_it_forbids():
    samples = [_joined("as measured in iss", "ue 22"), _joined("test_of_iss", "ue_22"), _joined("see hel", 'per "p5"'),
               _joined("../shared", "/", "spec/contract.md"), _joined("cont", "ract §3"), _joined("inter", "face §4.1"),
               _joined("inter", "face.md")]
    for sample in samples:
        assert any(pattern.search(sample) for pattern in FORBIDDEN.values()), sample
    assert not any(pattern.search('docs/api.md, "Error codes"') for pattern in FORBIDDEN.values())
