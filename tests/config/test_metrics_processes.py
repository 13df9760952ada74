"""/metrics across processes (docs/runbook.md, "Metrics and alerts"): with PROMETHEUS_MULTIPROC_DIR, as `make run` sets it,
the web answers with every process's counters: both gunicorn workers' request counts and the Celery worker's
callback attempts, whichever gunicorn worker answers the scrape."""

import pytest
import requests

from tests.conftest import make_merchant
from tests.helpers import value
from tests.faults.conftest import endpoints, pay_create_ok, pay_through_page, private_redis, procs  # noqa: F401
from tests.faults.processes import Platform
from tests.support.wait import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_web_shows_the_workers_callback_attempts_and_every_gunicorn_workers_requests(
        procs, private_redis, endpoints, bootstrapped, rsa_keys, tmp_path):  # noqa: F811
    merchant = make_merchant(rsa_keys[0], collection_callback_url=endpoints.behave("/metrics-paid"))
    (tmp_path / "prometheus").mkdir()
    platform = Platform(procs, private_redis, PROMETHEUS_MULTIPROC_DIR=tmp_path / "prometheus")
    platform.start_web(workers=2)
    platform.start_worker()

    for number in range(4):  # spread over both gunicorn workers
        pay_through_page(pay_create_ok(platform.base, merchant, f"mp-{number}")["pay_url"])
    wait_until(lambda: len(endpoints.hits_for("/metrics-paid")) == 4, timeout=30, what="four callbacks")

    def scrape() -> str:
        response = requests.get(f"{platform.base}/metrics", timeout=5)
        assert response.status_code == 200
        return response.text

    def delivered_everywhere() -> bool:  # the worker counts after it replied to nobody: poll a little
        return all(value(scrape(), "payments_callback_attempts_total", outcome="delivered") == 4 for _ in range(4))

    wait_until(delivered_everywhere, timeout=10, what="the worker's attempts in every scrape")
    for _ in range(4):
        text = scrape()
        assert value(text, "payments_http_request_duration_seconds_count", route="openapi/v1/pay/create",
                     method="POST", status="200") == 4
        assert value(text, "payments_callback_delivery_seconds_count") == 4
