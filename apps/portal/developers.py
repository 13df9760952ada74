"""The merchant portal's developers page, as services and selectors (docs/portal.md, "Developers"): the merchant's
key versions (upload, revoke), the platform's public keys, the callback URLs, and a test callback.

`actor` is the signed-in merchant user's membership: anything with `.user` (the auth user, audited by name),
`.merchant` (every read and write is scoped to it) and `.role`. Keys and callback URLs are the owner's, with the
second factor asked again (apps.common.step_up); a test callback may be sent by the owner or a developer. None of
these for a switched-off merchant, and no key or callback URL change by a person in the cooling-off after their
access was recovered (apps.portal.recovery).

A key version uploaded here verifies once a second, independent owner confirms it, or after PORTAL_KEY_WAIT_HOURS;
meanwhile the other owners are told and can revoke it, and the versions live before keep verifying (docs/portal.md,
"Key confirmation").
"""

import secrets
import time
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

import pghistory
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.callbacks.deliver import callback_body_sign
from apps.callbacks.transport import AttemptRefused, check_url, checked_address, post_callback
from apps.common import audit, signing
from apps.common.formatting import utc
from apps.common.independence import independence_conflict
from apps.common.limits import limit_spend
from apps.common.step_up import second_factor_confirm
from apps.merchants.models import Merchant, MerchantKey, PlatformKey
from apps.merchants.services import MerchantInputError, callback_url_check, merchant_key_add_in_transaction
from apps.portal.models import KeyUpload
from apps.portal.notices import mail_after_commit, merchant_owners, notice_send
from apps.portal.recovery import recovery_cooling_refusal

OWNER, FINANCE, DEVELOPER, VIEWER = "owner", "finance", "developer", "viewer"
KEY_ROLES = (OWNER,)  # keys and callback URLs are the owner's (docs/portal.md, "Developers")
TEST_CALLBACK_ROLES = (OWNER, DEVELOPER)
MAX_PEM_BYTES = 16 * 1024
MAX_KEY_BITS = 8192  # verification cost grows with the modulus; 2048-4096 is what merchants use
TEST_CALLBACKS_PER_MINUTE = 5


class PortalRefused(PermissionError):
    """The role, the state or the input does not allow the change; nothing changed. The message is for the person."""


class PortalNotFound(LookupError):
    """Not this merchant's (another merchant's object is not found too)."""


def _require(actor, roles: tuple[str, ...], what: str) -> None:
    if actor.role not in roles:
        raise PortalRefused(f"Only {' or '.join(roles)} users may {what}; you are {actor.role}.")


def merchant_off_refusal(merchant_id: int, doing: str) -> str:
    """Why nobody may `doing` for this merchant now ("" when they may): it is switched off, as its signed API calls
    get 1105."""
    if Merchant.objects.filter(pk=merchant_id, is_active=True).exists():
        return ""
    return _switched_off(doing)


def _switched_off(doing: str) -> str:
    return f"Your merchant account is switched off: you cannot {doing}. Contact our support."


def _require_change(actor, doing: str) -> None:
    """A change of the merchant's keys or callback URLs: an owner, of a merchant that is on, not in the cooling-off
    after their access was recovered. Checked before the code is spent; the merchant's state again under its lock."""
    _require(actor, KEY_ROLES, doing)
    refusal = (merchant_off_refusal(actor.merchant.pk, doing)
               or recovery_cooling_refusal(user_id=actor.user.pk, doing=doing))
    if refusal:
        raise PortalRefused(refusal)


def _lock_active_merchant(actor, doing: str) -> Merchant:
    # NO KEY UPDATE: the merchant's orders (rows referring to it) are created meanwhile.
    merchant = Merchant.objects.select_for_update(no_key=True).get(pk=actor.merchant.pk)
    if not merchant.is_active:
        raise PortalRefused(_switched_off(doing))
    return merchant


def key_wait_hours() -> float:
    return float(settings.PORTAL_KEY_WAIT_HOURS)


