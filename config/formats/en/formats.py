"""Dates and times as the back office shows them: ISO order and the time zone named, so that a time on any
admin page reads like the audit trail's ("2026-11-25 14:49:29 UTC"), never "Nov. 25, 2026, 2:49 p.m." with no zone."""

DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i T"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
