"""Portal pages (docs/portal.md). Thin: each is wrapped by portal_view(<permission>), reads through the selectors with
request.merchant, and writes through one service."""

import csv

from django.core.exceptions import ValidationError
from django.contrib import messages
from django.http import Http404, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from apps.collection.models import CollectionOrder
from apps.common.errors import DomainError, ErrorCode
from apps.common.exports import csv_cell
from apps.common.replica import ReadsFrom, lag_tolerant, lagging_reads
from apps.common.step_up import SecondFactorRefused
from apps.ledger.services import statement_read
from apps.ledger.statements import statement_data, statement_today
from apps.payout.models import Payout, mask_account
from apps.portal import notices, recovery, selectors, services
from apps.portal.access import has_permission, merchant_time, portal_view, secure
from apps.portal.developer_views import CODE_WIDGET
from apps.callbacks.resend import callback_resend_by_merchant
from apps.portal.forms import InviteAcceptForm, InviteForm, MemberForm, StatementForm
from apps.portal.models import Invite, MerchantUser
from apps.portal.refund_views import payin_refunds

PAYIN_STATUSES = [s.value for s in CollectionOrder.Status]
PAYOUT_STATUSES = [s.value for s in Payout.Status] + ["REVERSED"]


@portal_view("view_home")
def home(request):
    merchant = request.merchant
    return render(request, "portal/home.html", {
        "balances": selectors.balances(merchant_id=merchant.pk),
        "today": selectors.today(merchant_id=merchant.pk),
        "waiting": selectors.waiting_for_merchant(request.merchant_user),
        "notices": notices.notices_open(merchant_user=request.merchant_user),
        "cooling": recovery.recovery_cooling(user_id=request.user.pk),
    })


@require_POST
@portal_view("view_home")
def notice_dismiss(request, notice_id: int):
    try:
        notices.notice_dismiss(merchant_user=request.merchant_user, notice_id=notice_id)
    except notices.NoticeNotFound:
        raise Http404("no such notice") from None
    return redirect("portal:home")


# --- lists and CSV -------------------------------------------------------------------------------------------------

KINDS = {
    "payins": {"title": "Pay-ins", "statuses": PAYIN_STATUSES, "rows": selectors.payins, "detail": "portal:payin"},
    "payouts": {"title": "Payouts", "statuses": PAYOUT_STATUSES, "rows": selectors.payouts,
                "detail": "portal:payout"},
}


def _list_filter(request, kind: str):
    currencies = selectors.merchant_currencies(merchant_id=request.merchant.pk)
    flt = selectors.parse_filter(request.GET, statuses=KINDS[kind]["statuses"], currencies=currencies)
    return flt, currencies


def _order_list(request, kind: str):
    flt, currencies = _list_filter(request, kind)

    def page(reads: ReadsFrom):
        queryset = KINDS[kind]["rows"](merchant_id=request.merchant.pk, flt=flt)
        rows, next_cursor = selectors.page(queryset, cursor=request.GET.get("after", ""))
        return render(request, f"portal/{kind}.html", {
            "kind": kind, "title": KINDS[kind]["title"], "rows": rows, "flt": flt, "currencies": currencies,
            "statuses": KINDS[kind]["statuses"], "next_cursor": next_cursor, "query": flt.query_string(),
            "first_page": not request.GET.get("after"), "reads": reads,
        })

    # A list may be seconds behind (docs/architecture.md, "Where reads go"); an order's own page is read current.
    return lag_tolerant(page)


@portal_view("view_orders")
def payin_list(request):
    return _order_list(request, "payins")


@portal_view("view_orders")
def payout_list(request):
    return _order_list(request, "payouts")


class _Echo:
    def write(self, value):
        return value


PAYIN_COLUMNS = ["platform_order_no", "mch_order_no", "created_at", "status", "currency", "amount", "fee",
                 "settlement", "paid_at", "settled_at", "subject"]
PAYOUT_COLUMNS = ["platform_order_no", "mch_order_no", "created_at", "status", "currency", "amount", "fee",
                  "payee_name", "payee_account", "bank_code", "finished_at", "fail_reason", "reversed_at",
                  "reversal_amount"]


