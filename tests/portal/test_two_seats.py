"""One person never in two seats, the merchant's side (docs/portal.md, "Maker-checker and independence"): every
decision that takes two people of a merchant refuses an approver who is not independent of the maker
(apps.common.independence), owners are minted only with a second owner's approval, a person's invites die with their
right to make them, and a batch row never adopts another order's payout. Each sequence runs through the real portal
pages: people sign in with their password and the code of their authenticator, and approvals take a fresh code."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.common.models import AccountAct, AuditLog
from apps.ledger.selectors import merchant_balances
from apps.payout_batches.models import PayoutBatch, PayoutBatchRow
from apps.payout.models import Payout
from apps.portal.models import Invite, MerchantUser
from tests.payout.conftest import PHP_FEE, create_ok, fund
from tests.portal.support import PASSWORD, portal_user
from tests.portal.team import step_up_code
from tests.portal.test_access import NEW_PASSWORD, invite_by_command
from tests.support.staff import totp_code

pytestmark = pytest.mark.django_db

User = get_user_model()


# --- people, through the real pages ----------------------------------------------------------------------------


def signed_in(username: str, password: str = PASSWORD) -> Client:
    """A browser of this person signed in through the portal's pages: the password, then their app's code."""
    client = Client()
    response = client.post("/portal/signin/", {"username": username, "password": password})
    assert response.status_code == 302 and response["Location"] == "/portal/signin/code/", response
    user = User.objects.get(username=username)
    response = client.post("/portal/signin/code/", {"code": step_up_code(user)})
    assert response.status_code == 302 and response["Location"] == "/portal/", response.content.decode()[:500]
    return client


def accepted_and_enrolled(link: str, username: str) -> Client:
    """The invitee opens the link, chooses a password, signs in and adds an authenticator app (the first sign-in)."""
    client = Client()
    response = client.post(link, {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    assert response.status_code == 302, response.content.decode()[:800]
    response = client.post("/portal/signin/", {"username": username, "password": NEW_PASSWORD})
    assert response["Location"] == "/portal/signin/enrol/"
    client.get("/portal/signin/enrol/")  # makes the app's secret (shown as a QR code)
    device = TOTPDevice.objects.get(user__username=username, confirmed=False)
    assert client.post("/portal/signin/enrol/", {"code": totp_code(device)}).status_code == 200  # recovery codes
    assert client.get("/portal/").status_code == 200
    return client


def code_of(username: str) -> str:
    return step_up_code(User.objects.get(username=username))


def invite_on_team_page(client: Client, username: str, role: str) -> str:
    response = client.post("/portal/team/", {"action": "invite", "username": username, "role": role})
    page = response.content.decode()
    assert 'id="invite-link"' in page, page[:3000]
    return page.split('id="invite-link">')[1].split("<")[0].replace("http://testserver", "")


def text(response) -> str:
    """The page's HTML with its whitespace runs as one space (a sentence may wrap in the template)."""
    return " ".join(response.content.decode().split())


def messages_of(response) -> str:
    return " ".join(str(message) for message in response.context["messages"]) if response.context else ""


def people(merchant, *names_and_roles):
    """Merchant users made by our staff (nobody of the merchant acted on them: independent people)."""
    domain = merchant.merchant.merchant_no.lower()
    return [portal_user(merchant, role, username=f"{name}@{domain}.example") for name, role in names_and_roles]


def ask_for_one_payout(client: Client, number: str, amount: str = "250.00", payee: str = "Juan dela Cruz",
                       account: str = "0012345678", bank: str = "BDO") -> PayoutBatch:
    response = client.post("/portal/payouts/new/", {
        "action": "single", "mch_order_no": number, "product_code": "PHP_PAYOUT", "amount": amount,
        "payee_name": payee, "payee_account": account, "bank_code": bank, "attach": "", "note": ""})
    assert response.status_code == 302, response.content.decode()[:2000]
    return PayoutBatch.objects.get(rows__mch_order_no=number)


def approve_on_the_page(client: Client, batch: PayoutBatch, username: str):
    return client.post(f"/portal/payouts/batches/{batch.pk}/approve/", {"code": code_of(username)}, follow=True)


def device_unspent(username: str) -> bool:
    return TOTPDevice.objects.get(user__username=username, confirmed=True).last_t == -1


# --- a second account is not a second person ----------------------------------------------------------------------


