"""The operations overview page, /admin/operations/operationsoverview/ (docs/back-office.md)."""

from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.safestring import mark_safe

from apps.common.admin import ReadOnlyAdminMixin
from apps.common.formatting import short_age, utc
from apps.common.replica import lag_tolerant
from apps.currencies.formatting import money
from apps.currencies.models import Currency
from apps.operations.charts import hourly_chart_svg
from apps.operations.models import OperationsOverview
from apps.operations.selectors import operations_overview


def stranded_row(request, figure) -> dict:
    """A kind of stranded order as the tile shows it: the link to the filtered list only for staff who may see it
    (a link answering 403 helps nobody)."""
    kind = figure.kind
    app_label, model = kind.model.split(".")
    link = ""
    if figure.count and request.user.has_perm(f"{app_label}.view_{model}"):
        link = f"{reverse(f'admin:{app_label}_{model}_changelist')}?stranded={kind.name}"
    return {"name": kind.name, "label": kind.label, "count": figure.count, "critical": kind.critical,
            "finisher": kind.finisher or "an operator (no sweep can finish these)", "link": link,
            "oldest": short_age(figure.oldest) if figure.oldest else "-", "oldest_at": utc(figure.oldest)}


@admin.register(OperationsOverview)
class OperationsOverviewAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """One page for on-call staff: today's orders, the review queue, callbacks, settlement
    awaiting release, the periodic jobs' last runs and a chart of the last 24 h. Read-only."""

    def has_view_permission(self, request, obj=None):
        return request.user.has_perm("operations.view_operationsoverview")

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_permission(request):
            raise PermissionDenied
        site = self.admin_site.each_context(request)  # the person's permissions: from the primary
        # Seconds of lag are fine for an overview (docs/architecture.md, "Where reads go").
        return lag_tolerant(lambda reads: self._overview_page(request, site, reads))

    def _overview_page(self, request, site: dict, reads):
        overview = operations_overview()
        currencies = {c.code: c for c in Currency.objects.all()}

        def rows(figures):
            return [{"currency": code, "count": f["count"], "amount": money(f["amount"], currencies[code]),
                     "paid": f.get("paid"), "paid_amount": money(f.get("paid_amount", 0), currencies[code])}
                    for code, f in sorted(figures.items())]

        context = {
            **site, "opts": self.model._meta, "title": "Operations overview",
            "now": utc(overview.now), "day_start": utc(overview.day_start),
            "replica_as_of": utc(reads.as_of) if reads.on_replica else "",
            "zone": settings.SETTLEMENT_TIME_ZONE,
            "payins": rows(overview.payins), "payouts": rows(overview.payouts),
            "reversals": [{"currency": code, "count": f["count"], "amount": money(f["amount"], currencies[code]),
                           "fee_refund": money(f["fee_refund"], currencies[code])}
                          for code, f in sorted(overview.reversals.items())],
            "review_count": overview.review_count,
            "review_oldest": short_age(overview.review_oldest) if overview.review_oldest else "-",
            "review_oldest_at": utc(overview.review_oldest),
            "callbacks_due": overview.callbacks_due, "callbacks_dead": overview.callbacks_dead,
            "settling": rows(overview.settling),
            "heartbeats": [{"job": label, "at": utc(at), "ago": short_age(at) if at else "never"}
                           for label, at in overview.heartbeats],
            "chart": mark_safe(hourly_chart_svg(overview.hourly)),  # numbers and our own markup only
            "hourly_total": (sum(i for _, i, _ in overview.hourly), sum(o for _, _, o in overview.hourly)),
            "stranded": [stranded_row(request, figure) for figure in overview.stranded],
            "stranded_total": sum(figure.count for figure in overview.stranded),
        }
        return TemplateResponse(request, "admin/operations/overview.html", context).render()
