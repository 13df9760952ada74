"""Celery entry points of what every app shares: the partitioned history's months (apps.common.partitions)."""

from celery import shared_task

from apps.common import partitions


@shared_task(acks_late=True, ignore_result=True)
def create_partitions() -> None:
    """Beat, every 6 hours: the current month's and the months ahead's partitions, where missing."""
    partitions.partitions_create()


@shared_task(acks_late=True, ignore_result=True)
def drop_expired_partitions() -> None:
    """Beat, daily at 03:15 settlement time: the months past their retention detached and dropped, but those still
    needed."""
    partitions.partitions_drop_expired()
