"""Periodic tasks of the ledger (beat schedule in config/settings/base.py). Thin: each calls one service."""

import logging

from celery import shared_task

from apps.ledger import services

logger = logging.getLogger(__name__)


@shared_task(acks_late=True)
def prepare_daily_statements() -> int:
    """Beat, 00:30 in SETTLEMENT_TIME_ZONE: store yesterday's statements; idempotent however often it runs."""
    stored = services.statements_prepare()
    if stored:
        logger.info("stored %d daily statements", stored)
    return stored
