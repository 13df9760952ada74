"""The developers page (docs/portal.md, "Developers"): thin views over apps.portal.developers."""

import json

from django import forms
from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from apps.common.formatting import utc
from apps.common.models import AuditLog
from apps.common.step_up import SecondFactorRefused
from apps.merchants.models import Merchant
from apps.portal import developers
from apps.portal import selectors as portal_selectors
from apps.portal.access import has_permission, portal_view
from apps.portal.developers import PortalNotFound, PortalRefused
from apps.portal.models import KeyUpload
from apps.portal.recovery import recovery_cooling_refusal

CODE_WIDGET = forms.TextInput(attrs={"autocomplete": "one-time-code", "inputmode": "numeric", "pattern": "[0-9 ]*",
                                     "maxlength": 7, "size": 8})


class KeyUploadForm(forms.Form):
    public_key_file = forms.FileField(required=False, label="Public key file (PEM)")
    public_key_text = forms.CharField(required=False, label="or paste the PEM",
                                      widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}))
    code = forms.CharField(label="Code from your authenticator app", max_length=16, widget=CODE_WIDGET)


class CallbackUrlsForm(forms.Form):
    collection_callback_url = forms.CharField(required=False, max_length=2048, label="Pay-in (collection) callbacks",
                                              widget=forms.URLInput(attrs={"size": 48}))
    payout_callback_url = forms.CharField(required=False, max_length=2048, label="Payout callbacks",
                                          widget=forms.URLInput(attrs={"size": 48}))
    was_collection_callback_url = forms.CharField(required=False, max_length=2048, widget=forms.HiddenInput)
    was_payout_callback_url = forms.CharField(required=False, max_length=2048, widget=forms.HiddenInput)
    code = forms.CharField(label="Code from your authenticator app", max_length=16, widget=CODE_WIDGET)


def _page(request, *, status: int = 200, **extra):
    merchant = Merchant.objects.get(pk=request.merchant.pk)  # the URLs as stored now
    urls = {"collection_callback_url": merchant.collection_callback_url,
            "payout_callback_url": merchant.payout_callback_url}
    keys = developers.merchant_keys(merchant=merchant)
    now = timezone.now()
    uploaders = dict(KeyUpload.objects.filter(merchant=merchant).values_list("key_id", "uploaded_by_id"))
    for key in keys:
        key.live = key.is_live(now)
        key.waiting = key.is_active and not key.live
        key.mine = uploaders.get(key.pk) == request.user.pk
    live = sum(key.live for key in keys)
    # Why this person may not change keys or callback URLs now, said once at the top (each refusal says it too).
    blocked = ""
    if has_permission(request.merchant_user, "manage_keys"):
        blocked = (developers.merchant_off_refusal(merchant.pk, "change API keys or callback URLs")
                   or recovery_cooling_refusal(user_id=request.user.pk, doing="change API keys or callback URLs"))
    tests = (AuditLog.objects.filter(action="callback.test", object_type="merchants.merchant",
                                     object_id=str(merchant.pk)).order_by("-id")[:5]
             if has_permission(request.merchant_user, "send_test_callback") else [])
    context = {
        "title": "Developers", "keys": keys, "live_keys": live, "blocked": blocked,
        "key_wait_hours": developers.key_wait_hours(),
        "platform_keys": developers.platform_keys_published(), "urls": urls,
        "upload_form": KeyUploadForm(), "recent_tests": tests,
        "urls_form": CallbackUrlsForm(initial={**urls, **{f"was_{name}": value for name, value in urls.items()}}),
        "test_limit": developers.TEST_CALLBACKS_PER_MINUTE,
        **extra,
    }
    return render(request, "portal/developers.html", context, status=status)


@portal_view("view_developers")
def developers_page(request):
    return _page(request)


