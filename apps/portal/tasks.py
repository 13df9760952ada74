"""Refunds asked for in the portal: a beat sweep makes the refund of a request approved but left without its result
(the approving request died between its two transactions); refund_create replays the request's mch_refund_no, so
nothing is refunded twice (apps.portal.refunds)."""

from apps.common.retry import money_task
from apps.portal.refunds import refund_requests_resume


@money_task
def resume_refund_requests() -> int:
    return len(refund_requests_resume())
