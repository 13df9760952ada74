"""Payouts by hand (apps/payout_batches): a finance user asks, an owner who is not the maker approves, each row goes
through payout_create as an API call would; replays, per-row errors with the contract's codes, roles, races."""

from datetime import timedelta

import pytest

from apps.common.models import AuditLog
from apps.common.step_up import SecondFactorRefused
from apps.ledger.selectors import merchant_balances
from apps.payout_batches import services
from apps.payout_batches.models import PayoutBatch, PayoutBatchRow
from apps.payout_batches.services import BatchInvalid, BatchNotFound, BatchRefused
from apps.payout.models import Payout
from tests.helpers import at_once
from tests.payout.conftest import PHP_FEE, fund, new_payout

from tests.portal.team import device_of  # noqa: E402

pytestmark = pytest.mark.django_db

HEADER = "mch_order_no,amount,currency,payee_name,payee_account,bank_code\n"


def csv_of(*rows: str, header: str = HEADER) -> bytes:
    return (header + "".join(row + "\n" for row in rows)).encode()


GOOD = csv_of("hand-1,25000,PHP,Juan dela Cruz,0012345678,BDO",
              "hand-2,10000,PHP,Maria Santos,0098765432,GCASH",
              "hand-3,5000,PHP,Jose Rizal,1234567890,BPI")


@pytest.fixture
def funded(merchant):
    fund(merchant, 10_000_000)
    return merchant


def _upload(member, data=GOOD, name="payouts.csv"):
    return services.payout_batch_from_csv(actor=member, file_name=name, data=data)


def _approve(member, batch):
    services.payout_batch_approve(actor=member, batch_id=batch.pk, otp_code=member.code())
    return services.payout_batch_process(batch_id=batch.pk)


# --- asking -------------------------------------------------------------------------------------------------


def test_finance_uploads_a_csv_and_it_waits_for_the_owner_creating_nothing(funded, team):
    created = _upload(team["finance"])
    batch = created.batch
    assert not created.replayed and batch.status == "PENDING" and batch.row_count == 3
    assert [(r.line, r.mch_order_no, r.amount) for r in batch.rows.all()] == [
        (2, "hand-1", 25000), (3, "hand-2", 10000), (4, "hand-3", 5000)]
    assert Payout.objects.count() == 0
    row = AuditLog.objects.get(action="payout_batch.create")
    assert row.actor_id == team["finance"].user.pk and row.new["totals"] == {"PHP": 40000}


@pytest.mark.parametrize("role", ["developer", "viewer"])
def test_developers_and_viewers_cannot_ask_for_payouts(funded, team, role):
    with pytest.raises(BatchRefused, match="Only finance or owner"):
        _upload(team[role])
    with pytest.raises(BatchRefused):
        services.payout_batch_single(actor=team[role], values={"mch_order_no": "x"})
    assert PayoutBatch.objects.count() == 0


@pytest.mark.parametrize("row, code, words", [
    ("bad-1,12.50,PHP,Juan,0012345678,BDO", "1000", "amount: must be an integer of minor units"),
    ("bad-2,-5,PHP,Juan,0012345678,BDO", "1000", "amount"),
    ("bad 3,1000,PHP,Juan,0012345678,BDO", "1000", "mch_order_no"),
    ("bad-4,1000,PHP,Juan,0012-345678,BDO", "1000", "payee_account"),
    ("bad-5,1000,PHP,,0012345678,BDO", "1000", "payee_name"),
    ("bad-6,1000,EUR,Juan,0012345678,BDO", "1002", "product_code"),  # no payout product in EUR (none named)
    ("bad-7,1000,PHP,Juan,0012345678,NOPE", "2006", "bank_code NOPE"),
    ("bad-8,1,PHP,Juan,0012345678,BDO", "1003", "amount must be between"),
    ("bad-9,99999999999,PHP,Juan,0012345678,BDO", "1003", "amount must be between"),
])
def test_a_row_with_an_error_is_shown_with_the_contracts_code_and_nothing_is_stored(funded, team, row, code, words):
    with pytest.raises(BatchInvalid) as caught:
        _upload(team["finance"], csv_of("ok-1,1000,PHP,Juan,0012345678,BDO", row))
    first, second = caught.value.rows
    assert first.ok and (second.code, second.line) == (code, 3), second
    assert words in second.msg
    assert PayoutBatch.objects.count() == 0 and PayoutBatchRow.objects.count() == 0