def _history(actor):
    """The settings trail's context (pghistory) of a portal change: who, for which merchant."""
    return pghistory.context(user=actor.user.pk, username=actor.user.get_username(),
                             portal=actor.merchant.merchant_no)


# --- keys ---------------------------------------------------------------------------------------------------


def merchant_keys(*, merchant: Merchant) -> list[MerchantKey]:
    """The merchant's key versions, newest first."""
    return list(MerchantKey.objects.filter(merchant=merchant).order_by("-version"))


def public_key_pem_check(pem: str | bytes) -> tuple[str, str]:
    """(the PEM as text, its fingerprint) for an RSA public key of 2048-8192 bits in SubjectPublicKeyInfo PEM, or
    PortalRefused naming the problem (never echoing the key)."""
    if isinstance(pem, bytes):
        if len(pem) > MAX_PEM_BYTES:
            raise PortalRefused("The file is too large to be a PEM public key.")
        try:
            pem = pem.decode("ascii")
        except UnicodeDecodeError:
            raise PortalRefused("The file is not a PEM (text) file.") from None
    pem = (pem or "").strip()
    if not pem:
        raise PortalRefused("Upload a PEM file or paste a PEM public key.")
    if len(pem) > MAX_PEM_BYTES:
        raise PortalRefused("That is too large to be a PEM public key.")
    if "PRIVATE KEY" in pem:
        raise PortalRefused("That is a PRIVATE key: never upload it anywhere. Upload the public half "
                            "(openssl rsa -in key.pem -pubout).")
    try:
        key = signing.load_public_key(pem)
    except ValueError as exc:
        raise PortalRefused(f"Public key refused: {exc}.") from None
    if key.key_size > MAX_KEY_BITS:
        raise PortalRefused(f"RSA key has {key.key_size} bits; at most {MAX_KEY_BITS} are accepted.")
    return pem + "\n", signing.fingerprint(pem)


def key_waiting(*, merchant: Merchant) -> MerchantKey | None:
    """The merchant's version that waits to go live (at most one), or None."""
    return (MerchantKey.objects.filter(merchant=merchant, revoked_at__isnull=True, live_from__gt=timezone.now())
            .order_by("-version").first())


def _no_key_waiting(merchant: Merchant) -> None:
    waiting = key_waiting(merchant=merchant)
    if waiting is not None:
        raise PortalRefused(f"Key version {waiting.version} waits to go live (at {utc(waiting.live_from)}): another "
                            "owner confirms it or anyone revokes it first.")


def portal_key_upload(*, actor, public_key_pem: str | bytes, otp_code: str) -> MerchantKey:
    """The owner's new key version (the next number), live once a second owner confirms it or after
    PORTAL_KEY_WAIT_HOURS; the other owners are told. Older versions keep verifying until revoked (docs/api.md,
    "Keys"). The key is checked before the code is spent; a key the merchant already has active, or a second waiting
    one, is refused."""
    _require_change(actor, "upload keys")
    pem, fingerprint = public_key_pem_check(public_key_pem)
    if MerchantKey.objects.filter(merchant=actor.merchant, fingerprint=fingerprint, revoked_at__isnull=True).exists():
        raise PortalRefused("This key is already an active version of yours.")
    _no_key_waiting(actor.merchant)
    second_factor_confirm(user=actor.user, code=otp_code)
    return _key_add(actor=actor, pem=pem)


@transaction.atomic(durable=True)
def _key_add(*, actor, pem: str) -> MerchantKey:
    merchant = _lock_active_merchant(actor, "upload keys")
    _no_key_waiting(merchant)  # under the merchant's lock: two uploads at once make one waiting version
    live_from = timezone.now() + timedelta(hours=key_wait_hours())
    with _history(actor):
        key = merchant_key_add_in_transaction(merchant_no=merchant.merchant_no, public_key_pem=pem,
                                              actor=actor.user, live_from=live_from)
        KeyUpload.objects.create(key=key, merchant=merchant, uploaded_by=actor.user)
    who = actor.user.get_username()
    words = (f"{who} uploaded API key version {key.version} (fingerprint {key.fingerprint[:16]}...) for "
             f"{merchant.merchant_no}. It signs requests only from {utc(live_from)}, or earlier once another owner "
             "confirms it on the Developers page. If you do not know of it, revoke it there.")
    notice_send(merchant=merchant, people=merchant_owners(merchant=merchant, exclude_user_ids=[actor.user.pk]),
                subject=f"New API key version {key.version} waits to go live", body=words)
    mail_after_commit(to=[actor.user.email], subject=f"You uploaded API key version {key.version}",
                      body=words + " If it was not you, tell your other owners and our support at once.")
    return key


