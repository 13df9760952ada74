"""How the hosted pay page shows time left (amounts: apps.currencies.formatting.format_minor)."""


def format_duration(seconds: int) -> str:
    """'9 min 59 s', '1 h 05 min', '0 s' — the server-rendered time left (the page script keeps it ticking)."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"