def test_currency_not_enabled_is_1001_when_the_product_is_named(funded, team):
    header = HEADER.replace("\n", ",product_code\n")
    with pytest.raises(BatchInvalid) as caught:
        _upload(team["finance"], csv_of("c-1,1000,EUR,Juan,0012345678,BDO,PHP_PAYOUT", header=header))
    assert caught.value.rows[0].code == "1001"


def test_an_order_number_twice_in_the_file_or_used_with_other_parameters_is_2001(funded, team):
    new_payout(funded, mch_order_no="api-1", amount=7000)
    with pytest.raises(BatchInvalid) as caught:
        _upload(team["finance"], csv_of("d-1,1000,PHP,Juan,0012345678,BDO", "d-1,2000,PHP,Juan,0012345678,BDO",
                                        "api-1,9999,PHP,Juan dela Cruz,0012345678,BDO"))
    rows = caught.value.rows
    assert [r.code for r in rows] == ["", "2001", "2001"]
    assert "line 2 too" in rows[1].msg and "different amount" in rows[2].msg


@pytest.mark.parametrize("data, words", [
    (b"", "empty"),
    ("mch_order_no,amount\nx,1\n".encode(), "missing currency"),
    (HEADER.replace("\n", ",colour\n").encode() + b"a,1,PHP,J,1,BDO,red\n", "unknown colour"),
    (HEADER.encode(), "no payouts"),
    ("mch_order_no,amount,currency,payee_name,payee_account,bank_code\n".encode("utf-16"), "UTF-8"),
    (csv_of("a,1,PHP"), "Line 2 has 3 values"),
    (csv_of(*[f"n-{i},1000,PHP,J,1,BDO" for i in range(501)]), "At most 500"),
])
def test_a_file_that_is_not_a_payout_csv_is_refused_as_a_whole(funded, team, data, words):
    with pytest.raises(BatchInvalid) as caught:
        _upload(team["finance"], data)
    assert words in caught.value.problem
    assert PayoutBatch.objects.count() == 0


def test_a_bom_and_blank_lines_are_fine(funded, team):
    batch = _upload(team["finance"], b"\xef\xbb\xbf" + GOOD + b"\n\n").batch
    assert batch.row_count == 3


def test_the_same_file_uploaded_twice_is_the_same_batch(funded, team):
    first = _upload(team["finance"])
    again = _upload(team["owner"], name="renamed.csv")
    assert again.replayed and again.batch.pk == first.batch.pk
    assert PayoutBatch.objects.count() == 1


def test_another_file_with_an_order_number_of_a_live_batch_is_2001(funded, team):
    first = _upload(team["finance"]).batch
    with pytest.raises(BatchInvalid) as caught:
        _upload(team["finance"], csv_of("new-1,1000,PHP,Juan,0012345678,BDO", "hand-2,10000,PHP,Maria,1,GCASH"))
    assert caught.value.rows[1].code == "2001" and f"batch #{first.pk}" in caught.value.rows[1].msg


def test_one_payout_by_hand_is_a_batch_of_one_and_a_double_submit_is_the_same_batch(funded, team):
    values = {"mch_order_no": "single-1", "amount": "25000", "currency": "PHP", "payee_name": "Juan dela Cruz",
              "payee_account": "0012345678", "bank_code": "BDO", "product_code": "PHP_PAYOUT", "attach": ""}
    first = services.payout_batch_single(actor=team["finance"], values=values)
    again = services.payout_batch_single(actor=team["finance"], values=values)
    assert (first.batch.source, first.batch.row_count, again.replayed, again.batch.pk) == (
        "form", 1, True, first.batch.pk)
    with pytest.raises(BatchInvalid) as caught:  # the same number with another amount is not a replay
        services.payout_batch_single(actor=team["finance"], values={**values, "amount": "26000"})
    assert caught.value.rows[0].code == "2001"


