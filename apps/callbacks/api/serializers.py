"""Request and response shapes of /callbacks/list and /callbacks/resend (docs/api.md, "Callback events: list and
re-send", "Field formats")."""

import base64
import binascii
from datetime import UTC, datetime, timedelta

from rest_framework import serializers

from apps.callbacks.models import CallbackEvent
from apps.common.api.fields import PlatformOrderNoField, StrictChoiceField, StrictIntegerField, StrictRegexField
from apps.common.api.serializers import RequestSerializer

DEFAULT_LIMIT, MAX_LIMIT = 20, 100
MAX_UNIX_SECONDS = 253402300799  # 9999-12-31T23:59:59Z, the last second a datetime holds
MAX_EVENT_ID = 2**63 - 1
CURSOR_PREFIX = "cb1:"


def encode_cursor(event_id: int) -> str:
    """Opaque to merchants: the id the next page starts below, versioned, base64url without padding."""
    return base64.urlsafe_b64encode(f"{CURSOR_PREFIX}{event_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int | None:
    """The id of a cursor made by encode_cursor; None for anything else (a cursor is only ever taken as issued)."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        return None
    number = text.removeprefix(CURSOR_PREFIX)
    if not text.startswith(CURSOR_PREFIX) or not number.isascii() or not number.isdigit():
        return None
    event_id = int(number)
    if not 1 <= event_id <= MAX_EVENT_ID or encode_cursor(event_id) != cursor:
        return None
    return event_id


def TypeField(**kwargs):  # noqa: N802 - a field factory reads like a field class
    return StrictChoiceField(choices=CallbackEvent.Type.values, **kwargs)


def UnixSecondsField(**kwargs):  # noqa: N802
    return StrictIntegerField(min_value=0, max_value=MAX_UNIX_SECONDS, **kwargs)


class CallbacksListRequestSerializer(RequestSerializer):
    platform_order_no = PlatformOrderNoField(required=False)
    type = TypeField(required=False)
    status = StrictChoiceField(choices=CallbackEvent.Status.values, required=False)
    created_from = UnixSecondsField(required=False, help_text="Unix seconds; events created at or after it.")
    created_to = UnixSecondsField(required=False, help_text="Unix seconds; events created up to the end of that "
                                                            "second (inclusive).")
    limit = StrictIntegerField(min_value=1, max_value=MAX_LIMIT, required=False, default=DEFAULT_LIMIT,
                               help_text=f"Events per page, 1-{MAX_LIMIT} (default {DEFAULT_LIMIT}).")
    cursor = StrictRegexField(r"\A[A-Za-z0-9_-]{1,64}\Z", max_length=64, required=False,
                              error_messages={"invalid": "is not a cursor this endpoint returned."},
                              help_text="next_cursor of the previous page, as returned (opaque).")

    def validate_cursor(self, value: str) -> int:
        event_id = decode_cursor(value)
        if event_id is None:
            raise serializers.ValidationError("is not a cursor this endpoint returned.")
        return event_id

    def validate(self, attrs):
        start, end = attrs.get("created_from"), attrs.get("created_to")
        if start is not None and end is not None and start > end:
            raise serializers.ValidationError({"created_to": "must not be before created_from."})
        return attrs


def created_range(params: dict) -> dict:
    """created_from / created_to (Unix seconds, both inclusive) as the selector's half-open datetime range."""
    start, end = params.get("created_from"), params.get("created_to")
    return {
        "created_from": datetime.fromtimestamp(start, UTC) if start is not None else None,
        # The whole last second is included: created_at < created_to + 1 s (9999-12-31T23:59:59 + 1 s overflows).
        "created_before": (datetime.fromtimestamp(end, UTC) + timedelta(seconds=1)
                           if end is not None and end < MAX_UNIX_SECONDS else None),
    }


class CallbacksResendRequestSerializer(RequestSerializer):
    """event_id, or platform_order_no with type (a payout has a terminal and a reversal event)."""

    event_id = StrictIntegerField(min_value=1, max_value=MAX_EVENT_ID, required=False,
                                  help_text="event_id from /callbacks/list.")
    platform_order_no = PlatformOrderNoField(required=False)
    type = TypeField(required=False)

    def validate(self, attrs):
        by_order = "platform_order_no" in attrs or "type" in attrs
        if "event_id" in attrs and by_order:
            raise serializers.ValidationError("send event_id, or platform_order_no with type, not both.")
        if "event_id" not in attrs:
            for name in ("platform_order_no", "type"):
                if name not in attrs:
                    raise serializers.ValidationError({name: "is required when event_id is not sent."})
        return attrs


# --- response shapes ---------------------------------------------------------------------------------------

class CallbackAttemptDataSerializer(serializers.Serializer):
    number = serializers.IntegerField(help_text="1 for the first attempt; re-sends keep counting.")
    started_at = serializers.IntegerField(help_text="Unix seconds.")
    finished_at = serializers.IntegerField(allow_null=True, help_text="Unix seconds; null while in flight or when "
                                                                      "the worker was lost before recording it.")
    http_status = serializers.IntegerField(allow_null=True, help_text="Your server's HTTP status; null if none.")
    success = serializers.BooleanField(help_text="HTTP 200 and a body of `success`.")
    error = serializers.CharField(allow_blank=True, help_text="Why the attempt failed, as a sentence; empty on "
                                                              "success.")
    duration_ms = serializers.IntegerField()
    key_version = serializers.IntegerField(allow_null=True, help_text="Platform key version that signed the body.")
    manual = serializers.BooleanField(help_text="Made because of a re-send.")


class CallbackEventDataSerializer(serializers.Serializer):
    event_id = serializers.IntegerField()
    type = serializers.ChoiceField(choices=CallbackEvent.Type.values)
    platform_order_no = serializers.CharField()
    status = serializers.ChoiceField(choices=CallbackEvent.Status.values,
                                     help_text="pending (being delivered or retried), delivered, dead.")
    created_at = serializers.IntegerField(help_text="Unix seconds.")
    delivered_at = serializers.IntegerField(allow_null=True, help_text="Unix seconds of the first success.")
    next_attempt_at = serializers.IntegerField(allow_null=True, help_text="Unix seconds; null unless pending.")
    attempts_count = serializers.IntegerField()
    last_error = serializers.CharField(allow_blank=True)
    attempts = CallbackAttemptDataSerializer(many=True, help_text="Oldest first.")
    body = serializers.DictField(allow_null=True, help_text="The exact JSON body POSTed in the last attempt "
                                                            "(signing fields included); null before the first.")


class CallbacksListDataSerializer(serializers.Serializer):
    events = CallbackEventDataSerializer(many=True, help_text="Newest first.")
    next_cursor = serializers.CharField(allow_null=True, help_text="Send it as `cursor` for the next page; null on "
                                                                   "the last page.")


def _unix(value: datetime | None) -> int | None:
    return int(value.timestamp()) if value is not None else None


def callback_event_data(event: CallbackEvent, last_body: dict | None) -> dict:
    return {
        "event_id": event.pk,
        "type": event.type,
        "platform_order_no": event.platform_order_no,
        "status": event.status,
        "created_at": _unix(event.created_at),
        "delivered_at": _unix(event.delivered_at),
        "next_attempt_at": _unix(event.next_attempt_at),
        "attempts_count": event.attempts_count,
        "last_error": event.last_error,
        "attempts": [{"number": a.number, "started_at": _unix(a.started_at), "finished_at": _unix(a.finished_at),
                      "http_status": a.http_status, "success": a.success, "error": a.error,
                      "duration_ms": a.duration_ms, "key_version": a.key_version, "manual": a.manual}
                     for a in event.attempts.all()],
        "body": last_body,
    }


def callbacks_list_data(events: list[CallbackEvent], has_more: bool) -> dict:
    return {"events": [callback_event_data(event, event.last_body) for event in events],
            "next_cursor": encode_cursor(events[-1].pk) if has_more else None}


class CallbackResendDataSerializer(serializers.Serializer):
    event_id = serializers.IntegerField()
    type = serializers.ChoiceField(choices=CallbackEvent.Type.values)
    platform_order_no = serializers.CharField()
    status = serializers.ChoiceField(choices=CallbackEvent.Status.values, help_text="pending: the extra attempt is "
                                                                                   "queued.")
    attempts_count = serializers.IntegerField(help_text="Attempts made so far; the re-send will be the next one.")
    next_attempt_at = serializers.IntegerField(allow_null=True, help_text="Unix seconds: now.")


def callback_resend_data(event: CallbackEvent) -> dict:
    return {"event_id": event.pk, "type": event.type, "platform_order_no": event.platform_order_no,
            "status": event.status, "attempts_count": event.attempts_count,
            "next_attempt_at": _unix(event.next_attempt_at)}