def portal_key_confirm(*, actor, key_version: int, otp_code: str) -> MerchantKey:
    """A second owner, independent of the one who uploaded it (apps.common.independence), makes a waiting version
    live now. Checked before the code is spent, and again under the locks."""
    _require_change(actor, "confirm keys")
    _confirmable(actor=actor, key_version=key_version)
    second_factor_confirm(user=actor.user, code=otp_code)
    return _key_confirm(actor=actor, key_version=key_version)


def _confirmable(*, actor, key_version: int, lock: bool = False) -> tuple[MerchantKey, KeyUpload]:
    keys = MerchantKey.objects.filter(merchant=actor.merchant)
    key = (keys.select_for_update() if lock else keys).filter(version=key_version).first()
    if key is None:
        raise PortalNotFound(f"You have no key version {key_version}.")
    if key.revoked_at is not None:
        raise PortalRefused(f"Key version {key_version} is revoked.")
    upload = KeyUpload.objects.select_related("uploaded_by").filter(key=key).first()
    if key.is_live(timezone.now()) or upload is None:
        raise PortalRefused(f"Key version {key_version} is live already.")
    uploader = upload.uploaded_by
    if uploader.pk == actor.user.pk:
        raise PortalRefused(f"You uploaded key version {key_version}: another owner confirms it, or it goes live at "
                            f"{utc(key.live_from)}.")
    conflict = independence_conflict(uploader, actor.user)
    if conflict:
        raise PortalRefused(f"{conflict}. Key version {key_version} needs an owner independent of "
                            f"{uploader.get_username()} to confirm it; otherwise it goes live at "
                            f"{utc(key.live_from)}.")
    return key, upload


@transaction.atomic(durable=True)
def _key_confirm(*, actor, key_version: int) -> MerchantKey:
    _lock_active_merchant(actor, "confirm keys")
    key, upload = _confirmable(actor=actor, key_version=key_version, lock=True)
    now = timezone.now()
    with _history(actor):
        waited_until, key.live_from = key.live_from, now
        key.save(update_fields=["live_from"])
        upload.confirmed_by, upload.confirmed_at = actor.user, now
        upload.save(update_fields=["confirmed_by", "confirmed_at"])
        audit.record(actor=actor.user, action="merchant_key.confirm", obj=key,
                     old={"live_from": waited_until.isoformat()},
                     new={"version": key.version, "live_from": now.isoformat(),
                          "uploaded_by": upload.uploaded_by.get_username()},
                     reason="confirmed by a second owner in the portal")
    return key


def portal_key_revoke(*, actor, key_version: int, otp_code: str) -> MerchantKey:
    """Revoke one of the merchant's key versions: signed requests naming it get 1104 from now on. The last live
    version cannot be revoked (the merchant would lock itself out of the API); a waiting one always can. Checked
    before the code is spent, and again under the locks."""
    _require_change(actor, "revoke keys")
    _revocable(actor=actor, key_version=key_version)
    # Its own committed transaction: a wrong code is counted (throttle, lockout) even though nothing changes.
    second_factor_confirm(user=actor.user, code=otp_code)
    return _key_revoke(actor=actor, key_version=key_version)