# --- deciding -------------------------------------------------------------------------------------------------


def test_the_owner_approves_and_each_row_becomes_a_payout_exactly_as_the_api_makes_it(funded, team):
    batch = _upload(team["finance"]).batch
    before = merchant_balances(merchant_id=funded.merchant.pk, currency="PHP")["available"]
    batch = _approve(team["owner"], batch)
    assert batch.status == "DONE" and batch.decided_by_id == team["owner"].user.pk
    rows = list(batch.rows.select_related("payout"))
    assert [r.status for r in rows] == ["CREATED"] * 3 and not any(r.replayed for r in rows)
    payout = rows[0].payout
    assert (payout.mch_order_no, payout.amount, payout.fee, payout.bank_code, payout.status) == (
        "hand-1", 25000, PHP_FEE, "BDO", "APPROVED")
    after = merchant_balances(merchant_id=funded.merchant.pk, currency="PHP")["available"]
    assert before - after == 40000 + 3 * PHP_FEE
    actions = list(AuditLog.objects.filter(object_id=str(batch.pk), object_type="merchant_payouts.payoutbatch")
                   .order_by("id").values_list("action", "actor_label"))
    assert actions == [("payout_batch.create", team["finance"].user.username),
                       ("payout_batch.approve", team["owner"].user.username), ("payout_batch.done", "system")]


def test_processing_again_creates_nothing_again(funded, team):
    batch = _approve(team["owner"], _upload(team["finance"]).batch)
    PayoutBatch.objects.filter(pk=batch.pk).update(status="APPROVED")
    PayoutBatchRow.objects.filter(batch=batch).update(status="PENDING")  # as if the processor died before recording
    services.payout_batch_process(batch_id=batch.pk)
    assert Payout.objects.count() == 3
    assert set(PayoutBatchRow.objects.values_list("status", "replayed")) == {("CREATED", False)}


def test_a_row_the_balance_cannot_pay_fails_with_2003_and_the_others_are_created(merchant, team):
    fund(merchant, 25000 + PHP_FEE + 10000 + PHP_FEE)
    batch = _approve(team["owner"], _upload(team["finance"]).batch)
    assert batch.status == "DONE"
    assert [(r.status, r.error_code) for r in batch.rows.all()] == [("CREATED", ""), ("CREATED", ""),
                                                                     ("FAILED", "2003")]
    assert Payout.objects.count() == 2


def test_a_row_whose_payout_exists_with_the_same_parameters_is_a_replay(funded, team):
    new_payout(funded, mch_order_no="hand-2", amount=10000, payee_name="Maria Santos", payee_account="0098765432",
               bank_code="GCASH")
    batch = _upload(team["finance"]).batch
    checks = services.rows_check(merchant=funded.merchant, rows=[(1, {"mch_order_no": "hand-2", "amount": "10000",
                                 "currency": "PHP", "payee_name": "Maria Santos", "payee_account": "0098765432",
                                 "bank_code": "GCASH"})], batch=batch)
    assert checks[0].ok and "will not be created again" in checks[0].note
    batch = _approve(team["owner"], batch)
    assert Payout.objects.count() == 3
    assert [r.replayed for r in batch.rows.all()] == [False, True, False]


@pytest.mark.parametrize("role", ["finance", "developer", "viewer"])
def test_only_an_owner_approves_or_rejects(funded, team, role):
    batch = _upload(team["finance"] if role != "finance" else team["owner"]).batch
    with pytest.raises(BatchRefused, match="Only owner"):
        services.payout_batch_approve(actor=team[role], batch_id=batch.pk, otp_code=team[role].code())
    with pytest.raises(BatchRefused, match="Only owner"):
        services.payout_batch_reject(actor=team[role], batch_id=batch.pk, reason="no")
    assert PayoutBatch.objects.get(pk=batch.pk).status == "PENDING"


