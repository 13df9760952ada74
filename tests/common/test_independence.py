"""The one independence rule (apps.common.independence): control is transitive and shared control counts."""

import pytest
from django.contrib.auth.models import User

from apps.common.independence import account_act_record, independence_conflict
from apps.common.models import AccountAct

pytestmark = pytest.mark.django_db


def people(*names):
    return [User.objects.create_user(username=name, password="x" * 12) for name in names]


def test_accounts_nobody_acted_on_are_independent():
    alice, bob = people("alice", "bob")
    assert independence_conflict(alice, bob) == ""


def test_an_account_is_never_independent_of_itself():
    (alice,) = people("alice")
    assert "same account" in independence_conflict(alice, alice)


def test_a_chain_of_acts_makes_the_end_depend_on_the_start_both_ways():
    root, a, b = people("root", "a", "b")
    account_act_record(actor=root, subject=a, act=AccountAct.Act.CREATED)
    account_act_record(actor=a, subject=b, act=AccountAct.Act.PASSWORD_SET)
    assert "root created the account a, a set the password of b" in independence_conflict(root, b)
    assert independence_conflict(b, root)


def test_two_accounts_one_person_made_are_not_two_people():
    root, a, b = people("root", "a", "b")
    account_act_record(actor=root, subject=a, act=AccountAct.Act.INVITED)
    account_act_record(actor=root, subject=b, act=AccountAct.Act.SECOND_FACTOR_REMOVED)
    conflict = independence_conflict(a, b)
    assert "root invited a" in conflict and "root removed the second factor of b" in conflict


def test_two_people_who_both_acted_on_a_third_stay_independent_of_each_other():
    asker, approver, recovered = people("asker", "approver", "recovered")
    account_act_record(actor=asker, subject=recovered, act=AccountAct.Act.ACCESS_RESET)
    account_act_record(actor=approver, subject=recovered, act=AccountAct.Act.ACCESS_RESET)
    assert independence_conflict(asker, approver) == ""
    assert independence_conflict(asker, recovered) and independence_conflict(approver, recovered)


def test_acts_of_a_shell_or_on_oneself_are_not_recorded():
    (alice,) = people("alice")
    assert account_act_record(actor=None, subject=alice, act=AccountAct.Act.CREATED) is None
    assert account_act_record(actor=alice, subject=alice, act=AccountAct.Act.PASSWORD_SET) is None
    assert not AccountAct.objects.exists()


def test_a_password_reset_in_the_users_trail_counts_without_an_explicit_act():
    import pghistory

    resetter, colleague, requester = people("resetter", "colleague", "requester")
    colleague.set_password("y" * 12)
    with pghistory.context(user=resetter.pk, username="resetter"):
        colleague.save()
    assert "resetter set the password of colleague" in independence_conflict(resetter, colleague)
    assert independence_conflict(requester, colleague) == ""