def test_owner_invited_by_the_maker_cannot_approve_the_makers_batch(merchant):
    fund(merchant, 10_000_000)
    olivia, ben = people(merchant, ("olivia", "owner"), ("ben", "owner"))
    maker = signed_in(olivia.username)
    batch = ask_for_one_payout(maker, "seat-1")
    refused = approve_on_the_page(maker, batch, olivia.username)
    assert "another owner must approve" in messages_of(refused)

    # Olivia invites a second account of hers as owner; Ben approves the invite; she accepts it and enrols.
    link = invite_on_team_page(maker, "olivia.alt@example.com", "owner")
    response = signed_in(ben.username).post("/portal/team/", {
        "action": "approve-invite", "invite": Invite.objects.get(username="olivia.alt@example.com").pk,
        "code": code_of(ben.username)}, follow=True)
    assert "works now" in messages_of(response)
    alt = accepted_and_enrolled(link, "olivia.alt@example.com")
    assert AccountAct.objects.filter(actor=olivia, subject__username="olivia.alt@example.com",
                                     act=AccountAct.Act.INVITED).count() == 1

    # The new account sees why it cannot approve, and a POST is refused before its code is spent.
    page = alt.get(f"/portal/payouts/batches/{batch.pk}/").content.decode()
    assert 'id="approve-form"' not in page and "olivia@" in page and "invited olivia.alt@example.com" in page
    TOTPDevice.objects.filter(user__username="olivia.alt@example.com").update(last_t=-1)
    refused = alt.post(f"/portal/payouts/batches/{batch.pk}/approve/", {"code": "123456"}, follow=True)
    assert "not independent" in messages_of(refused) and "invited olivia.alt@example.com" in messages_of(refused)
    assert device_unspent("olivia.alt@example.com")
    batch.refresh_from_db()
    assert (batch.status, batch.decided_by_id) == ("PENDING", None)
    assert Payout.objects.count() == 0 and not AuditLog.objects.filter(action="payout_batch.approve").exists()
    assert "waiting for your approval" not in alt.get("/portal/").content.decode()

    # Ben, a person of his own, approves.
    assert "Approved: 1 payout created" in messages_of(approve_on_the_page(signed_in(ben.username), batch,
                                                                         ben.username))


def test_owner_cannot_approve_a_batch_of_the_finance_person_they_invited(merchant):
    fund(merchant, 10_000_000)
    olivia, ben = people(merchant, ("olivia", "owner"), ("ben", "owner"))
    owner = signed_in(olivia.username)
    link = invite_on_team_page(owner, "fin@example.com", "finance")  # a non-owner invite works at once
    finance = accepted_and_enrolled(link, "fin@example.com")
    batch = ask_for_one_payout(finance, "seat-fin-1")
    assert "waiting for your approval" not in owner.get("/portal/").content.decode()
    refused = approve_on_the_page(owner, batch, olivia.username)
    assert "olivia@" in messages_of(refused) and "invited fin@example.com" in messages_of(refused)
    assert PayoutBatch.objects.get(pk=batch.pk).status == "PENDING" and Payout.objects.count() == 0
    assert "Approved: 1 payout created" in messages_of(approve_on_the_page(signed_in(ben.username), batch,
                                                                         ben.username))


def test_an_owner_the_maker_promoted_cannot_approve_the_makers_batch(merchant):
    fund(merchant, 10_000_000)
    olivia, ben, fina = people(merchant, ("olivia", "owner"), ("ben", "owner"), ("fina", "finance"))
    batch = ask_for_one_payout(signed_in(olivia.username), "seat-promo-1")
    # Olivia asks to make Fina an owner; Ben approves; Olivia granted it, so Fina is not independent of her.
    signed_in(olivia.username).post("/portal/team/", {"action": "member", "member": fina.merchant_user.pk,
                                                      "role": "owner", "active": "1"})
    signed_in(ben.username).post("/portal/team/", {"action": "approve-owner", "member": fina.merchant_user.pk,
                                                   "code": code_of(ben.username)})
    assert MerchantUser.objects.get(user=fina).role == "owner"
    refused = approve_on_the_page(signed_in(fina.username), batch, fina.username)
    assert "olivia@" in messages_of(refused) and "granted a role to fina@" in messages_of(refused)
    assert PayoutBatch.objects.get(pk=batch.pk).status == "PENDING" and Payout.objects.count() == 0


# --- a merchant with one independent owner ---------------------------------------------------------------------


