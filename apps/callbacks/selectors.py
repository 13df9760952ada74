"""Reads of the callback outbox. Every merchant-facing read is scoped to the authenticated merchant."""

from datetime import datetime

from django.db.models import Prefetch, QuerySet, prefetch_related_objects
from django.utils import timezone

from apps.callbacks.models import ATTEMPT_CLOCK_MARGIN, CallbackAttempt, CallbackEvent


def _merchant_events(*, merchant_id: int, platform_order_no: str | None = None, type: str | None = None,
                     status: str | None = None) -> QuerySet:
    events = CallbackEvent.objects.filter(merchant_id=merchant_id)
    if platform_order_no:
        events = events.filter(platform_order_no=platform_order_no)
    if type:
        events = events.filter(type=type)
    if status:
        events = events.filter(status=status)
    return events


def callback_events_for_merchant(*, merchant_id: int, limit: int, platform_order_no: str | None = None,
                                 type: str | None = None, status: str | None = None,
                                 created_from: datetime | None = None, created_before: datetime | None = None,
                                 before_id: int | None = None) -> tuple[list[CallbackEvent], bool]:
    """One page of the merchant's events, newest first (keyset on id: ids below `before_id`, so events created
    meanwhile never shift a page), each with its attempts and `last_body` (the exact body of its last attempt,
    or None). Returns the page and whether more follow."""
    events = _merchant_events(merchant_id=merchant_id, platform_order_no=platform_order_no, type=type, status=status)
    if created_from is not None:
        events = events.filter(created_at__gte=created_from)
    if created_before is not None:
        events = events.filter(created_at__lt=created_before)
    if before_id is not None:
        events = events.filter(pk__lt=before_id)
    page = list(events.order_by("-pk")[:limit + 1])
    has_more = len(page) > limit
    page = page[:limit]
    if not page:
        return page, has_more
    # An attempt starts after its event is created, and not in the future: the bounds skip the attempts' older
    # months (partitions) and the empty ones made ahead.
    attempts = CallbackAttempt.objects.filter(started_at__gte=min(e.created_at for e in page) - ATTEMPT_CLOCK_MARGIN,
                                              started_at__lt=timezone.now() + ATTEMPT_CLOCK_MARGIN)
    # Bodies are read for the last attempt only (below), not for every attempt of the page.
    prefetch_related_objects(page, Prefetch("attempts", queryset=attempts.defer("request_body", "response_excerpt",
                                                                                "url").order_by("number")))
    last_bodies = dict(attempts.filter(event_id__in=[e.pk for e in page])
                       .order_by("event_id", "-number").distinct("event_id")
                       .values_list("event_id", "request_body"))
    for event in page:
        event.last_body = last_bodies.get(event.pk)
    return page, has_more


def callback_events_to_resend(*, status: str, merchant_id: int | None = None, type: str | None = None,
                              created_from: datetime | None = None,
                              created_until: datetime | None = None) -> list[CallbackEvent]:
    """Events an operator selected for a re-send (resend_callbacks), oldest first, with their merchant."""
    events = CallbackEvent.objects.filter(status=status).select_related("merchant")
    if merchant_id is not None:
        events = events.filter(merchant_id=merchant_id)
    if type:
        events = events.filter(type=type)
    if created_from is not None:
        events = events.filter(created_at__gte=created_from)
    if created_until is not None:
        events = events.filter(created_at__lte=created_until)
    return list(events.order_by("pk"))


def callbacks_due_and_dead(*, now: datetime) -> tuple[int, int]:
    """Pending events whose next attempt is due, and dead events: for /metrics and the operations overview. One
    GROUP BY over the status index (pending and dead only)."""
    from django.db.models import Count, Q

    due = dead = 0
    for row in (CallbackEvent.objects.order_by().filter(status__in=[CallbackEvent.Status.PENDING,
                                                                      CallbackEvent.Status.DEAD])
                .values("status").annotate(n=Count("pk", filter=Q(status=CallbackEvent.Status.DEAD)
                                                      | Q(status=CallbackEvent.Status.PENDING,
                                                          next_attempt_at__lte=now)))):
        if row["status"] == CallbackEvent.Status.PENDING:
            due = row["n"]
        else:
            dead = row["n"]
    return due, dead
