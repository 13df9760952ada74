"""The landing page `/` and the API docs page /openapi/v1/docs/ (Redoc from drf-spectacular-sidecar): what they
show, that the docs page loads nothing from another host (in a real browser), and the error pages around them."""

import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from apps.common import signing
from apps.common.api.schema import EXAMPLE_BALANCE_BUSINESS, EXAMPLE_BALANCE_SIGNATURE, EXAMPLE_COMMON_FIELDS
from apps.common.errors import ErrorCode
from tests.helpers import screenshot
from tests.support.browser import CHROMIUM, chromium

DESKTOP = {"width": 1280, "height": 900}
VECTORS = Path(__file__).parent / "vectors"
ENDPOINTS = ["/openapi/v1/balance", "/openapi/v1/statement", "/openapi/v1/pay/create", "/openapi/v1/pay/query",
             "/openapi/v1/payout/create", "/openapi/v1/payout/query", "/openapi/v1/callbacks/list",
             "/openapi/v1/callbacks/resend", "/openapi/v1/refund/create", "/openapi/v1/refund/query", "/currencies"]
HOME_LINKS = ["/openapi/v1/docs/", "/openapi/v1/schema/", "/currencies", "/portal/", "/admin/", "/healthz"]


# --- without a browser ---------------------------------------------------------------------------------------

@pytest.fixture
def schema(client, db) -> dict:
    response = client.get("/openapi/v1/schema/?format=json")
    assert response.status_code == 200
    return response.json()