def test_a_sole_owner_cannot_mint_a_second_owner_and_the_pages_say_to_ask_staff(merchant):
    fund(merchant, 10_000_000)
    (olivia,) = people(merchant, ("olivia", "owner"))
    owner = signed_in(olivia.username)
    page = text(owner.get("/portal/team/"))
    assert 'id="no-second-owner"' in page and "Ask our staff to verify and invite a second owner" in page
    response = owner.post("/portal/team/", {"action": "invite", "username": "olivia.alt@example.com",
                                            "role": "owner"})
    assert "Ask our staff to verify and invite a second owner" in messages_of(response)
    assert not Invite.objects.exists() and not AuditLog.objects.filter(action="portal.invite").exists()

    batch = ask_for_one_payout(owner, "sole-1")
    page = text(owner.get(f"/portal/payouts/batches/{batch.pk}/"))
    assert 'id="no-checker"' in page and "Ask our staff to verify and invite a second owner" in page

    # Staff invite a second owner from the server: no person of the merchant made it, so the new owner approves.
    made = invite_by_command(merchant.merchant_no, "ben@example.com", "owner")
    ben = accepted_and_enrolled(made["invite_url"], "ben@example.com")
    assert 'id="no-checker"' not in owner.get(f"/portal/payouts/batches/{batch.pk}/").content.decode()
    assert "Approved: 1 payout created" in messages_of(approve_on_the_page(ben, batch, "ben@example.com"))


# --- an owner invite waits for a second owner --------------------------------------------------------------------