@sensitive_post_parameters("code")
@require_POST
@portal_view("manage_keys")
def key_upload(request):
    form = KeyUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, upload_form=form, status=400)
    upload = form.cleaned_data["public_key_file"]
    pem = upload.read(developers.MAX_PEM_BYTES + 1) if upload else form.cleaned_data["public_key_text"]
    try:
        key = developers.portal_key_upload(actor=request.merchant_user, public_key_pem=pem,
                                           otp_code=form.cleaned_data["code"])
    except (PortalRefused, SecondFactorRefused) as exc:
        form.add_error(None, str(exc))
        return _page(request, upload_form=form, status=400)
    messages.success(request, f"Key version {key.version} added (fingerprint {key.fingerprint[:16]}…). It signs "
                              f"requests once another owner confirms it, or from {utc(key.live_from)}; your other "
                              "owners are told. Until then keep signing with your current version.")
    return redirect("portal:developers")


def _key_decision(request, version: int, decide, done: str):
    """A second-factor step on one key version (confirm or revoke): the service decides, the page says how it went."""
    try:
        decide(actor=request.merchant_user, key_version=version, otp_code=request.POST.get("code", ""))
    except PortalNotFound:
        raise Http404 from None
    except (PortalRefused, SecondFactorRefused) as exc:
        messages.error(request, str(exc))
        return redirect("portal:developers")
    messages.success(request, done)
    return redirect("portal:developers")


@sensitive_post_parameters("code")
@require_POST
@portal_view("manage_keys")
def key_confirm(request, version: int):
    return _key_decision(request, version, developers.portal_key_confirm,
                         f"Key version {version} is live: requests signed with it verify from now on.")


@sensitive_post_parameters("code")
@require_POST
@portal_view("manage_keys")
def key_revoke(request, version: int):
    return _key_decision(request, version, developers.portal_key_revoke,
                         f"Key version {version} is revoked: requests signed with it now get 1104.")


@sensitive_post_parameters("code")
@require_POST
@portal_view("manage_callback_urls")
def callback_urls(request):
    form = CallbackUrlsForm(request.POST)
    if not form.is_valid():
        return _page(request, urls_form=form, status=400)
    data = form.cleaned_data
    try:
        developers.portal_callback_urls_change(
            actor=request.merchant_user, collection_callback_url=data["collection_callback_url"],
            payout_callback_url=data["payout_callback_url"], otp_code=data["code"],
            was={"collection_callback_url": data["was_collection_callback_url"],
                 "payout_callback_url": data["was_payout_callback_url"]})
    except (PortalRefused, SecondFactorRefused) as exc:
        form.add_error(None, str(exc))
        return _page(request, urls_form=form, status=400)
    messages.success(request, "Callback URLs saved. Every callback attempt from now on goes to them.")
    return redirect("portal:developers")


@require_POST
@portal_view("send_test_callback")
def test_callback(request):
    try:
        result = developers.portal_test_callback_send(actor=request.merchant_user, kind=request.POST.get("kind", ""))
    except PortalRefused as exc:
        return _page(request, test_error=str(exc), status=429 if "a minute" in str(exc) else 400)
    return _page(request, test_result=result,
                 test_body=json.dumps(result.body, indent=2, ensure_ascii=False))


@portal_view("view_developers")
def platform_keys_json(request):
    response = HttpResponse(json.dumps(developers.platform_keys_document(), indent=2) + "\n",
                            content_type="application/json")
    response["Content-Disposition"] = 'attachment; filename="platform_keys.json"'
    return response


@portal_view("view_developers")
def platform_key_pem(request, version: int):
    key = next((key for key in developers.platform_keys_published() if key.version == version), None)
    if key is None:
        raise Http404
    response = HttpResponse(key.public_key_pem, content_type="application/x-pem-file")
    response["Content-Disposition"] = f'attachment; filename="platform_key_v{version}.pem"'
    return response


def waiting_key(merchant_user) -> dict | None:
    """Home page, "Waiting for you": a key version another owner uploaded, for this owner to confirm."""
    if not has_permission(merchant_user, "manage_keys"):
        return None
    key = developers.key_waiting(merchant=merchant_user.merchant)
    if key is None or KeyUpload.objects.filter(key=key, uploaded_by=merchant_user.user_id).exists():
        return None
    return {"label": f"API key version {key.version} waiting for a second owner's confirmation", "count": 1,
            "url": reverse("portal:developers") + "#keys"}


if waiting_key not in portal_selectors.WAITING_SECTIONS:
    portal_selectors.WAITING_SECTIONS.append(waiting_key)
