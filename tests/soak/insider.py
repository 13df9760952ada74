"""The soak's insider (docs/faults.md, "The soak"): one person who, during the load, keeps trying to sit in two seats
over real HTTP, through the admin and the portal as a person would (password and authenticator code, CSRF, forms),
and the check that every such attempt was refused and changed nothing.

Each attempt is an Op of kind `insider/cross-*` (a crossing: must be refused) or `insider/setup-*` (the insider's
own legitimate steps: making an account, asking for a request; allowed either way). The rule they run into is one
(apps/common/independence.py; docs/staff-access.md, "Independence"; docs/portal.md, "Maker-checker and
independence").

Sandbox only: the rule and its paths are the same code in both deployments, and the live one has a third of the
load time and Xendit's actor besides.
"""

import hashlib
import html
import random
import re
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urlsplit

import requests
from django.core.exceptions import ObjectDoesNotExist

from tests.soak.harness import CSRF, INSIDER_MERCHANT, PASSWORD, TOP_UP, Merchant, Op, admin_messages, callback_url

ROOT_NAME = "soak-insider-root"
ATTACKER_URL = "https://attacker.example/soak-insider"
LARGE_PAYOUT = 30_000_000  # PHP minor units: over the two-approval threshold (200,000 PHP)

# What a clear refusal says, page by page (the words a person is shown).
REFUSED = re.compile(r"not a staff account|belongs to a merchant's portal user|not independent|Refused|"
                     r"You made this invite|You uploaded key version|waiting for a second owner|withdrawn|"
                     r"No items have been changed|Items must be selected|a second person must decide it|"
                     r"does not work", re.I)
PORTAL_MESSAGE = re.compile(r'<li class="message message-[a-z ]*">(.*?)</li>', re.S)


# ------------------------------------------------------------------------------------------------------ people

class FormPage(HTMLParser):
    """The fields a browser would send from the first form on a page that has `marker` among its field names."""

    def __init__(self, marker: str):
        super().__init__()
        self.marker, self.forms, self.select, self.textarea = marker, [], None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.forms.append({})
        elif not self.forms:
            return
        elif tag == "input" and a.get("name") and a.get("type") not in ("submit", "button", "file"):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            self.forms[-1].setdefault(a["name"], a.get("value") or ("on" if a.get("type") == "checkbox" else ""))
        elif tag == "select" and a.get("name"):
            self.select = a["name"]
        elif tag == "option" and self.select and "selected" in a:
            self.forms[-1][self.select] = a.get("value", "")
        elif tag == "textarea" and a.get("name"):
            self.textarea = a["name"]
            self.forms[-1][self.textarea] = ""

    def handle_endtag(self, tag):
        if tag == "select":
            self.select = None
        elif tag == "textarea":
            self.textarea = None

    def handle_data(self, data):
        if self.textarea and self.forms:
            self.forms[-1][self.textarea] += data

    def fields(self) -> dict:
        return next((form for form in self.forms if self.marker in form), {})


def form_fields(html: str, marker: str) -> dict:
    parser = FormPage(marker)
    parser.feed(html)
    return parser.fields()


