"""Beat schedules read in the settlement time zone (imported by the settings: no Django import at module level)."""

from zoneinfo import ZoneInfo

from celery.schedules import crontab


class settlement_crontab(crontab):  # noqa: N801 - reads like celery's crontab
    """A crontab whose hours are those of SETTLEMENT_TIME_ZONE (default Asia/Manila), not of the Celery app (UTC).

    A class, not a `nowfun`: celery matches crontab fields in the schedule's `tz`, whatever `nowfun` returns; and a
    module-level class pickles into beat's schedule file, where a lambda would not."""

    @property
    def tz(self):
        from django.conf import settings

        return ZoneInfo(settings.SETTLEMENT_TIME_ZONE)