def _revocable(*, actor, key_version: int, lock: bool = False) -> MerchantKey:
    keys = MerchantKey.objects.filter(merchant=actor.merchant)
    key = (keys.select_for_update() if lock else keys).filter(version=key_version).first()
    if key is None:
        raise PortalNotFound(f"You have no key version {key_version}.")
    if key.revoked_at is not None:
        raise PortalRefused(f"Key version {key_version} is revoked already.")
    now = timezone.now()
    if not any(other.is_live(now) for other in keys.filter(revoked_at__isnull=True).exclude(pk=key.pk)):
        raise PortalRefused(f"Key version {key_version} is your last live key: upload its successor, let it go "
                            "live, then revoke this one.")
    return key


@transaction.atomic(durable=True)
def _key_revoke(*, actor, key_version: int) -> MerchantKey:
    # The merchant's row first: two revocations at once see each other's result (the last live key stays).
    _lock_active_merchant(actor, "revoke keys")
    key = _revocable(actor=actor, key_version=key_version, lock=True)
    with _history(actor):
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        audit.record(actor=actor.user, action="merchant_key.revoke", obj=key, new={"version": key.version},
                     reason="revoked by the merchant in the portal")
    return key


# --- platform keys -------------------------------------------------------------------------------------------


def platform_keys_published() -> list[PlatformKey]:
    """Every platform key version (its public half; old ones stay published after a rotation: docs/api.md,
    "Callbacks")."""
    return list(PlatformKey.objects.order_by("-version").only("version", "public_key_pem", "is_current",
                                                               "created_at"))


def platform_keys_document() -> dict:
    """What `manage.py platform_keys` prints (docs/api.md, "Operations CLI"), for the SDK's verify-callback
    --platform-keys."""
    return {"keys": [{"key_version": key.version, "public_key": key.public_key_pem, "current": key.is_current}
                     for key in sorted(platform_keys_published(), key=lambda key: key.version)]}


# --- callback URLs ---------------------------------------------------------------------------------------------


