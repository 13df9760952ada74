"""The hosted Pay on a kept connection: its transaction is the request's health check (no `SELECT 1` before it), and a
connection that died between requests is still replaced (docs/performance.md, "Measured changes"; docs/faults.md)."""

import pytest
from bs4 import BeautifulSoup
from django.db import OperationalError, connection
from django.test import Client

from apps.collection.models import CollectionOrder
from apps.common.connection_check import first_transaction_checks_connection
from apps.ledger.models import Posting
from tests.collection.conftest import create_ok
from tests.support.connections import kill_backend, request_starts

pytestmark = pytest.mark.django_db(transaction=True)  # autocommit, as served: the Pay's transaction is its own


def _pay(browser_client: Client, order: CollectionOrder):
    path = f"/pay/{order.pay_token}"
    page = BeautifulSoup(browser_client.get(path).content, "html.parser")
    token = page.find("input", {"name": "csrfmiddlewaretoken"})["value"]
    request_starts()  # the Pay is a request of its own
    return browser_client.post(path, {"csrfmiddlewaretoken": token, "action": "pay"})


def _paid(response, order: CollectionOrder) -> None:
    assert (response.status_code, response["Location"]) == (302, f"/pay/{order.pay_token}")
    order.refresh_from_db()
    assert order.status == CollectionOrder.Status.SUCCESS
    assert Posting.objects.filter(kind="collection.success", cause=order.platform_order_no).count() == 1


def test_the_pay_is_the_health_check_of_a_kept_connection(client, merchant, persistent_connection, monkeypatch):
    browser = Client(enforce_csrf_checks=True)
    first = create_ok(client, merchant)
    _paid(_pay(browser, first), first)
    order = create_ok(client, merchant)
    page = BeautifulSoup(browser.get(f"/pay/{order.pay_token}").content, "html.parser")
    token = page.find("input", {"name": "csrfmiddlewaretoken"})["value"]
    checks = []
    monkeypatch.setattr(connection, "is_usable", lambda: checks.append(1) or True)
    request_starts()
    assert connection.connection is not None and not connection.health_check_done
    response = browser.post(f"/pay/{order.pay_token}", {"csrfmiddlewaretoken": token, "action": "pay"})
    assert checks == []  # no `SELECT 1`: the Pay's own transaction stood for it
    assert connection.health_check_done
    _paid(response, order)


def test_a_pay_on_a_connection_killed_between_requests_is_paid_on_a_new_one(client, merchant, persistent_connection):
    browser = Client(enforce_csrf_checks=True)
    order = create_ok(client, merchant, amount=5000)
    path = f"/pay/{order.pay_token}"
    token = BeautifulSoup(browser.get(path).content, "html.parser").find(
        "input", {"name": "csrfmiddlewaretoken"})["value"]
    dead_pid = kill_backend()
    request_starts()
    response = browser.post(path, {"csrfmiddlewaretoken": token, "action": "pay"})
    assert connection.connection.info.backend_pid != dead_pid
    _paid(response, order)


def test_an_error_on_a_connection_that_still_answers_is_raised_not_run_again(persistent_connection):
    CollectionOrder.objects.exists()  # a kept connection
    request_starts()
    calls = []

    @first_transaction_checks_connection
    def service():
        calls.append(1)
        raise OperationalError("canceling statement due to statement timeout")

    with pytest.raises(OperationalError):
        service()
    assert calls == [1]