def test_an_owner_never_approves_their_own_batch(funded, team):
    batch = _upload(team["owner"]).batch
    with pytest.raises(BatchRefused, match="maker-checker"):
        services.payout_batch_approve(actor=team["owner"], batch_id=batch.pk, otp_code=team["owner"].code())
    assert device_of(team["owner"]).last_t == -1  # refused before the code was spent
    # The database says so too, whatever path writes.
    from django.db import IntegrityError, transaction
    with pytest.raises(IntegrityError), transaction.atomic():
        PayoutBatch.objects.filter(pk=batch.pk).update(status="APPROVED", decided_by=team["owner"].user)
    assert _approve(team["owner2"], batch).status == "DONE"  # another owner may


def test_approval_needs_a_fresh_code(funded, team):
    batch = _upload(team["finance"]).batch
    with pytest.raises(SecondFactorRefused):
        services.payout_batch_approve(actor=team["owner"], batch_id=batch.pk, otp_code="000000")
    assert PayoutBatch.objects.get(pk=batch.pk).status == "PENDING" and Payout.objects.count() == 0


def test_another_merchants_owner_finds_no_batch(funded, team, other_team):
    batch = _upload(team["finance"]).batch
    with pytest.raises(BatchNotFound):
        services.payout_batch_approve(actor=other_team["owner"], batch_id=batch.pk,
                                      otp_code=other_team["owner"].code())
    with pytest.raises(BatchNotFound):
        services.payout_batch_reject(actor=other_team["owner"], batch_id=batch.pk, reason="mine now")
    assert PayoutBatch.objects.get(pk=batch.pk).status == "PENDING"


def test_rejection_creates_nothing_frees_the_numbers_and_the_file(funded, team):
    batch = _upload(team["finance"]).batch
    with pytest.raises(BatchRefused, match="Say why"):
        services.payout_batch_reject(actor=team["owner"], batch_id=batch.pk, reason=" ")
    services.payout_batch_reject(actor=team["owner"], batch_id=batch.pk, reason="wrong payees")
    batch.refresh_from_db()
    assert (batch.status, batch.decision_reason) == ("REJECTED", "wrong payees")
    with pytest.raises(BatchRefused, match="rejected already"):
        services.payout_batch_approve(actor=team["owner"], batch_id=batch.pk, otp_code=team["owner"].code())
    assert services.payout_batch_process(batch_id=batch.pk).status == "REJECTED" and Payout.objects.count() == 0
    again = _upload(team["finance"])  # the same file after a rejection is a new request
    assert not again.replayed and again.batch.pk != batch.pk
    assert AuditLog.objects.get(action="payout_batch.reject").reason == "wrong payees"


def test_an_approved_batch_cannot_be_rejected_or_approved_again(funded, team):
    batch = _approve(team["owner"], _upload(team["finance"]).batch)
    with pytest.raises(BatchRefused, match="done already"):
        services.payout_batch_reject(actor=team["owner2"], batch_id=batch.pk, reason="late")
    with pytest.raises(BatchRefused, match="done already"):
        services.payout_batch_approve(actor=team["owner2"], batch_id=batch.pk, otp_code=team["owner2"].code())


# --- races --------------------------------------------------------------------------------------------------


def _funded_team(bootstrapped, rsa_keys):
    from tests.conftest import make_merchant
    from tests.portal.team import member

    ctx = make_merchant(rsa_keys[0])
    fund(ctx, 10_000_000)
    m = ctx.merchant
    return ctx, {"finance": member(m, "finance"), "owner": member(m, "owner"),
                 "owner2": member(m, "owner", "owner-two")}


