"""{api_root}/healthz: database, broker, last sweeper run; 503 names the failing part."""

import pytest

from apps.callbacks.sweep import callbacks_sweep


def test_healthz_is_200_with_database_and_broker_and_reports_the_sweeper(client, db, clock):
    body = client.get("/healthz").json()
    assert body["last_sweeper_run"] is None and body["sweeper_stale"] is True
    callbacks_sweep()
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200
    assert (body["status"], body["database"], body["broker"], body["failing"]) == ("ok", "ok", "ok", [])
    assert body["last_sweeper_run"] == clock.now.isoformat() and body["sweeper_stale"] is False
    clock.advance(120)
    body = client.get("/healthz").json()
    assert body["sweeper_age_seconds"] == 120 and body["sweeper_stale"] is True


@pytest.fixture
def broker_on_a_closed_port(monkeypatch):
    """The celery app's broker URL pointed at a port nothing listens on."""
    from config.celery import app
    from tests.callbacks.conftest import closed_port_url

    url = closed_port_url().replace("http://", "redis://").removesuffix("/callback") + "/0"
    connection_for_write = app.connection_for_write
    monkeypatch.setattr(app, "connection_for_write", lambda url_=None, **kw: connection_for_write(url=url, **kw))
    return url


def test_healthz_is_503_naming_the_broker_when_it_does_not_answer(client, db, broker_on_a_closed_port):
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 503
    assert body["status"] == "unavailable" and body["failing"] == ["broker"]
    assert body["broker"] != "ok" and body["database"] == "ok"


def test_healthz_is_503_naming_the_database_when_it_does_not_answer(client, db, monkeypatch):
    from django.db import OperationalError

    from config import views

    def cursor():
        raise OperationalError("connection refused")

    with monkeypatch.context() as patched:
        patched.setattr(views.connection, "cursor", cursor)
        response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["failing"] == ["database"] and response.json()["last_sweeper_run"] is None