def test_an_owner_invite_link_works_only_after_an_independent_owner_approves_it(merchant):
    olivia, ben = people(merchant, ("olivia", "owner"), ("ben", "owner"))
    maker = signed_in(olivia.username)
    link = invite_on_team_page(maker, "new.owner@example.com", "owner")
    invite = Invite.objects.get(username="new.owner@example.com")
    assert invite.needs_approval and invite.approved_at is None

    newcomer = Client()
    page = newcomer.get(link)
    assert page.status_code == 404 and "waiting for a second owner" in page.content.decode()
    refused = newcomer.post(link, {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    assert refused.status_code == 404 and "waiting for a second owner" in refused.content.decode()
    assert not User.objects.filter(username="new.owner@example.com").exists()

    # The maker cannot approve their own invite (and is not asked for a code).
    assert 'class="inline approve-invite-form"' not in maker.get("/portal/team/").content.decode()
    response = maker.post("/portal/team/", {"action": "approve-invite", "invite": invite.pk,
                                            "code": code_of(olivia.username)}, follow=True)
    assert "You made this invite" in messages_of(response) and device_unspent(olivia.username)
    # A wrong code changes nothing.
    checker = signed_in(ben.username)
    response = checker.post("/portal/team/", {"action": "approve-invite", "invite": invite.pk, "code": "000000"},
                            follow=True)
    assert "not right" in messages_of(response)
    invite.refresh_from_db()
    assert invite.approved_at is None and not AuditLog.objects.filter(action="portal.invite_approve").exists()

    response = checker.post("/portal/team/", {"action": "approve-invite", "invite": invite.pk,
                                              "code": code_of(ben.username)}, follow=True)
    assert "works now" in messages_of(response)
    invite.refresh_from_db()
    assert invite.approved_by == ben and AuditLog.objects.get(action="portal.invite_approve").actor == ben
    accepted_and_enrolled(link, "new.owner@example.com")
    assert MerchantUser.objects.get(user__username="new.owner@example.com").role == "owner"


def test_another_merchants_owner_cannot_approve_an_owner_invite_or_request(merchant, other_merchant):
    olivia, ben, fina = people(merchant, ("olivia", "owner"), ("ben", "owner"), ("fina", "finance"))
    (outsider,) = people(other_merchant, ("olga", "owner"))
    maker = signed_in(olivia.username)
    invite_on_team_page(maker, "new.owner@example.com", "owner")
    maker.post("/portal/team/", {"action": "member", "member": fina.merchant_user.pk, "role": "owner"})
    theirs = signed_in(outsider.username)
    for action, field, pk in (("approve-invite", "invite", Invite.objects.get().pk),
                              ("approve-owner", "member", fina.merchant_user.pk)):
        response = theirs.post("/portal/team/", {"action": action, field: pk, "code": code_of(outsider.username)},
                               follow=True)
        assert "not found" in messages_of(response) and device_unspent(outsider.username)
    assert Invite.objects.get().approved_at is None
    assert MerchantUser.objects.get(user=fina).role == "finance"
    assert not AuditLog.objects.filter(action__in=["portal.invite_approve", "portal.member_owner_approve"]).exists()


def test_an_owner_the_maker_controls_cannot_approve_the_makers_owner_invite(merchant):
    olivia, ben = people(merchant, ("olivia", "owner"), ("ben", "owner"))
    maker = signed_in(olivia.username)
    first = invite_on_team_page(maker, "alt1@example.com", "owner")
    signed_in(ben.username).post("/portal/team/", {"action": "approve-invite", "code": code_of(ben.username),
                                                   "invite": Invite.objects.get(username="alt1@example.com").pk})
    alt = accepted_and_enrolled(first, "alt1@example.com")
    invite_on_team_page(maker, "alt2@example.com", "owner")
    second = Invite.objects.get(username="alt2@example.com")
    page = alt.get("/portal/team/").content.decode()
    assert "invited alt1@example.com" in page
    response = alt.post("/portal/team/", {"action": "approve-invite", "invite": second.pk,
                                          "code": code_of("alt1@example.com")}, follow=True)
    assert "not independent" in messages_of(response) and device_unspent("alt1@example.com")
    second.refresh_from_db()
    assert second.approved_at is None


def test_making_someone_an_owner_or_switching_an_owner_back_on_waits_for_a_second_owner(merchant):
    olivia, ben, fina, omar = people(merchant, ("olivia", "owner"), ("ben", "owner"), ("fina", "finance"),
                                     ("omar", "owner"))
    owner = signed_in(olivia.username)
    owner.post("/portal/team/", {"action": "member", "member": omar.merchant_user.pk, "active": "0"})
    for person in (fina, omar):
        response = owner.post("/portal/team/", {"action": "member", "member": person.merchant_user.pk,
                                                "role": "owner", "active": "1"}, follow=True)
        assert "waits for another owner" in messages_of(response)
    assert MerchantUser.objects.get(user=fina).role == "finance" and not MerchantUser.objects.get(user=omar).is_active
    assert not AccountAct.objects.exists()

    checker = signed_in(ben.username)
    for person in (fina, omar):
        checker.post("/portal/team/", {"action": "approve-owner", "member": person.merchant_user.pk,
                                       "code": code_of(ben.username)})
    assert set(MerchantUser.objects.filter(user__in=[fina, omar]).values_list("role", "is_active")) == {
        ("owner", True)}
    assert set(AccountAct.objects.values_list("actor__username", "subject__username", "act")) == {
        (olivia.username, fina.username, "role_granted"), (olivia.username, omar.username, "role_granted")}


def test_a_role_that_grants_more_is_recorded_and_one_that_grants_less_is_not(merchant):
    olivia, viv, fina = people(merchant, ("olivia", "owner"), ("viv", "viewer"), ("fina", "finance"))
    owner = signed_in(olivia.username)
    owner.post("/portal/team/", {"action": "member", "member": fina.merchant_user.pk, "role": "viewer"})
    assert not AccountAct.objects.exists()
    owner.post("/portal/team/", {"action": "member", "member": viv.merchant_user.pk, "role": "finance"})
    owner.post("/portal/team/", {"action": "member", "member": fina.merchant_user.pk, "active": "0"})
    owner.post("/portal/team/", {"action": "member", "member": fina.merchant_user.pk, "active": "1"})
    assert sorted(AccountAct.objects.values_list("subject__username", "note")) == [
        (fina.username, "portal: viewer, switched back on"), (viv.username, "portal: finance")]


# --- invites die with their maker's right -----------------------------------------------------------------------


def test_switching_off_an_owner_withdraws_their_invites_and_the_link_says_so(merchant):
    olivia, ben = people(merchant, ("olivia", "owner"), ("ben", "owner"))
    maker = signed_in(olivia.username)
    finance_link = invite_on_team_page(maker, "fin@example.com", "finance")
    invite_on_team_page(maker, "own@example.com", "owner")
    signed_in(ben.username).post("/portal/team/", {"action": "member", "member": olivia.merchant_user.pk,
                                                   "active": "0"})
    assert not Invite.objects.filter(revoked_at__isnull=True).exists() and Invite.objects.count() == 2
    withdrawn = AuditLog.objects.filter(action="portal.invite_revoke")
    assert withdrawn.count() == 2 and {row.actor for row in withdrawn} == {ben}
    assert {row.reason for row in withdrawn} == {"withdrawn: its maker was switched off"}
    page = Client().get(finance_link)
    assert page.status_code == 404 and "withdrawn" in page.content.decode()
    response = Client().post(finance_link, {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    assert response.status_code == 404 and not User.objects.filter(username="fin@example.com").exists()


def test_demoting_an_owner_withdraws_their_invites_and_owner_requests(merchant):
    olivia, ben, fina = people(merchant, ("olivia", "owner"), ("ben", "owner"), ("fina", "finance"))
    maker = signed_in(olivia.username)
    link = invite_on_team_page(maker, "dev@example.com", "developer")
    maker.post("/portal/team/", {"action": "member", "member": fina.merchant_user.pk, "role": "owner"})
    assert MerchantUser.objects.get(user=fina).owner_requested_by == olivia
    signed_in(ben.username).post("/portal/team/", {"action": "member", "member": olivia.merchant_user.pk,
                                                   "role": "finance"})
    assert Invite.objects.get().revoked_at is not None
    assert MerchantUser.objects.get(user=fina).owner_requested_by is None
    assert "withdrawn" in Client().get(link).content.decode()
    assert AuditLog.objects.get(action="portal.member_owner_withdraw").reason == (
        "withdrawn: its maker is no longer an owner")


def test_an_invite_whose_maker_lost_the_right_by_another_path_is_refused_at_acceptance(merchant):
    """Accepting checks the maker's right as it is then, whatever switched them off (our staff, a shell)."""
    olivia, ben = people(merchant, ("olivia", "owner"), ("ben", "owner"))
    link = invite_on_team_page(signed_in(olivia.username), "fin@example.com", "finance")
    User.objects.filter(pk=olivia.pk).update(is_active=False)
    page = Client().post(link, {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    assert page.status_code == 404 and "withdrawn" in page.content.decode()
    assert not User.objects.filter(username="fin@example.com").exists()
    assert not AuditLog.objects.filter(action="portal.invite_accept").exists()


@pytest.mark.parametrize("change", [{"active": "0"}, {"role": "viewer"}])
def test_a_batch_whose_maker_was_switched_off_or_moved_can_only_be_rejected(merchant, change):
    fund(merchant, 10_000_000)
    olivia, ben, fina = people(merchant, ("olivia", "owner"), ("ben", "owner"), ("fina", "finance"))
    batch = ask_for_one_payout(signed_in(fina.username), "gone-1")
    signed_in(olivia.username).post("/portal/team/", {"action": "member", "member": fina.merchant_user.pk, **change})
    checker = signed_in(ben.username)
    assert "can no longer ask for payouts" in text(checker.get(f"/portal/payouts/batches/{batch.pk}/"))
    assert "waiting for your approval" not in checker.get("/portal/").content.decode()
    refused = approve_on_the_page(checker, batch, ben.username)
    assert "can no longer ask for payouts" in messages_of(refused) and device_unspent(ben.username)
    assert PayoutBatch.objects.get(pk=batch.pk).status == "PENDING" and Payout.objects.count() == 0
    checker.post(f"/portal/payouts/batches/{batch.pk}/reject/", {"reason": "asked by someone who left"})
    assert PayoutBatch.objects.get(pk=batch.pk).status == "REJECTED"


# --- a batch row never adopts another order's payout ------------------------------------------------------------


def test_a_row_whose_order_number_the_api_used_for_another_payee_fails_with_2001(client, merchant):
    fund(merchant, 10_000_000)
    fina, ben = people(merchant, ("fina", "finance"), ("ben", "owner"))
    batch = ask_for_one_payout(signed_in(fina.username), "dup-1", amount="10.00", payee="Maria Santos",
                               account="0098765432", bank="GCASH")
    # Before the approval, whoever holds the API key creates dup-1 for 999.00 to another payee.
    theirs = create_ok(client, merchant, mch_order_no="dup-1", amount=99_900, payee_name="Pedro Penduko",
                       payee_account="5555666677", bank_code="BDO")
    before = merchant_balances(merchant_id=merchant.merchant.pk, currency="PHP")
    owner = signed_in(ben.username)
    assert "2001" in owner.get(f"/portal/payouts/batches/{batch.pk}/").content.decode()  # the page's check says so
    response = approve_on_the_page(owner, batch, ben.username)
    assert "0 payouts created, 1 not created" in messages_of(response)
    row = PayoutBatchRow.objects.get(batch=batch)
    assert (row.status, row.error_code, row.payout_id, row.replayed) == ("FAILED", "2001", None, False)
    assert "already exists with different details" in row.error_msg
    assert "amount" in row.error_msg and "payee_account" in row.error_msg
    assert list(Payout.objects.values_list("pk", flat=True)) == [theirs.pk]
    assert merchant_balances(merchant_id=merchant.merchant.pk, currency="PHP") == before  # nothing more moved
    page = owner.get(f"/portal/payouts/batches/{batch.pk}/").content.decode()
    assert "existed already" not in page and "already exists with different details" in page


def test_a_row_that_failed_for_another_reason_never_adopts_a_different_order_with_its_number(merchant, team):
    """The processor's other path: payout_create failed (here 2003), and an order with the row's number exists by
    then. It is the row's result only when it is the same payout (a concurrent processor made it)."""
    from apps.payout_batches import services
    from tests.payout.conftest import new_payout
    from tests.portal.test_payout_batches import csv_of

    fund(merchant, 10_000_000)
    batch = services.payout_batch_from_csv(actor=team["finance"], file_name="p.csv", data=csv_of(
        "race-a,1000,PHP,Maria Santos,0098765432,GCASH", "race-b,1000,PHP,Maria Santos,0098765432,GCASH")).batch
    services.payout_batch_approve(actor=team["owner"], batch_id=batch.pk, otp_code=team["owner"].code())
    other = new_payout(merchant, mch_order_no="race-a", amount=99_900, payee_name="Pedro Penduko",
                       payee_account="0098765432", bank_code="GCASH")
    same = new_payout(merchant, mch_order_no="race-b", amount=1000, payee_name="Maria Santos",
                      payee_account="0098765432", bank_code="GCASH")
    rows = {row.mch_order_no: row for row in batch.rows.all()}
    for row in rows.values():
        services._row_record(row_id=row.pk, payout=None, error=("2003", "insufficient balance"))
    recorded = {row.mch_order_no: row for row in PayoutBatchRow.objects.filter(batch=batch)}
    assert (recorded["race-a"].status, recorded["race-a"].error_code, recorded["race-a"].payout_id) == (
        "FAILED", "2001", None)
    assert "already exists with different details (amount, payee_name)" in recorded["race-a"].error_msg
    assert (recorded["race-b"].status, recorded["race-b"].payout_id) == ("CREATED", same.pk)
    assert other.pk != same.pk


def test_a_row_whose_same_payout_exists_is_recorded_as_that_payout(client, merchant):
    fund(merchant, 10_000_000)
    fina, ben = people(merchant, ("fina", "finance"), ("ben", "owner"))
    batch = ask_for_one_payout(signed_in(fina.username), "same-1", amount="10.00", payee="Maria Santos",
                               account="0098765432", bank="GCASH")
    ours = create_ok(client, merchant, mch_order_no="same-1", amount=1_000, payee_name="Maria Santos",
                     payee_account="0098765432", bank_code="GCASH")
    approve_on_the_page(signed_in(ben.username), batch, ben.username)
    row = PayoutBatchRow.objects.get(batch=batch)
    assert (row.status, row.payout_id, row.replayed) == ("CREATED", ours.pk, True)
    assert Payout.objects.count() == 1 and ours.amount + PHP_FEE == 1_000 + PHP_FEE


# --- races ---------------------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_two_owners_approving_one_owner_invite_at_once_approve_it_once(bootstrapped, rsa_keys):
    from apps.portal import services
    from tests.conftest import make_merchant
    from tests.helpers import at_once

    ctx = make_merchant(rsa_keys[0])
    olivia, ben, carla = people(ctx, ("olivia", "owner"), ("ben", "owner"), ("carla", "owner"))
    invite = services.invite_create(merchant=ctx.merchant, username="new.owner@example.com", role="owner",
                                    actor=olivia).invite
    checkers = [ben, carla]
    codes = [code_of(person.username) for person in checkers]
    outcomes = at_once(lambda i: services.invite_approve(merchant=ctx.merchant, invite_id=invite.pk,
                                                         actor=checkers[i], otp_code=codes[i]), 2)
    refused = [exc for _, exc in outcomes if exc is not None]
    assert len(refused) == 1 and "not waiting for an approval" in str(refused[0]), outcomes
    invite.refresh_from_db()
    assert invite.approved_by_id in (ben.pk, carla.pk)
    assert AuditLog.objects.filter(action="portal.invite_approve").count() == 1
