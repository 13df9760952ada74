"""JSON logs with a request id: every line of a request carries its request_id, and so does every
line of a Celery task that request queued, logged by a real worker."""

import io
import json
import logging
import re
import time

import pytest

from apps.payout.models import Payout
from config.logging import formatter
from tests.payout.conftest import fund, payout_params

CREATE = "/openapi/v1/payout/create"


@pytest.fixture
def json_lines():
    """The JSON lines of the apps' loggers (the worker thread's too), as parsed dicts."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(formatter(json=True))
    apps_logger = logging.getLogger("apps")
    apps_logger.addHandler(handler)

    def lines() -> list[dict]:
        return [json.loads(line) for line in buffer.getvalue().splitlines() if line.strip()]

    yield lines
    apps_logger.removeHandler(handler)


def create_payout(client, merchant, **headers):
    fund(merchant, 100_000_000)
    response = client.post(CREATE, data=json.dumps(merchant.signed_body(payout_params())),
                           content_type="application/json", headers=headers)
    assert response.status_code == 200 and response.json()["code"] == "0", response.content
    return response


@pytest.mark.django_db
def test_a_signed_request_logs_json_lines_sharing_its_incoming_request_id(client, merchant, json_lines):
    response = create_payout(client, merchant, X_Request_ID="edge-4f1c2a9b-0001")
    lines = [line for line in json_lines() if line["logger"].startswith("apps.payout")]
    assert lines and {line["request_id"] for line in lines} == {"edge-4f1c2a9b-0001"}
    assert response["X-Request-ID"] == "edge-4f1c2a9b-0001"  # echoed: the merchant can quote it
    assert all({"event", "level", "timestamp"} <= set(line) for line in lines)
    assert not any("payee_account" in line or "0012345678" in json.dumps(line) for line in lines)


@pytest.mark.django_db
@pytest.mark.parametrize("bad", ["short", "x" * 200, "a b c d e f g h", "id-with\"quote-1234"])
def test_a_malformed_request_id_is_replaced_by_a_generated_one(client, merchant, json_lines, bad):
    response = create_payout(client, merchant, X_Request_ID=bad)
    ids = {line["request_id"] for line in json_lines() if line["logger"].startswith("apps.payout")}
    (generated,) = ids
    assert re.fullmatch(r"[0-9a-f-]{36}", generated)
    assert response["X-Request-ID"] == generated


@pytest.mark.django_db
def test_error_answers_carry_the_request_id_too(client, merchant):
    bad_signature = client.post(CREATE, data=json.dumps({**merchant.signed_body(payout_params()), "amount": 1}),
                                content_type="application/json", headers={"X-Request-ID": "support-ticket-42"})
    assert bad_signature.json()["code"] == "1101" and bad_signature["X-Request-ID"] == "support-ticket-42"
    missing = client.get("/no-such-page", headers={"X-Request-ID": "support-ticket-43"})
    assert missing.status_code == 404 and missing["X-Request-ID"] == "support-ticket-43"


@pytest.mark.django_db
def test_without_a_header_each_request_gets_its_own_id(client, merchant, json_lines):
    create_payout(client, merchant)
    create_payout(client, merchant)
    ids = {line["request_id"] for line in json_lines() if line["logger"].startswith("apps.payout")}
    assert len(ids) == 2


@pytest.mark.django_db(transaction=True)
def test_the_payout_submission_queued_by_a_request_logs_its_request_id(client, merchant, json_lines,
                                                                       live_celery_worker):
    create_payout(client, merchant, X_Request_ID="edge-4f1c2a9b-0002")
    payout = Payout.objects.get()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        submitted = [line for line in json_lines() if "submitted" in line["event"]]
        if submitted:
            break
        time.sleep(0.1)
    (line,) = submitted
    assert payout.platform_order_no in line["event"]
    assert line["request_id"] == "edge-4f1c2a9b-0002" and line["task_id"]


def test_the_plain_format_carries_the_request_id_too():
    import structlog

    record = logging.LogRecord("apps.x", logging.INFO, __file__, 1, "hello %s", ("there",), None)
    with structlog.contextvars.bound_contextvars(request_id="edge-4f1c2a9b-0003"):
        text = formatter(json=False).format(record)
    assert "hello there" in text and "request_id=edge-4f1c2a9b-0003" in text
