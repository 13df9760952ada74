"""The OpenAPI schema at /openapi/v1/schema/ describes the signed endpoints and the error envelope."""

import pytest
from django.core.management import call_command


@pytest.fixture
def schema(client, db) -> dict:
    response = client.get("/openapi/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def test_schema_describes_balance_with_the_signed_fields(schema):
    operation = schema["paths"]["/openapi/v1/balance"]["post"]
    request_ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    request = schema["components"]["schemas"][request_ref.rsplit("/", 1)[1]]
    assert {"merchant_no", "app_id", "key_version", "timestamp", "nonce", "sign_type", "sign", "currency"} <= set(
        request["properties"])
    assert {"merchant_no", "app_id", "key_version", "timestamp", "nonce", "sign_type", "sign"} <= set(
        request["required"])
    assert request["properties"]["key_version"]["type"] == "integer"
    assert request["properties"]["timestamp"]["type"] == "integer"
    assert request["properties"]["nonce"]["pattern"] == "^[A-Za-z0-9_-]{8,64}$"
    assert "RSA2" in operation["description"]


def test_schema_describes_the_balance_envelope_and_the_error_envelope(schema):
    responses = schema["paths"]["/openapi/v1/balance"]["post"]["responses"]
    ok = schema["components"]["schemas"][responses["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]]
    assert set(ok["properties"]) == {"code", "msg", "data"}
    data = schema["components"]["schemas"][ok["properties"]["data"]["$ref"].rsplit("/", 1)[1]]
    assert set(data["properties"]) == {"currency", "available", "settling"}
    for status in ("400", "401", "403", "404", "405", "422", "429", "500"):
        assert responses[status]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorEnvelope")
    assert "1101" in responses["401"]["description"] and "1106" in responses["429"]["description"]
    error = schema["components"]["schemas"]["ErrorEnvelope"]
    assert set(error["properties"]) == {"code", "msg", "data"} and error["properties"]["data"]["nullable"] is True


def test_schema_lists_the_public_currencies_endpoint(schema):
    assert "get" in schema["paths"]["/currencies"]


def test_schema_generation_has_no_warnings(db, tmp_path):
    # --fail-on-warn turns any drf-spectacular warning (unresolvable auth, duplicate component names) into an error.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert (tmp_path / "schema.yaml").read_text().startswith("openapi: 3.0.3")


def _request_component(schema: dict, path: str) -> dict:
    ref = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return schema["components"]["schemas"][ref.rsplit("/", 1)[1]]


def test_schema_describes_the_callback_events_endpoints(schema):
    listing = _request_component(schema, "/openapi/v1/callbacks/list")
    assert {"platform_order_no", "type", "status", "created_from", "created_to", "limit", "cursor"} <= set(
        listing["properties"])
    assert listing["properties"]["limit"]["minimum"] == 1 and listing["properties"]["limit"]["maximum"] == 100
    enum = {name: schema["components"]["schemas"][listing["properties"][name]["$ref"].rsplit("/", 1)[1]]["enum"]
            for name in ("type", "status")}
    assert enum == {"type": ["collection.success", "payout.terminal", "payout.reversed", "refund.terminal"],
                    "status": ["pending", "delivered", "dead"]}
    resend = _request_component(schema, "/openapi/v1/callbacks/resend")
    assert {"event_id", "platform_order_no", "type"} <= set(resend["properties"])
    assert not {"event_id", "platform_order_no", "type"} & set(resend.get("required", []))
    responses = schema["paths"]["/openapi/v1/callbacks/resend"]["post"]["responses"]
    assert "2001" in responses["409"]["description"] and "2002" in responses["404"]["description"]