def _csv_row(kind: str, order) -> list[str]:
    stamp = lambda moment: moment.isoformat() if moment else ""  # noqa: E731
    if kind == "payins":
        values = [order.platform_order_no, order.mch_order_no, stamp(order.created_at), order.status,
                  order.currency_id, order.amount, order.fee, order.settlement, stamp(order.paid_at),
                  stamp(order.settled_at), order.subject]
    else:
        values = [order.platform_order_no, order.mch_order_no, stamp(order.created_at), order.status,
                  order.currency_id, order.amount, order.fee, order.payee_name, mask_account(order.payee_account),
                  order.bank_code, stamp(order.finished_at), order.fail_reason, stamp(order.reversed_at),
                  "" if order.reversal_amount is None else order.reversal_amount]
    return [csv_cell(value) for value in values]  # merchant-given fields (order numbers, subjects) are anyone's text


def _export(request, kind: str):
    """The filtered list as CSV (amounts in minor units, times ISO 8601 UTC, payee accounts masked), streamed."""
    flt, _ = _list_filter(request, kind)
    # The rows stream after the view returns: the database is chosen now, once (docs/architecture.md, "Where reads
    # go"); a replica that stops mid-download cuts the download short, which the browser reports as failed.
    with lagging_reads() as reads:
        queryset = KINDS[kind]["rows"](merchant_id=request.merchant.pk, flt=flt).using(reads.alias)
    columns = PAYIN_COLUMNS if kind == "payins" else PAYOUT_COLUMNS
    writer = csv.writer(_Echo())

    def lines():
        yield writer.writerow(columns)
        count = 0
        for order in queryset.iterator(chunk_size=2000):
            if count == selectors.EXPORT_MAX_ROWS:
                yield writer.writerow([f"# cut at {selectors.EXPORT_MAX_ROWS} rows: narrow the filter"])
                return
            count += 1
            yield writer.writerow(_csv_row(kind, order))

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="{kind}-{request.merchant.merchant_no}-{stamp}.csv"'
    if reads.on_replica:
        response["X-Data-As-Of"] = reads.as_of.isoformat()  # read from the replica: complete up to this time
    return response


@portal_view("export_orders")
def payin_export(request):
    return _export(request, "payins")


@portal_view("export_orders")
def payout_export(request):
    return _export(request, "payouts")


# --- one order -----------------------------------------------------------------------------------------------------

def _order_page(request, kind: str, order, history):
    return render(request, "portal/order.html", {
        **(payin_refunds(request, order) if kind == "payins" else {}),
        "kind": kind, "order": order, "history": history,
        "callbacks": selectors.order_callbacks(merchant_id=request.merchant.pk,
                                               platform_order_no=order.platform_order_no),
        "payee_account": (order.payee_account if has_permission(request.merchant_user, "see_payee_accounts")
                          else mask_account(order.payee_account)) if kind == "payouts" else "",
    })


@portal_view("view_orders")
def payin_detail(request, platform_order_no: str):
    order = selectors.payin_get(merchant_id=request.merchant.pk, platform_order_no=platform_order_no)
    if order is None:
        raise Http404("no such pay-in")
    return _order_page(request, "payins", order, selectors.payin_history(order))


@portal_view("view_orders")
def payout_detail(request, platform_order_no: str):
    order = selectors.payout_get(merchant_id=request.merchant.pk, platform_order_no=platform_order_no)
    if order is None:
        raise Http404("no such payout")
    return _order_page(request, "payouts", order, selectors.payout_history(order))


@require_POST
@portal_view("resend_callbacks")
def callback_resend(request, event_id: int):
    """Re-send one callback of the merchant's: the rules and per-merchant limit of POST /openapi/v1/callbacks/resend
    (a switched-off merchant's calls get 1105: so does its portal)."""
    if not request.merchant.is_active:
        messages.error(request, "Your merchant account is switched off: callbacks cannot be sent again. Contact our "
                                "support.")
        back = request.POST.get("back", "")
        return redirect(back if back.startswith("/portal/") else "portal:home")
    try:
        event = callback_resend_by_merchant(merchant=request.merchant, event_id=event_id, person=request.user)
    except DomainError as exc:
        if exc.error == ErrorCode.ORDER_NOT_FOUND:
            raise Http404("no such callback") from None
        messages.error(request, exc.msg)
        back = request.POST.get("back", "")
        return redirect(back if back.startswith("/portal/") else "portal:home")
    messages.success(request, f"Callback {event.pk} ({event.type}) is being sent again; refresh in a few seconds "
                              f"to see the attempt.")
    prefix = "portal:payin" if event.type == "collection.success" else "portal:payout"
    return redirect(reverse(prefix, args=[event.platform_order_no]) + "#callbacks")