def callback_url_validate(url: str) -> str:
    """The callback URL rules of the admin and `create_merchant` (an absolute http(s) URL, or empty for none), the
    delivery's static rules (a host, no credentials), and where private hosts are refused (production), the
    delivery's address check now as well: a URL no attempt could ever reach is refused when it is set."""
    limit = Merchant._meta.get_field("payout_callback_url").max_length  # the admin form's max_length too
    if len((url or "").strip()) > limit:
        raise PortalRefused(f"A callback URL has at most {limit} characters.")
    try:
        url = callback_url_check(url or "")
    except MerchantInputError as exc:
        raise PortalRefused(str(exc)) from None
    if not url:
        return url
    try:
        check_url(url)
        if not settings.CALLBACK_ALLOW_PRIVATE_HOSTS:
            parts = urlsplit(url)
            checked_address(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
    except AttemptRefused as exc:
        raise PortalRefused(str(exc)) from None
    return url


def portal_callback_urls_change(*, actor, collection_callback_url: str, payout_callback_url: str,
                                was: dict[str, str], otp_code: str) -> Merchant:
    """The owner sets the merchant's callback URLs at once (docs/portal.md: the owner is the merchant's own second
    person; no staff request). `was`: the URLs the owner saw on the page; a change made meanwhile (by a staff
    request's approval, or another owner) is refused, not overwritten."""
    _require_change(actor, "change callback URLs")
    new = {"collection_callback_url": callback_url_validate(collection_callback_url),
           "payout_callback_url": callback_url_validate(payout_callback_url)}
    second_factor_confirm(user=actor.user, code=otp_code)
    return _callback_urls_set(actor=actor, new=new, was=was)


@transaction.atomic(durable=True)
def _callback_urls_set(*, actor, new: dict[str, str], was: dict[str, str]) -> Merchant:
    merchant = _lock_active_merchant(actor, "change callback URLs")
    stored = {name: getattr(merchant, name) for name in new}
    if any(stored[name] != was.get(name, stored[name]) for name in new):
        raise PortalRefused("The callback URLs were changed by someone else since you opened this page; "
                            "look at them again.")
    changed = {name: value for name, value in new.items() if stored[name] != value}
    if not changed:
        return merchant
    with _history(actor):
        for name, value in changed.items():
            setattr(merchant, name, value)
        merchant.save(update_fields=list(changed))
        audit.record(actor=actor.user, action="merchant.callback_urls", obj=merchant,
                     old={name: stored[name] for name in changed}, new=changed,
                     reason="changed by the merchant's owner in the portal")
    return merchant


# --- test callback ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TestCallbackResult:
    kind: str
    url: str
    body: dict  # exactly what was sent, signed
    http_status: int | None
    reply: str  # the reply's first CALLBACK_REPLY_EXCERPT_CHARS characters
    error: str  # why it does not count as delivered; empty when the reply was `success`
    duration_ms: int

    @property
    def success(self) -> bool:
        return not self.error


def _test_window_key(merchant_id: int) -> str:
    return f"portal-test-callback:{merchant_id}:{int(time.time() // 60)}"


def test_callback_allowed(*, merchant_id: int) -> bool:
    """Spend one of the merchant's TEST_CALLBACKS_PER_MINUTE test callbacks (fixed one-minute window, in the
    cache), as `callbacks/resend` spends its re-sends."""
    limit = getattr(settings, "PORTAL_TEST_CALLBACKS_PER_MINUTE", TEST_CALLBACKS_PER_MINUTE)
    return limit_spend(_test_window_key(merchant_id), limit=limit, timeout=120)


def test_callback_payload(*, merchant: Merchant, kind: str, now) -> dict:
    """A sample event of the real shape (docs/api.md, "Callbacks") with order numbers that cannot be a real order's:
    `platform_order_no` TEST…, `mch_order_no` test-callback-…."""
    currency = (merchant.currencies.filter(is_enabled=True).order_by("currency_id")
                .values_list("currency_id", flat=True).first() or "PHP")
    tag = secrets.token_hex(8)
    common = {"platform_order_no": f"TEST{now:%Y%m%d}{tag}", "mch_order_no": f"test-callback-{tag}",
              "amount": 10000, "currency": currency}
    if kind == "collection":
        return {**common, "status": "SUCCESS", "paid_at": int(now.timestamp()),
                "attach": "test callback from the merchant portal"}
    return {**common, "fee": 0, "status": "SUCCESS"}


def portal_test_callback_send(*, actor, kind: str) -> TestCallbackResult:
    """Sign a sample collection or payout event exactly as a real attempt is signed (the current platform key,
    fresh timestamp and nonce) and POST it to the merchant's configured URL through the callbacks' own transport
    (address pinning, the whole-attempt deadline, the reply cap). Nothing is stored but the audit row; no retries.
    Rate-limited per merchant."""
    _require(actor, TEST_CALLBACK_ROLES, "send test callbacks")
    refusal = merchant_off_refusal(actor.merchant.pk, "send test callbacks")
    if refusal:
        raise PortalRefused(refusal)
    if kind not in ("collection", "payout"):
        raise PortalRefused("Choose the collection or the payout callback URL.")
    merchant = Merchant.objects.get(pk=actor.merchant.pk)
    url = merchant.collection_callback_url if kind == "collection" else merchant.payout_callback_url
    if not url:
        raise PortalRefused(f"You have no {kind} callback URL set.")
    if not test_callback_allowed(merchant_id=merchant.pk):
        limit = getattr(settings, "PORTAL_TEST_CALLBACKS_PER_MINUTE", TEST_CALLBACKS_PER_MINUTE)
        raise PortalRefused(f"At most {limit} test callbacks a minute; try again in the next minute.")
    now = timezone.now()
    body, _ = callback_body_sign(payload=test_callback_payload(merchant=merchant, kind=kind, now=now), now=now)
    result = post_callback(url, body)
    outcome = TestCallbackResult(kind, url, body, result.http_status, result.reply, result.error,
                                 result.duration_ms)
    with transaction.atomic(durable=True):
        audit.record(actor=actor.user, action="callback.test", obj=merchant,
                     new={"kind": kind, "url": url, "platform_order_no": body["platform_order_no"],
                          "http_status": result.http_status, "duration_ms": result.duration_ms,
                          "error": result.error[:300]})
    return outcome