class Person:
    """One person's browser on the platform: a session, the CSRF token of its cookie, the pages' messages."""

    def __init__(self, base: str, username: str, password: str = PASSWORD):
        self.base, self.username, self.password = base, username, password
        self.session = requests.Session()

    def get(self, path: str) -> requests.Response:
        return self.session.get(f"{self.base}{path}", timeout=30)

    def post(self, path: str, data: dict, **kwargs) -> requests.Response:
        token = self.session.cookies.get("csrftoken")
        if not token:  # a first visit: the page's form (a link that does not work has none: the sign-in page's)
            token = (CSRF.search(self.get(path).text) or CSRF.search(self.get("/portal/signin/").text)).group(1)
        return self.session.post(f"{self.base}{path}", data={"csrfmiddlewaretoken": token, **data},
                                 headers={"Referer": f"{self.base}{path}"}, timeout=30, **kwargs)

    def admin_sign_in(self, *, enrol: bool = False) -> None:
        """The admin's sign-in: the password, then the authenticator's code (or, with none yet, enrolling one)."""
        from django_otp.plugins.otp_totp.models import TOTPDevice

        from tests.support.staff import fresh_totp_code

        self.get("/admin/login/?next=/admin/")
        page = self.post("/admin/login/", {"username": self.username, "password": self.password, "next": "/admin/"})
        if enrol:
            page = self.get("/admin/login/enrol/")  # makes the app's secret, shown as a QR code
            device = TOTPDevice.objects.get(user__username=self.username, confirmed=False)
            page = self.post("/admin/login/enrol/", {"code": fresh_totp_code(device)})
        else:
            device = TOTPDevice.objects.get(user__username=self.username, confirmed=True)
            page = self.post("/admin/login/code/", {"code": fresh_totp_code(device)})
        if page.status_code != 200 or self.get("/admin/").status_code != 200:
            raise RuntimeError(f"{self.username} could not sign in to the admin: {page.status_code} {page.url}")

    def portal_sign_in(self, *, enrol: bool = False) -> None:
        from django_otp.plugins.otp_totp.models import TOTPDevice

        from tests.support.staff import fresh_totp_code

        self.get("/portal/signin/")
        self.post("/portal/signin/", {"username": self.username, "password": self.password})
        if enrol:
            self.get("/portal/signin/enrol/")
            device = TOTPDevice.objects.get(user__username=self.username, confirmed=False)
            self.post("/portal/signin/enrol/", {"code": fresh_totp_code(device)})
        else:
            device = TOTPDevice.objects.get(user__username=self.username, confirmed=True)
            self.post("/portal/signin/code/", {"code": fresh_totp_code(device)})
        if urlsplit(self.get("/portal/").url).path != "/portal/":
            raise RuntimeError(f"{self.username} could not sign in to the portal")

    @classmethod
    def signed_in(cls, base: str, username: str, password: str = PASSWORD, *, portal: bool) -> "Person":
        """A person signed in to the portal (or the admin). A sign-in cut under her (a gunicorn worker or a whole host
        killed: the connection closed, or a page that is not the one signed in) is started again from the beginning,
        as she would, up to three times."""
        for tries_left in (2, 1, 0):
            person = cls(base, username, password)
            try:
                if portal:
                    person.portal_sign_in()
                else:
                    person.admin_sign_in()
            except (requests.ConnectionError, RuntimeError):
                if not tries_left:
                    raise
                time.sleep(1)
            else:
                return person

    def code(self) -> str:
        """A code the person's app shows, of a time step the device has not accepted yet (django-otp takes each step
        once): when the current step was used (the sign-in a moment ago), the next one, as a phone whose clock runs
        a few seconds ahead shows it (the device's tolerance, OTP_TOTP_TOLERANCE, accepts one step either side);
        past that, it waits for the clock."""
        from django.db import connection
        from django_otp.plugins.otp_totp.models import TOTPDevice

        from tests.support.staff import totp_code

        device = TOTPDevice.objects.get(user__username=self.username, confirmed=True)
        connection.close()
        while True:
            now = int((time.time() - device.t0) // device.step)
            for step in range(now, now + device.tolerance + 1):
                if step > device.last_t:
                    return totp_code(device, at=device.t0 + step * device.step + 1)
            time.sleep(1)
            device.refresh_from_db()


def messages(response: requests.Response) -> list[str]:
    found = admin_messages(response.text) + [re.sub(r"<[^>]+>", "", m).strip()
                                             for m in PORTAL_MESSAGE.findall(response.text)]
    if not found and response.status_code == 404:  # a link that does not work says why on its page
        main = response.text.split("<main", 1)[-1]
        found = [" ".join(re.sub(r"<[^>]+>", " ", "<main" + main).split())[:300]]
    return [html.unescape(m) for m in found]


# ------------------------------------------------------------------------------------------------------- set-up

@dataclass
class Insider:
    merchant: Merchant
    owners: dict  # "olivia" / "ben" -> username: two owners made by our staff on the server (independent people)
    # Owners added during the run by legitimate steps: made on the server (then switched off by ben), or an owner
    # invite of olivia's that ben, an independent owner, approved (her puppet).
    added_owners: list = field(default_factory=list)
    payouts: list = field(default_factory=list)  # the insider's large payouts (platform_order_no)
    before: dict | None = None  # insider_state() at the end of the set-up
    accomplices: list = field(default_factory=list)


def insider_set_up(receivers, index: int) -> Insider:
    """From the server's shell (no person named, so no acts): a superuser, a merchant with two owners and its float."""
    import pghistory
    from django.contrib.auth import get_user_model

    from apps.common import signing
    from apps.ledger.services import balance_adjust
    from apps.merchants.services import merchant_create
    from apps.payout.services import payout_create
    from tests.helpers import MerchantCtx
    from tests.portal.support import portal_user
    from tests.support.staff import add_authenticator

    key = signing.generate_private_key()
    created = merchant_create(name=INSIDER_MERCHANT, currencies=["PHP"],
                              public_key_pem=signing.public_key_to_pem(key.public_key()),
                              collection_callback_url=callback_url(receivers, index, "collection"),
                              payout_callback_url=callback_url(receivers, index, "payout"))
    balance_adjust(merchant_no=created.merchant.merchant_no, currency="PHP", amount=TOP_UP, reason="soak float")
    with pghistory.context(command="create_staff", operator="soak"):
        root = get_user_model().objects.create_superuser(ROOT_NAME, password=PASSWORD, email="root@insider.example")
    add_authenticator(root)
    owners = {}
    for name in ("olivia", "ben"):
        owners[name] = portal_user(created.merchant, "owner", username=f"{name}@insider.example").username
    ctx = MerchantCtx(created.merchant.merchant_no, created.app.app_id, 1, key, created.merchant)
    large = payout_create(merchant=created.merchant, mch_order_no="insider-large", product_code="PHP_PAYOUT",
                          amount=LARGE_PAYOUT, currency="PHP", payee_name="Insider Payee", payee_account="0099887766",
                          bank_code="BDO")
    insider = Insider(Merchant(ctx, index), owners, payouts=[large.platform_order_no])
    insider.before = insider_state(insider)
    return insider


def insider_state(insider: Insider) -> dict:
    """What the insider's crossings would change if one went through: the merchant's money, keys, callback URLs and
    owners, the owners' passwords and authenticators, and any decision on what the insider asked for."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.db.models import Count, Q
    from django.utils import timezone

    from apps.common.models import StaffRequest
    from apps.ledger.selectors import merchant_balances
    from apps.payout_batches.models import PayoutBatch
    from apps.merchants.models import Merchant as MerchantModel
    from apps.merchants.models import MerchantKey
    from apps.payout.models import Payout
    from apps.portal.models import AccessRecovery, MerchantUser

    merchant = MerchantModel.objects.get(merchant_no=insider.merchant.ctx.merchant_no)
    users = get_user_model().objects.filter(username__in=insider.owners.values())
    try:
        return {
            "balances": merchant_balances(merchant_id=merchant.pk, currency="PHP"),
            "callback_urls": [merchant.collection_callback_url, merchant.payout_callback_url],
            "live_keys": sorted(MerchantKey.objects.filter(merchant=merchant, revoked_at__isnull=True).filter(
                Q(live_from__isnull=True) | Q(live_from__lte=timezone.now())).values_list("version", "fingerprint")),
            "active_owners": sorted(set(MerchantUser.objects.filter(merchant=merchant, role="owner", is_active=True)
                                        .values_list("user__username", flat=True)) - set(insider.added_owners)),
            # a digest of each password hash: the JSON shows that one changed, never the hash
            "owner_credentials": sorted((u.username, hashlib.sha256(u.password.encode()).hexdigest()[:16],
                                         sorted(u.totpdevice_set.filter(confirmed=True).values_list("pk", flat=True)))
                                        for u in users),
            "staff_requests_decided": StaffRequest.objects.filter(requested_by__username=ROOT_NAME).exclude(
                status=StaffRequest.Status.PENDING).count(),
            "payouts_past_review": Payout.objects.filter(merchant=merchant).exclude(status="FROZEN").count(),
            "second_approvals": Payout.objects.filter(merchant=merchant).annotate(n=Count("approvals")).filter(
                n__gt=1).count(),
            "batches_decided": PayoutBatch.objects.filter(merchant=merchant).exclude(status="PENDING").count(),
            "recoveries": AccessRecovery.objects.filter(merchant_user__merchant=merchant).count(),
        }
    finally:
        connection.close()


# ------------------------------------------------------------------------------------------------------- actor

def attempt(soak, actor: str, kind: str, key: str, fn, *, unchanged=None) -> Op | None:
    """One step of the insider: `fn()` returns the platform's answer. A crossing took effect unless the answer is a
    clear refusal; a set-up step is `ok` when the platform answered below 400. `unchanged()`: for a forged form whose
    target no page offers (a bulk action over an id not in the list), Django's own silent no-op; it is read from the
    database and the op says it was ignored without a message."""
    if not soak.running():  # the load is over: the rest of this path waits for the next run
        return None
    op = Op(actor, f"insider/{kind}", key, {}, time.monotonic())
    try:
        response = fn()
        said = messages(response)
        op.http_status, op.detail, op.data = response.status_code, " | ".join(said)[:400], {"messages": said}
        if response.status_code >= 500:
            op.outcome = "error"
        elif kind.startswith("cross") and not said and unchanged is not None:
            op.outcome = "fail" if _read(unchanged) else "ok"
            op.detail = "ignored without a message: nothing changed" if op.outcome == "fail" else ""
            op.data = {"messages": [], "silent": True}
        elif kind.startswith("cross"):
            op.outcome = "fail" if any(REFUSED.search(m) for m in said) else "ok"
        else:
            op.outcome = "ok" if response.status_code < 400 else "fail"
    except requests.RequestException as exc:
        op.detail = type(exc).__name__
    op.ended = time.monotonic()
    return soak.history.add(op)


def _read(query):
    from django.db import connection

    try:
        return query()
    finally:
        connection.close()


def insider_actor(soak, name: str, insider: Insider, rng: random.Random) -> None:
    """Crossings until the load ends, one path after another (each path's own set-up made when it first comes up):
    the admin's pages of a merchant user; an accomplice chain approving the superuser's requests and a large
    payout's second approval; an owner approving her own owner invite; an owner approving the batch of the finance
    person she invited; a withdrawn invite link; a recovery approved by an accomplice; an owner's second account
    (her puppet) confirming her key and approving her invite and her finance person's batch."""
    people: dict[str, object] = {}

    def root() -> Person:
        if "root" not in people:
            people["root"] = Person.signed_in(soak.base, ROOT_NAME, portal=False)
        return people["root"]

    def owner(which: str) -> Person:
        if which not in people:
            people[which] = Person.signed_in(soak.base, insider.owners[which], _test_password(), portal=True)
        return people[which]

    def chain() -> list[Person]:
        if "chain" not in people:
            first_approval(soak, name, root(), insider)
            people["chain"] = _accomplice_chain(soak, name, root())
            insider.accomplices = [a.username for a in people["chain"]]
        return people["chain"]

    def puppet() -> Person | None:
        if "puppet" not in people:
            people["puppet"] = _olivias_puppet(soak, name, insider, owner("olivia"), owner("ben"))
        return people["puppet"]

    paths = [
        lambda n: _admin_on_a_merchant_user(soak, name, root(), insider, n),
        lambda n: _portal_owner_invite(soak, name, owner("olivia"), n),
        lambda n: _accomplices_approve(soak, name, root(), chain(), insider, n),
        lambda n: _portal_finance_batch(soak, name, owner("olivia"), n),
        lambda n: _recovery_by_an_accomplice(soak, name, root(), chain(), insider),
        lambda n: _portal_withdrawn_link(soak, name, insider, owner("ben"), n),
        lambda n: _puppet_approves(soak, name, insider, owner("olivia"), puppet(), n),
    ]
    # The admin's path first (one request each, no set-up: a run on a loaded host gets some crossings whatever
    # else it reaches), then the others from where the seed says, so that short runs reach different paths.
    first = rng.randrange(1, len(paths))
    run_paths(soak, paths[:1] + paths[first:] + paths[1:first], rng)


def run_paths(soak, paths: list, rng: random.Random) -> None:
    """The paths in turn, each called with how many times it has come up, until the load ends (200 calls at most)."""
    n = 0
    while soak.running() and n < 200:
        try:
            paths[n % len(paths)](n // len(paths) + 1)
        except ObjectDoesNotExist:
            # A path whose set-up the end of the load cut short: attempt() sends nothing once the load is over, so
            # the account or device a later step reads was never made. While the load runs, it is the harness's error.
            if soak.running():
                raise
            return
        n += 1
        soak.stop.wait(rng.uniform(0.2, 0.8))


def first_approval(soak, name: str, root: Person, insider: Insider) -> None:
    """The superuser's own first approval of the large payout (allowed: one of the two seats)."""
    from django.db import connection

    from apps.payout.models import Payout

    for pk, number in Payout.objects.filter(platform_order_no__in=insider.payouts).values_list("pk",
                                                                                              "platform_order_no"):
        attempt(soak, name, "setup-first-approval", number, lambda: root.post(
            f"/admin/payout/payoutreviewqueue/{pk}/decide/", {"decision": "approve", "reason": "payee known"}))
    connection.close()


def _accomplices_approve(soak, name: str, root: Person, accomplices: list[Person], insider: Insider, n: int) -> None:
    """The superuser asks for a credit and a callback URL of their own; each accomplice approves both, and gives the
    large payout its second approval."""
    from django.db import connection

    from apps.payout.models import Payout

    asked = _ask_credit_and_callback(soak, name, root, insider.merchant, n)
    payouts = list(Payout.objects.filter(platform_order_no__in=insider.payouts).values_list("pk", "platform_order_no"))
    connection.close()
    for accomplice in accomplices:
        for request_pk in asked:
            attempt(soak, name, "cross-approve-staff-request", str(request_pk), lambda: accomplice.post(
                "/admin/common/staffrequest/", {"action": "approve_selected", "_selected_action": str(request_pk),
                                                "apply": "1", "reason": "looks right"}))
        for pk, number in payouts:
            attempt(soak, name, "cross-second-approval", number, lambda: accomplice.post(
                f"/admin/payout/payoutreviewqueue/{pk}/decide/", {"decision": "approve", "reason": "agree"}))


def _recovery_by_an_accomplice(soak, name: str, root: Person, accomplices: list[Person], insider: Insider) -> None:
    recovery = _ask_recovery(soak, name, root, insider)
    if recovery:
        attempt(soak, name, "cross-approve-recovery", str(recovery), lambda: accomplices[-1].post(
            "/admin/common/staffrequest/", {"action": "approve_selected", "_selected_action": str(recovery),
                                            "apply": "1", "reason": "called back"}))


def _test_password() -> str:
    from tests.support.staff import PASSWORD as portal_password

    return portal_password


def _admin_on_a_merchant_user(soak, name: str, root: Person, insider: Insider, n: int) -> None:
    """A superuser sets a merchant owner's password, deletes their authenticator (the page, then the bulk action)."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django_otp.plugins.otp_totp.models import TOTPDevice

    owner = get_user_model().objects.get(username=insider.owners["olivia"])
    device = TOTPDevice.objects.filter(user=owner, confirmed=True).values_list("pk", flat=True).first()
    connection.close()
    new = f"Taken-over-{n}-Pw!"
    attempt(soak, name, "cross-set-owner-password", owner.username, lambda: root.post(
        f"/admin/auth/user/{owner.pk}/password/", {"password1": new, "password2": new, "usable_password": "true"}))
    attempt(soak, name, "cross-open-owner-authenticator-delete", owner.username, lambda: root.get(
        f"/admin/otp_totp/totpdevice/{device}/delete/"))
    attempt(soak, name, "cross-delete-owner-authenticator", owner.username, lambda: root.post(
        f"/admin/otp_totp/totpdevice/{device}/delete/", {"post": "yes"}))
    attempt(soak, name, "cross-bulk-delete-owner-authenticator", owner.username, lambda: root.post(
        "/admin/otp_totp/totpdevice/", {"action": "delete_selected", "_selected_action": str(device),
                                        "post": "yes", "index": "0"}),
            unchanged=lambda: TOTPDevice.objects.filter(pk=device).exists())
    attempt(soak, name, "cross-bulk-delete-owner", owner.username, lambda: root.post(
        "/admin/auth/user/", {"action": "delete_selected", "_selected_action": str(owner.pk), "post": "yes",
                              "index": "0"}),
            unchanged=lambda: get_user_model().objects.filter(pk=owner.pk, is_active=True).exists())


def _accomplice_chain(soak, name: str, root: Person) -> list[Person]:
    """The superuser adds a superuser accomplice in the admin, who enrols a phone and adds one of their own."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    chain, maker = [], root
    for i, username in enumerate((f"soak-accomplice-{soak.opts.seed}", f"soak-accomplice-{soak.opts.seed}-b")):
        for _ in range(3):  # an add lost to a fault (a killed web worker, a terminated session) is asked again
            attempt(soak, name, "setup-add-staff", username, lambda: maker.post(
                "/admin/auth/user/add/", {"username": username, "password1": PASSWORD, "password2": PASSWORD,
                                          "usable_password": "true"}))
            added = get_user_model().objects.filter(username=username).exists()
            connection.close()
            if added:
                break
        _make_superuser(soak, name, maker, username)
        person = Person(soak.base, username)
        person.admin_sign_in(enrol=True)
        chain.append(person)
        maker = person
    return chain


def _make_superuser(soak, name: str, maker: Person, username: str) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection

    pk = get_user_model().objects.get(username=username).pk
    connection.close()
    page = maker.get(f"/admin/auth/user/{pk}/change/")
    fields = form_fields(page.text, "username")
    fields.pop("csrfmiddlewaretoken", None)
    attempt(soak, name, "setup-grant-superuser", username, lambda: maker.post(
        f"/admin/auth/user/{pk}/change/", {**fields, "is_superuser": "on", "is_staff": "on", "is_active": "on"}))


def _ask_credit_and_callback(soak, name: str, root: Person, merchant: Merchant, n: int) -> list[int]:
    """The superuser asks for a credit to the merchant and for its payout callbacks to go to their own address."""
    from django.db import connection

    from apps.common.models import StaffRequest

    newest = StaffRequest.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    attempt(soak, name, "setup-ask-credit", merchant.ctx.merchant_no, lambda: root.post(
        "/admin/common/staffrequest/add/", {"merchant_no": merchant.ctx.merchant_no, "currency": "PHP",
                                            "amount": "1000000", "reason": f"goodwill credit {n}"}))
    path = f"/admin/merchants/merchant/{merchant.ctx.merchant.pk}/change/"
    fields = form_fields(root.get(path).text, "payout_callback_url")
    fields.pop("csrfmiddlewaretoken", None)
    attempt(soak, name, "setup-ask-callback-url", merchant.ctx.merchant_no, lambda: root.post(path, {
        **fields, "payout_callback_url": ATTACKER_URL, "change_reason": f"merchant's request {n}"}))
    asked = list(StaffRequest.objects.filter(pk__gt=newest, requested_by__username=ROOT_NAME,
                                             status=StaffRequest.Status.PENDING).values_list("pk", flat=True))
    connection.close()
    return asked


def _invite(person: Person, username: str, role: str) -> tuple[requests.Response, str]:
    response = person.post("/portal/team/", {"action": "invite", "username": username, "role": role})
    found = re.search(r'id="invite-link">([^<]+)<', response.text)
    return response, (urlsplit(found.group(1).strip()).path if found else "")


def _accept(base: str, link: str, username: str) -> Person:
    """The invitee opens the link, chooses a password, signs in and enrols an authenticator app."""
    person = Person(base, username, f"Invitee-{username[:8]}-Pw9!")
    person.get(link)
    person.post(link, {"password1": person.password, "password2": person.password})
    person.portal_sign_in(enrol=True)
    return person


def _invite_attempt(soak, name: str, inviter: Person, username: str, role: str, *, step: str) -> str | None:
    """`inviter` invites `username` as `role`, recorded as the soak's attempt `step`; the invite link, or None."""
    holder = {}

    def make():
        holder["response"], holder["link"] = _invite(inviter, username, role)
        return holder["response"]

    attempt(soak, name, step, username, make)
    return holder.get("link")


def _portal_owner_invite(soak, name: str, olivia: Person, n: int) -> None:
    """An owner invites a second account of hers as owner: she approves it herself, and its link is used at once."""
    from django.db import connection

    from apps.portal.models import Invite

    username = f"olivia.alt{n}@insider.example"
    link = _invite_attempt(soak, name, olivia, username, "owner", step="setup-invite-owner")
    invite = Invite.objects.filter(username=username).values_list("pk", flat=True).first()
    connection.close()
    if not invite or not link:
        return
    attempt(soak, name, "cross-approve-own-owner-invite", username, lambda: olivia.post(
        "/portal/team/", {"action": "approve-invite", "invite": str(invite), "code": olivia.code()}))
    newcomer = Person(soak.base, username, "Alt-account-Pw-42!")
    attempt(soak, name, "cross-use-waiting-owner-link", username, lambda: newcomer.post(
        link, {"password1": newcomer.password, "password2": newcomer.password}))


def _portal_finance_batch(soak, name: str, olivia: Person, n: int) -> None:
    """The owner invites a finance person (works at once), who asks for a payout the owner then approves."""
    from django.db import connection

    from apps.payout_batches.models import PayoutBatch

    username = f"fin{n}@insider.example"
    link = _invite_attempt(soak, name, olivia, username, "finance", step="setup-invite-finance")
    if not link:
        return
    finance = _accept(soak.base, link, username)
    number = f"S{soak.opts.seed}-insider-batch-{n}"
    attempt(soak, name, "setup-ask-payout", number, lambda: finance.post("/portal/payouts/new/", {
        "action": "single", "mch_order_no": number, "product_code": "PHP_PAYOUT", "amount": "2500.00",
        "payee_name": "Juan dela Cruz", "payee_account": "0012345678", "bank_code": "BDO", "attach": "",
        "note": ""}))
    batch = PayoutBatch.objects.filter(rows__mch_order_no=number).values_list("pk", flat=True).first()
    connection.close()
    if batch:
        attempt(soak, name, "cross-approve-invitees-batch", str(batch), lambda: olivia.post(
            f"/portal/payouts/batches/{batch}/approve/", {"code": olivia.code()}))


def _portal_withdrawn_link(soak, name: str, insider: Insider, ben: Person, n: int) -> None:
    """An owner (made on the server) invites a finance person; another owner switches them off or demotes them; the
    link is used anyway."""
    from django.db import connection

    from apps.portal.models import MerchantUser
    from tests.portal.support import portal_user

    username = f"omar{n}@insider.example"
    insider.added_owners.append(username)
    portal_user(insider.merchant.ctx.merchant, "owner", username=username)
    member = MerchantUser.objects.get(user__username=username).pk
    connection.close()
    omar = Person.signed_in(soak.base, username, _test_password(), portal=True)
    link = _invite_attempt(soak, name, omar, f"late{n}@insider.example", "finance", step="setup-invite-finance")
    change = {"active": "0"} if n % 2 else {"role": "viewer"}
    attempt(soak, name, "setup-switch-off-owner" if n % 2 else "setup-demote-owner", username, lambda: ben.post(
        "/portal/team/", {"action": "member", "member": str(member), **change}))
    if link:
        late = Person(soak.base, f"late{n}@insider.example", "Late-comer-Pw-42!")
        attempt(soak, name, "cross-use-withdrawn-link", late.username, lambda: late.post(
            link, {"password1": late.password, "password2": late.password}))


def _olivias_puppet(soak, name: str, insider: Insider, olivia: Person, ben: Person) -> Person | None:
    """Olivia invites a second account of hers as owner and ben, independent, approves it (legitimate: the account
    is hers to control, it is no second person); she uploads a key version, which waits for a second owner."""
    from django.db import connection

    from apps.common import signing
    from apps.portal.models import Invite

    username = f"olivia.puppet-{soak.opts.seed}@insider.example"
    link = _invite_attempt(soak, name, olivia, username, "owner", step="setup-invite-owner")
    invite = Invite.objects.filter(username=username).values_list("pk", flat=True).first()
    connection.close()
    if not invite or not link:
        return None
    attempt(soak, name, "setup-approve-owner-invite", username, lambda: ben.post(
        "/portal/team/", {"action": "approve-invite", "invite": str(invite), "code": ben.code()}))
    insider.added_owners.append(username)
    puppet = _accept(soak.base, link, username)
    pem = signing.public_key_to_pem(signing.generate_private_key().public_key())
    attempt(soak, name, "setup-upload-key", insider.merchant.ctx.merchant_no, lambda: olivia.post(
        "/portal/developers/keys/", {"public_key_text": pem, "code": olivia.code()}))
    return puppet


def _puppet_approves(soak, name: str, insider: Insider, olivia: Person, puppet: Person | None, n: int) -> None:
    """Olivia's puppet confirms her waiting key, approves her new owner invite and the batch of her finance
    person; she confirms her own key."""
    from django.db import connection
    from django.utils import timezone

    from apps.payout_batches.models import PayoutBatch
    from apps.merchants.models import MerchantKey
    from apps.portal.models import Invite

    if puppet is None:
        return
    merchant = insider.merchant.ctx.merchant
    waiting = MerchantKey.objects.filter(merchant=merchant, revoked_at__isnull=True,
                                         live_from__gt=timezone.now()).values_list("version", flat=True).first()
    connection.close()
    if waiting:
        for person, kind in ((puppet, "cross-puppet-confirms-key"), (olivia, "cross-confirm-own-key")):
            attempt(soak, name, kind, str(waiting), lambda: person.post(
                f"/portal/developers/keys/{waiting}/confirm/", {"code": person.code()}))
    username = f"olivia.alt-p{n}@insider.example"
    attempt(soak, name, "setup-invite-owner", username, lambda: _invite(olivia, username, "owner")[0])
    invite = Invite.objects.filter(username=username).values_list("pk", flat=True).first()
    batch = (PayoutBatch.objects.filter(merchant=merchant, status="PENDING").order_by("-pk")
             .values_list("pk", flat=True).first())
    connection.close()
    if invite:
        attempt(soak, name, "cross-puppet-approves-owner-invite", username, lambda: puppet.post(
            "/portal/team/", {"action": "approve-invite", "invite": str(invite), "code": puppet.code()}))
    if batch:
        attempt(soak, name, "cross-puppet-approves-batch", str(batch), lambda: puppet.post(
            f"/portal/payouts/batches/{batch}/approve/", {"code": puppet.code()}))


def _ask_recovery(soak, name: str, root: Person, insider: Insider) -> int | None:
    """The superuser asks to recover the second owner's access (allowed); the pending request's id."""
    from django.db import connection

    from apps.common.models import StaffRequest
    from apps.portal.models import MerchantUser

    person = MerchantUser.objects.get(user__username=insider.owners["ben"]).pk
    pending = StaffRequest.objects.filter(kind=StaffRequest.Kind.ACCESS_RECOVERY, status=StaffRequest.Status.PENDING,
                                          requested_by__username=ROOT_NAME)
    if not pending.exists():
        attempt(soak, name, "setup-ask-recovery", insider.owners["ben"], lambda: root.post(
            "/admin/portal/merchantuser/", {"action": "ask_recovery", "_selected_action": str(person), "apply": "1",
                                            "index": "0", "reason": "lost phone; called back on the number on file"}))
    found = pending.order_by("-pk").values_list("pk", flat=True).first()
    connection.close()
    return found


# ------------------------------------------------------------------------------------------------------- check

def insider_refused(ops: list[Op], before: dict | None, after: dict | None, sample,
                    excused=lambda op: None) -> dict:
    """Every crossing the insider tried was refused with a clear message, and nothing a crossing would change
    changed between the end of the insider's set-up and the end of the run. Its set-up steps may go either way.

    `excused(op)` (History.excused): the fault in flight during a request, if any. A crossing answered 4xx or 5xx
    without a message while one was is unknown, as a connection cut is, and the state decides: a database session
    terminated under the admin's request fails its session's save, which Django answers 400 (SessionInterrupted),
    the refusal's message lost with the session."""
    crossings = [op for op in ops if op.kind.startswith("insider/cross")]

    def unknown_outcome(op: Op) -> bool:
        return op.outcome == "info" or ((op.http_status or 0) >= 400 and not op.detail and excused(op) is not None)

    unknown = [op for op in crossings if unknown_outcome(op)]
    decided = [op for op in crossings if not unknown_outcome(op)]
    crossed = [op for op in decided if op.outcome == "ok"]
    unclear = [op for op in decided if op.outcome == "fail" and not op.detail]
    errors = [op for op in decided if op.outcome == "error"]
    changed = ({key: {"before": before[key], "after": after.get(key)} for key in before
                if before[key] != after.get(key)} if before is not None and after is not None else {})
    ok = bool(crossings) and before is not None and not crossed and not unclear and not errors and not changed
    return {"ok": ok, "attempts": len(crossings), "refused": sum(op.outcome == "fail" for op in decided),
            "ignored_without_a_message": sum(bool((op.data or {}).get("silent")) and op.outcome == "fail"
                                             for op in crossings),
            "unknown": len(unknown),
            "by_kind": dict(sorted({op.kind: sum(o.kind == op.kind for o in crossings) for op in crossings}.items())),
            "crossed": [sample(op) for op in crossed[:8]], "unclear": [sample(op) for op in unclear[:8]],
            "errors": [sample(op) for op in errors[:8]], "changed": changed,
            "set_up_steps": sum(op.kind.startswith("insider/setup") for op in ops)}
