"""CSV cells a spreadsheet reads as text, never as a formula (CSV injection, OWASP "CSV Injection"): one rule for
every CSV the platform writes (the portal's order exports, the signed statements; docs/portal.md, "Exports").

A spreadsheet runs a cell that begins with = + - @ (OWASP adds a tab and a CR; an LF too), and Excel and
LibreOffice first skip the blanks and quotes before it (a space, a no-break space, a tab, a quote), some locales
take the full-width signs as well. Such a cell gets a leading apostrophe, which the spreadsheet shows as text and
hides. A plain number ("-500", "+63") is left alone: it is read as a number and runs nothing, and the statement's
amounts stay numbers (its signed bytes the same).
"""

import re
import unicodedata

TRIGGERS = frozenset("=+-@\t\r\n\uff1d\uff0b\uff0d\uff20")
# What a spreadsheet skips before it looks for a formula: whitespace of every kind (Unicode's Z* categories, the
# C0 controls), the zero-width characters and the quotes.
_SKIPPED_QUOTES = frozenset("'\"`\u2018\u2019\u201c\u201d\uff02\uff07")
_NUMBER = re.compile(r"[+-]?\d+(\.\d+)?")


def _skipped(char: str) -> bool:
    return (char.isspace() or char in _SKIPPED_QUOTES or unicodedata.category(char) in ("Zs", "Zl", "Zp", "Cc", "Cf"))


def csv_cell(value) -> str:
    """The cell's text, with a leading apostrophe when a spreadsheet would run it as a formula."""
    text = "" if value is None else str(value)
    if _NUMBER.fullmatch(text):
        return text
    for char in text:
        if char in TRIGGERS:
            return "'" + text
        if not _skipped(char):
            return text
    return text
