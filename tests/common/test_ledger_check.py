"""The suite's after-test ledger check (tests/conftest.py): only a test's own `ledger_tampered` marker excuses it
from the invariants, and then the ledger must really be broken."""

from types import SimpleNamespace

import pytest
from django.db import transaction
from django.db.models import F

from apps.ledger.models import AccountKind, LedgerAccount
from apps.ledger.services import balance_adjust
from tests.conftest import ledger_check, ledger_tampered

# On purpose: a module's marker must not excuse the tests below (they leave the ledger intact and pass the check).
pytestmark = pytest.mark.ledger_tampered

MARKED = SimpleNamespace(own_markers=[pytest.mark.ledger_tampered.mark])
UNMARKED = SimpleNamespace(own_markers=[])


def test_a_module_level_marker_does_not_count(request):
    assert request.node.get_closest_marker("ledger_tampered") is not None  # what the check used to go by
    assert not ledger_tampered(request.node)


class TestUnderAMarkedClass:
    pytestmark = [pytest.mark.ledger_tampered]

    def test_a_class_marker_does_not_count(self, request):
        assert not ledger_tampered(request.node)


@pytest.mark.ledger_tampered
def test_the_test_functions_own_marker_counts(request):  # no database: the check does not run here
    assert ledger_tampered(request.node)


@pytest.mark.django_db
def test_a_test_marked_tampered_that_leaves_the_ledger_intact_fails_the_check(merchant):
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=1000, reason="test credit")
    ledger_check(UNMARKED)
    with pytest.raises(AssertionError, match="every ledger invariant still holds"):
        ledger_check(MARKED)


@pytest.mark.django_db
def test_a_broken_ledger_fails_the_check_unless_the_test_is_marked(merchant):
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=1000, reason="test credit")
    with transaction.atomic():
        LedgerAccount.objects.filter(merchant=merchant.merchant, currency="PHP", kind=AccountKind.AVAILABLE).update(
            balance=F("balance") + 1)
        with pytest.raises(AssertionError, match="cached_balance_equals_entries"):
            ledger_check(UNMARKED)
        ledger_check(MARKED)
        transaction.set_rollback(True)  # the ledger is whole again for this test's own after-check