@pytest.mark.django_db(transaction=True)
def test_two_owners_approving_at_once_create_each_payout_once(bootstrapped, rsa_keys):
    ctx, people = _funded_team(bootstrapped, rsa_keys)
    batch = _upload(people["finance"]).batch
    owners = [people["owner"], people["owner2"]]
    codes = [owner.code() for owner in owners]

    def approve_and_process(i):
        services.payout_batch_approve(actor=owners[i], batch_id=batch.pk, otp_code=codes[i])
        return services.payout_batch_process(batch_id=batch.pk)

    outcomes = at_once(approve_and_process, 2)
    refused = [exc for _, exc in outcomes if exc is not None]
    assert len(refused) == 1 and "approved" in str(refused[0]), outcomes
    services.payout_batch_process(batch_id=batch.pk)
    assert Payout.objects.filter(merchant=ctx.merchant).count() == 3
    assert AuditLog.objects.filter(action="payout_batch.approve").count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_same_owner_double_clicking_approve_approves_once(bootstrapped, rsa_keys):
    ctx, people = _funded_team(bootstrapped, rsa_keys)
    batch = _upload(people["finance"]).batch
    code = people["owner"].code()
    outcomes = at_once(lambda i: services.payout_batch_approve(actor=people["owner"], batch_id=batch.pk,
                                                               otp_code=code), 2)
    assert sum(exc is None for _, exc in outcomes) == 1, outcomes
    assert AuditLog.objects.filter(action="payout_batch.approve").count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_processors_at_once_create_each_payout_once(bootstrapped, rsa_keys):
    ctx, people = _funded_team(bootstrapped, rsa_keys)
    rows = [f"race-{i},{1000 + i},PHP,Juan,00123456{i:02d},BDO" for i in range(12)]
    batch = _upload(people["finance"], csv_of(*rows)).batch
    services.payout_batch_approve(actor=people["owner"], batch_id=batch.pk, otp_code=people["owner"].code())
    outcomes = at_once(lambda i: services.payout_batch_process(batch_id=batch.pk), 3)
    assert all(exc is None for _, exc in outcomes), outcomes
    assert Payout.objects.filter(merchant=ctx.merchant).count() == 12
    batch.refresh_from_db()
    assert batch.status == "DONE"
    assert set(batch.rows.values_list("status", flat=True)) == {"CREATED"}
    assert len({r.payout_id for r in batch.rows.all()}) == 12


@pytest.mark.django_db(transaction=True)
def test_two_uploads_of_the_same_file_at_once_make_one_batch(bootstrapped, rsa_keys):
    ctx, people = _funded_team(bootstrapped, rsa_keys)
    outcomes = at_once(lambda i: _upload(people["finance"]), 2)
    assert all(exc is None for _, exc in outcomes), outcomes
    assert PayoutBatch.objects.count() == 1
    assert sorted(result.replayed for result, _ in outcomes) == [False, True]


def test_the_sweep_resumes_an_approved_batch_left_idle(funded, team):
    batch = _upload(team["finance"]).batch
    services.payout_batch_approve(actor=team["owner"], batch_id=batch.pk, otp_code=team["owner"].code())
    from django.utils import timezone
    PayoutBatch.objects.filter(pk=batch.pk).update(progress_at=timezone.now() - timedelta(minutes=5))
    assert services.payout_batches_resume() == [batch.pk]
    assert PayoutBatch.objects.get(pk=batch.pk).status == "DONE" and Payout.objects.count() == 3


def test_a_disabled_merchant_sends_no_payouts_by_hand(funded, team):
    """payout_create does not look at is_active (the API's authentication answers 1105): the batch services do."""
    batch = _upload(team["finance"]).batch
    type(funded.merchant).objects.filter(pk=funded.merchant.pk).update(is_active=False)
    with pytest.raises(BatchRefused, match="disabled"):
        _upload(team["finance"], csv_of("x-1,1000,PHP,Juan,0012345678,BDO"))
    with pytest.raises(BatchRefused, match="disabled"):
        services.payout_batch_approve(actor=team["owner"], batch_id=batch.pk, otp_code=team["owner"].code())
    services.payout_batch_reject(actor=team["owner"], batch_id=batch.pk, reason="account closed")  # moves nothing


def test_rows_not_created_yet_when_the_merchant_is_disabled_fail_with_1105(funded, team):
    batch = _upload(team["finance"]).batch
    services.payout_batch_approve(actor=team["owner"], batch_id=batch.pk, otp_code=team["owner"].code())
    type(funded.merchant).objects.filter(pk=funded.merchant.pk).update(is_active=False)
    batch = services.payout_batch_process(batch_id=batch.pk)
    assert batch.status == "DONE" and Payout.objects.count() == 0
    assert set(batch.rows.values_list("status", "error_code")) == {("FAILED", "1105")}
