"""One log line per request: the access log names every request and its status, so Django's own "Not Found: /x"
(django.request, 4xx) is not logged as a second line; a 500 is logged once, with its traceback."""

import logging

import pytest

from tests.helpers import post_json, signed_post

pytestmark = pytest.mark.django_db


def request_records(caplog) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name.startswith(("django.request", "apps.", "config."))]


@pytest.mark.parametrize("path", ["/no-such-page", "/openapi/v1/no-such", "/currencies/x", "/admin/no-such/"])
def test_a_404_adds_no_log_line_to_the_access_log(client, caplog, path):
    with caplog.at_level(logging.DEBUG, logger="root"):
        assert client.get(path).status_code in (404, 302)
    assert request_records(caplog) == []


def test_a_refused_signed_request_adds_no_log_line(client, merchant, caplog):
    request = merchant.signed_body({"currency": "PHP"})
    request["currency"] = "USD"  # changed after signing
    status, body = post_json(client, "/openapi/v1/balance", request)
    assert (status, body["code"]) == (401, "1101")
    assert request_records(caplog) == []


def test_an_internal_error_is_logged_once_with_its_traceback(client, merchant, caplog, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("apps.ledger.api.views.merchant_balances", broken)
    status, body = signed_post(client, merchant, "/openapi/v1/balance", {"currency": "PHP"})
    assert (status, body["code"]) == (500, "9999")
    (record,) = request_records(caplog)
    assert record.levelno == logging.ERROR and record.exc_info and "boom" in str(record.exc_info[1])


def test_an_internal_error_on_an_html_page_is_logged_once(client, caplog, monkeypatch):
    def broken(request):
        raise RuntimeError("boom")

    monkeypatch.setattr("config.views.render", lambda *args, **kwargs: broken(None))
    client.raise_request_exception = False
    assert client.get("/").status_code == 500
    (record,) = request_records(caplog)
    assert record.name == "django.request" and record.exc_info
