"""The action audit by month (docs/architecture.md, "Partitioned history"): kept AUDIT_LOG_RETENTION_MONTHS, the
statutory period of the books' supporting records, and past it still kept while a month holds a row of an object
that is not yet final (a payout in flight, a collection order still open, a staff request still pending), whose
trail its pages and services read (apps.payout.selectors.payout_decisions, apps.collection.upstream)."""

from collections.abc import Callable
from datetime import datetime

from django.db import models
from django.db.models.functions import Cast

from apps.common.models import AuditLog, StaffRequest
from apps.common.partitions import PartitionedTable, partitioned_table_register

# model -> the queryset of its objects that are not final; each domain registers its own from its AppConfig.ready.
_open_objects: dict[type[models.Model], Callable[[], models.QuerySet]] = {}


def audit_open_objects_register(model: type[models.Model], open_objects: Callable[[], models.QuerySet]) -> None:
    _open_objects[model] = open_objects


def _audit_rows_still_needed(start: datetime, end: datetime) -> str | None:
    for model, open_objects in _open_objects.items():
        ids = open_objects().annotate(audit_object_id=Cast("pk", models.CharField())).values("audit_object_id")
        row = (AuditLog.objects.filter(created_at__gte=start, created_at__lt=end,
                                       object_type=model._meta.label_lower, object_id__in=ids)
               .values_list("object_id", flat=True).first())
        if row is not None:
            return f"it holds the trail of {model._meta.verbose_name} {row}, which is not final"
    return None


audit_open_objects_register(StaffRequest, lambda: StaffRequest.objects.filter(status=StaffRequest.Status.PENDING))
partitioned_table_register(PartitionedTable(model=AuditLog, key="created_at",
                                            retention_setting="AUDIT_LOG_RETENTION_MONTHS",
                                            still_needed=_audit_rows_still_needed))
