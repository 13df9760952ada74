"""Times shown to staff in the admin: every time says UTC, ages fit a narrow column. Amounts are shown by
apps.currencies.formatting (format_minor, money)."""

from django.utils import formats, timezone


def utc(value) -> str:
    """A time as every admin page shows it (DATETIME_FORMAT of config/formats: "2026-11-25 14:49:29 UTC")."""
    return formats.date_format(timezone.localtime(value), "DATETIME_FORMAT") if value else "-"


def utc_short(value) -> str:
    """A time in a list column (SHORT_DATETIME_FORMAT: "2026-11-25 14:49 UTC"): the minute is enough to tell rows
    apart at a glance, and the column is 40 px narrower; the object's page shows the seconds."""
    return formats.date_format(timezone.localtime(value), "SHORT_DATETIME_FORMAT") if value else "-"


def short_age(value) -> str:
    """'3d 4h', '5h 12m', '7m': fits a narrow column, unlike timesince's '3 days, 4 hours'."""
    seconds = max(0, int((timezone.now() - value).total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m"