def test_home_is_an_html_page_linking_docs_schema_currencies_admin_and_healthz(client, db):
    response = client.get("/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    for link in HOME_LINKS:
        assert f'href="{link}"' in html, link
    assert "URLconf" not in html  # never Django's debug listing


def test_home_links_the_merchant_portal_for_a_merchants_people(client, db):
    html = client.get("/").content.decode()
    assert 'href="/portal/"' in html
    assert "Merchant portal" in html


def test_home_takes_only_get_and_head(client, db):
    assert client.head("/").status_code == 200
    assert client.post("/").status_code == 405


def test_unknown_page_is_an_html_404_outside_the_api(client, db):
    response = client.get("/no-such-page")
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")
    assert 'href="/"' in response.content.decode()


@pytest.mark.parametrize("path", ["/openapi/v1/no-such", "/openapi/v1/docs", "/openapi/v1/docs/x", "/currencies/x",
                                  "/openapi/"])
def test_unknown_path_under_the_api_is_the_1004_envelope(client, db, path):
    response = client.get(path)
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert response.json() == {"code": "1004", "msg": ErrorCode.NOT_FOUND_ENDPOINT.default_message, "data": None}


@pytest.mark.parametrize("path", ["/openapi/v1/docs/", "/openapi/v1/schema/"])
@pytest.mark.parametrize("method", ["post", "put", "delete", "options"])
def test_docs_and_schema_take_only_get_any_other_method_is_1004_405_json(client, db, path, method):
    response = getattr(client, method)(path, data='{"sign": "x"}', content_type="application/json")
    assert response.status_code == 405 and response["Content-Type"] == "application/json"
    assert response.json()["code"] == "1004" and response.json()["data"] is None


def test_docs_page_loads_redoc_from_our_static_files(client, db):
    response = client.get("/openapi/v1/docs/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert "/openapi/v1/docs/redoc.standalone.js" in html  # the sidecar's bundle, served without its remote logo
    assert "/openapi/v1/schema/" in html
    assert "http://" not in html and "https://" not in html  # no CDN, no web fonts


def test_description_has_the_signing_rules_and_the_whole_error_table(schema):
    description = schema["info"]["description"]
    assert "RSASSA-PKCS1-v1_5 with SHA-256" in description and "Sort by key in byte order" in description
    for error in ErrorCode:
        assert f"| `{error.code}` | {error.http_status} | {error.default_message} |" in description


def test_worked_example_signature_is_that_of_the_test_key():
    body = {**EXAMPLE_BALANCE_BUSINESS, **EXAMPLE_COMMON_FIELDS}
    key = signing.load_private_key((VECTORS / "merchant_rsa2048_private.pem").read_bytes())
    assert signing.sign(key, body) == EXAMPLE_BALANCE_SIGNATURE


def test_every_endpoint_has_a_worked_request_and_success_envelope_example(schema):
    for path in ENDPOINTS:
        method = "get" if path == "/currencies" else "post"
        operation = schema["paths"][path][method]
        success = operation["responses"]["200"]["content"]["application/json"]["examples"]
        assert [set(example["value"]) for example in success.values()] == [{"code", "msg", "data"}], path
        assert all(example["value"]["code"] == "0" for example in success.values())
        if method == "post":
            (request,) = operation["requestBody"]["content"]["application/json"]["examples"].values()
            assert {"merchant_no", "app_id", "key_version", "timestamp", "nonce", "sign_type", "sign"} <= set(
                request["value"]), path
            assert signing.string_to_sign(request["value"]).decode() in request["description"]
            # named by what it does in the page's menu, not by its operation id
            assert operation["summary"] and operation["summary"] != operation["operationId"], path


# --- in a real browser ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip("needs Debian chromium (make browsers)")
    with chromium() as browser:
        yield browser


# Redoc 2 always shows the Redocly logo from this address; the docs page's Content-Security-Policy refuses it, so
# the browser never sends the request (Playwright reports it as a request that failed with "csp").


def is_local(url: str) -> bool:
    return urlsplit(url).scheme in ("data", "blob") or urlsplit(url).hostname in ("127.0.0.1", "localhost")


@pytest.fixture
def desktop(browser):
    """A 1280 px page recording every request it makes, every request that reached the network, and every console
    error. A request to another host that gets as far as the network is aborted (nothing leaves) and recorded."""
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.requested, page.networked, page.refused, page.errors = [], [], {}, []

    def network(route):
        page.networked.append(route.request.url)
        route.continue_() if is_local(route.request.url) else route.abort()

    context.route("**/*", network)
    page.on("request", lambda request: page.requested.append(request.url))
    page.on("requestfailed", lambda request: page.refused.__setitem__(request.url, request.failure))
    page.on("console", lambda message: page.errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    yield page
    context.close()


def assert_only_local_requests(page):
    assert page.networked, "no request recorded"
    assert all(is_local(url) for url in page.networked), f"requests left 127.0.0.1: {page.networked}"
    # Nothing else attempted either: Redoc's remote logo, which the page's own policy used to refuse on every visit
    # (a console error), is dropped from the bundle we serve.
    attempted = [url for url in page.requested if not is_local(url)]
    assert not attempted, (attempted, page.refused)


def console_errors(page) -> list[str]:
    return list(page.errors)




@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_home_in_browser_links_to_the_docs_page(live_server, desktop):
    desktop.goto(live_server.url + "/")
    assert desktop.locator("h1").inner_text() == "Payment platform"
    hrefs = desktop.locator("ul.links a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert hrefs == HOME_LINKS
    screenshot(desktop, "home-1280")
    desktop.get_by_role("link", name="API documentation").click()
    desktop.wait_for_url("**/openapi/v1/docs/")
    desktop.get_by_role("heading", name="Errors").first.wait_for()
    assert_only_local_requests(desktop)
    assert not console_errors(desktop), desktop.errors


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_docs_page_in_browser_shows_signing_endpoints_examples_and_error_table(live_server, desktop):
    desktop.goto(live_server.url + "/openapi/v1/docs/")
    desktop.get_by_role("heading", name="Signing").first.wait_for()
    text = desktop.locator("#redoc-container").inner_text()
    assert "RSASSA-PKCS1-v1_5 with SHA-256" in text
    assert "app_id=A10000001&currency=PHP&key_version=1&merchant_no=M10000001" in text
    for path in ENDPOINTS:
        assert path in text, path
    table = desktop.locator("table", has_text="meaning").first
    rows = table.locator("tbody tr").evaluate_all("rows => rows.map(r => [...r.cells].map(c => c.innerText.trim()))")
    assert rows == [[error.code, str(error.http_status), error.default_message] for error in ErrorCode]
    assert '"sign_type": "RSA2"' in text or "RSA2" in text
    # The payout example's account keeps its leading zeros (the YAML schema used to write it unquoted, and Redoc,
    # reading YAML 1.2, showed the number 12345678).
    desktop.locator("[data-section-id='operation/payout_create']").scroll_into_view_if_needed()
    payout_text = desktop.locator("[data-section-id='operation/payout_create']").inner_text()
    assert '"payee_account": "0012345678"' in payout_text and '"payee_account": 12345678' not in payout_text
    screenshot(desktop, full_page=False, name="docs-1280-top")
    desktop.locator("pre", has_text="app_id=A10000001&currency=PHP").first.scroll_into_view_if_needed()
    screenshot(desktop, full_page=False, name="docs-1280-signing")
    table.scroll_into_view_if_needed()
    screenshot(desktop, full_page=False, name="docs-1280-errors")
    desktop.locator("[data-section-id='operation/pay_create']").scroll_into_view_if_needed()
    screenshot(desktop, full_page=False, name="docs-1280-pay-create")
    for operation, summary in (("statement", "Signed statement of one day"),
                               ("callbacks_list", "List your callback events")):
        section = desktop.locator(f"[data-section-id='operation/{operation}']")
        section.scroll_into_view_if_needed()
        assert summary in section.inner_text() and "String to sign" in section.inner_text(), operation
        screenshot(desktop, full_page=False, name=f"docs-1280-{operation}")
    assert_only_local_requests(desktop)
    assert not console_errors(desktop), desktop.errors


def test_the_yaml_schema_quotes_strings_a_yaml_1_2_reader_would_take_for_numbers(client, db):
    """"0012345678" is a string in YAML 1.1 (PyYAML) but the integer 12345678 in YAML 1.2 (Redoc, most code
    generators). The YAML schema quotes every such string, and says the same as the JSON one."""
    import json

    import yaml

    body = client.get("/openapi/v1/schema/").content.decode()
    assert "payee_account: '0012345678'" in body and "payee_account: 0012345678" not in body
    as_json = json.loads(client.get("/openapi/v1/schema/?format=json").content)
    assert yaml.safe_load(body) == as_json


def test_the_docs_page_serves_redoc_without_the_remote_logo(client, db):
    html = client.get("/openapi/v1/docs/").content.decode()
    assert 'src="/openapi/v1/docs/redoc.standalone.js"' in html
    bundle = client.get("/openapi/v1/docs/redoc.standalone.js")
    assert bundle.status_code == 200 and bundle["Content-Type"].startswith("text/javascript")
    assert b"cdn.redoc.ly" not in bundle.content and b"Redoc" in bundle.content