# --- statements ----------------------------------------------------------------------------------------------------

@portal_view("view_statements")
def statements(request):
    merchant = request.merchant
    currencies = selectors.merchant_currencies(merchant_id=merchant.pk)
    today = statement_today()
    form = StatementForm(request.GET or None, currencies=currencies, today=today)
    data = None
    if form.is_valid():
        statement = statement_read(merchant=merchant, currency=form.cleaned_data["currency"],
                                   day=form.cleaned_data["date"])
        fmt = request.GET.get("format", "")
        name = f"statement-{merchant.merchant_no}-{statement.currency}-{statement.date.isoformat()}"
        if fmt == "csv":
            response = HttpResponse(statement.csv_text, content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
            return response
        if fmt == "json":
            response = JsonResponse(statement_data(statement), json_dumps_params={"ensure_ascii": False,
                                                                                  "indent": 2})
            response["Content-Disposition"] = f'attachment; filename="{name}.json"'
            return response
        data = statement_data(statement)
    return render(request, "portal/statements.html", {"form": form, "data": data,
                                                      "query": request.GET.urlencode()})


# --- team (owner) --------------------------------------------------------------------------------------------------

@sensitive_post_parameters("code")
@portal_view("manage_team")
def team(request):
    merchant = request.merchant
    invite_form = InviteForm(request.POST if request.POST.get("action") == "invite" else None)
    new_link = None
    if request.method == "POST":
        action = request.POST.get("action")
        try:
            _team_change_allowed(request, action)
            if action == "invite" and invite_form.is_valid():
                created = services.invite_create(merchant=merchant, actor=request.user,
                                                 username=invite_form.cleaned_data["username"],
                                                 role=invite_form.cleaned_data["role"])
                new_link = request.build_absolute_uri(created.path())
                if created.invite.needs_approval:
                    messages.warning(request, "An owner invite works once another owner, independent of you, "
                                              "approves it on this page. Until then the link says so.")
                invite_form = InviteForm()
            elif action == "member":
                form = MemberForm(request.POST)
                if form.is_valid():
                    member = services.member_update(merchant=merchant, member_id=form.cleaned_data["member"],
                                                    actor=request.user, role=form.cleaned_data["role"] or None,
                                                    is_active=form.cleaned_data["active"] == "1"
                                                    if form.cleaned_data["active"] else None)
                    if member.owner_requested_by_id == request.user.pk:
                        messages.warning(request, f"Making {member.user.username} an owner waits for another "
                                                  "owner, independent of you, to approve it on this page.")
                    else:
                        messages.success(request, "Saved.")
                    return redirect("portal:team")
            elif action == "revoke":
                services.invite_revoke(merchant=merchant, invite_id=int(request.POST.get("invite", 0) or 0),
                                       actor=request.user)
                messages.success(request, "Invite withdrawn.")
                return redirect("portal:team")
            elif action == "approve-invite":
                invite = services.invite_approve(merchant=merchant, actor=request.user,
                                                 invite_id=int(request.POST.get("invite", 0) or 0),
                                                 otp_code=request.POST.get("code", ""))
                messages.success(request, f"Approved: the owner invite for {invite.username} works now.")
                return redirect("portal:team")
            elif action == "approve-owner":
                member = services.member_owner_approve(merchant=merchant, actor=request.user,
                                                       member_id=int(request.POST.get("member", 0) or 0),
                                                       otp_code=request.POST.get("code", ""))
                messages.success(request, f"Approved: {member.user.username} is an owner now.")
                return redirect("portal:team")
        except (services.InviteError, SecondFactorRefused, ValueError) as exc:
            messages.error(request, str(exc))
    members = list(MerchantUser.objects.filter(merchant=merchant).select_related("user", "merchant",
                                                                                 "owner_requested_by")
                   .order_by("user__username"))
    for member in members:
        member.approval_problem = (services.member_owner_problem(member=member, user=request.user)
                                   if member.owner_requested_by_id else "")
    invites = list(Invite.objects.filter(merchant=merchant, used_at__isnull=True, revoked_at__isnull=True,
                                         expires_at__gt=timezone.now()).select_related("merchant", "created_by"))
    for invite in invites:
        invite.approval_problem = (services.invite_approval_problem(invite=invite, user=request.user)
                                   if invite.waiting_for_approval else "")
    return render(request, "portal/team.html", {
        "members": members, "invites": invites, "invite_form": invite_form, "new_link": new_link,
        "roles": MerchantUser._meta.get_field("role").choices,
        "no_second_owner": not selectors.independent_owners(merchant_id=merchant.pk, of_user=request.user),
        "code_widget": CODE_WIDGET.render("code", "", attrs={"class": "code-input", "required": True,
                                                             "aria-label": "Code"}),
    })


def _team_change_allowed(request, action: str) -> None:
    """No one new, no new role and no one switched back on (nor approving another owner's such change) for a
    switched-off merchant, or from a person in the cooling-off after their access was recovered (an accomplice made
    an owner would change the callback URLs at once). Switching someone off and withdrawing an invite stay open: they
    only take access away."""
    adds = (action in ("invite", "approve-invite", "approve-owner")
            or (action == "member" and (request.POST.get("role") or request.POST.get("active") == "1")))
    if not adds:
        return
    if not request.merchant.is_active:
        raise services.InviteError("Your merchant account is switched off: you cannot invite people or change roles. "
                                   "Contact our support.")
    refusal = recovery.recovery_cooling_refusal(user_id=request.user.pk, doing="invite people or change roles")
    if refusal:
        raise services.InviteError(refusal)


# --- invite link (no sign-in) --------------------------------------------------------------------------------------

@sensitive_post_parameters()
@csrf_protect
@never_cache
@merchant_time
def invite_accept(request, token: str):
    """The one-time link: the person chooses a password; the next step is signing in (and adding an authenticator)."""
    invite = services.invite_of_link(token)
    if problem := services.invite_problem(invite):
        return secure(render(request, "portal/signin/invite_invalid.html", {"problem": problem}, status=404))
    form = InviteAcceptForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            services.invite_accept(token=token, password=form.cleaned_data["password1"])
        except services.InviteError as exc:
            return secure(render(request, "portal/signin/invite_invalid.html", {"problem": str(exc)}, status=404))
        except ValidationError as exc:  # a password the validators refuse
            form.add_error("password1", exc)
        else:
            messages.success(request, "Your account is ready. Sign in with your new password; you will then add "
                                      "an authenticator app.")
            return secure(redirect("portal:signin"))
    return secure(render(request, "portal/signin/invite.html", {"invite": invite, "form": form}))


# --- recovery link (no sign-in) ------------------------------------------------------------------------------------

@sensitive_post_parameters()
@csrf_protect
@never_cache
def recovery_accept(request, token: str):
    """The one-time link of an access recovery: the person chooses a new password; signing in next enrols their new
    authenticator (docs/staff-access.md, "Recovering a merchant user's access")."""
    found = recovery.recovery_open(token)
    if found is None:
        return secure(render(request, "portal/signin/recover_invalid.html", status=404))
    form = InviteAcceptForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            recovery.recovery_complete(token=token, password=form.cleaned_data["password1"])
        except recovery.RecoveryRefused:
            return secure(render(request, "portal/signin/recover_invalid.html", status=404))
        except ValidationError as exc:  # a password the validators refuse
            form.add_error("password1", exc)
        else:
            messages.success(request, "Your new password is set. Sign in with it; you will then add your new "
                                      "authenticator app.")
            return secure(redirect("portal:signin"))
    return secure(render(request, "portal/signin/recover.html", {"recovery": found, "form": form,
                                                                 "cooling_hours": recovery.cooling_hours()}))
