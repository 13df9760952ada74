"""A payout that needs two approvals, decided by two reviewers in a real browser at 1280 px: the second reviewer's
confirmation says theirs is the second, and the decided page opens on a notice naming both approvers and when.
The queue's title and count line say what it lists. Screenshots `review-decided-*`, `review-queue-titled-1280`."""

import pytest

from apps.payout.models import Payout
from tests.helpers import screenshot
from tests.payout.conftest import staff_user
from tests.payout.test_review_browser import (QUEUE, browser, log_in, module_browser, new_page,  # noqa: F401
                                              queue_of_payouts, shop)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_second_approver_is_told_theirs_is_the_second_and_the_page_then_names_both(browser, live_server, shop):
    _, big, _ = queue_of_payouts(shop)
    assert big.approvals_required == 2
    staff_user("rita", "Risk reviewer")
    staff_user("rolf", "Risk reviewer")
    decide = f"/admin/payout/payoutreviewqueue/{big.pk}/decide/"

    rita = new_page(browser, 1280)
    log_in(rita, live_server, "rita", QUEUE)
    assert rita.inner_text("#content h1") == "Payouts waiting for a decision"
    assert rita.inner_text("#queue-count").startswith("3 payouts waiting for a decision")
    screenshot(rita, "review-queue-titled-1280")
    rita.goto(f"{live_server.url}{decide}")
    rita.on("dialog", lambda dialog: dialog.accept())
    rita.fill("textarea[name=reason]", "invoice 2211 matches")
    rita.click("#approve-button")
    rita.wait_for_selector("#decide-decided")
    assert "waits for a second reviewer" in rita.inner_text("#decide-decided")

    rolf = new_page(browser, 1280)
    log_in(rolf, live_server, "rolf", decide)
    assert "Approved by rita" in rolf.inner_text("#decide-decided")
    screenshot(rolf, "review-decided-one-of-two-1280")
    said = []

    def accept(dialog):
        said.append(dialog.message)
        dialog.accept()

    rolf.on("dialog", accept)
    rolf.fill("textarea[name=reason]", "called the payee")
    rolf.click("#approve-button")
    rolf.wait_for_selector("ul.messagelist")
    assert said and "second of two approvals" in said[0] and "counts as one" not in said[0]
    assert Payout.objects.get(pk=big.pk).status != "FROZEN"

    notice = rolf.inner_text("#decide-decided")
    assert notice.startswith("Approved by rita (") and " and rolf (" in notice and "UTC" in notice
    assert rolf.inner_text("#decide-reviewed-by") == "rita and rolf"
    box = rolf.locator("#decide-decided").bounding_box()
    assert box["y"] < 300  # at the top of the page, seen without scrolling
    screenshot(rolf, "review-decided-approved-1280")
