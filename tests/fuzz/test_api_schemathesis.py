"""Schemathesis over /openapi/v1/schema/, every request signed the way a merchant's integration signs it.

Schemathesis generates the bodies from the schema the app serves (schema-conforming and schema-violating);
`CaseSigner` (the signing hook) then fills the common fields for the real merchant, with a fresh nonce, and
signs with the merchant's RSA key (docs/api.md, "Signing"). Per example it draws one of four modes:
- valid:    real common fields and a correct signature over business fields built by a profile:
            golden (a request known to succeed with zero to two fields changed), clean (every field a value
            the platform knows, e.g. its product codes, bank codes, seeded order numbers), mixed or hostile
            (Schemathesis' own values, boundary values just outside the field formats, hostile strings);
- tampered: some common fields replaced by generated or hostile values, then re-signed;
- broken:   a golden request signed, then the signature broken (bytes flipped, another merchant's key, a field
            changed after);
- raw:      sent exactly as Schemathesis generated it (its `sign` is random).
The oracle (tests/fuzz/oracle.py) holds for every response; each mode adds what it can predict. Bodies that
Schemathesis generates as non-objects (negative mode) are sent as they are and must be 1000.

This is a function called from the test, not a global `before_call` hook: it needs Hypothesis draws and the
test's merchant, and a global hook would leak into any other Schemathesis test in the process.
"""

import base64
import json
import secrets
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import schemathesis
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from hypothesis import strategies as st
from werkzeug.test import Client

from apps.callbacks.api.serializers import encode_cursor
from apps.callbacks.models import CallbackEvent
from apps.channels.models import BankCode
from apps.common import signing
from apps.collection.refunds import refund_create
from apps.collection.services import collection_notify_paid
from apps.ledger.statements import statement_verify
from apps.merchants.models import MerchantProduct, PlatformKey
from tests.fuzz.conftest import FUZZ_EXAMPLES, fuzz_settings, load_api_schema, requests_keep_the_connection
from tests.fuzz.oracle import AUTH_CODES, COMMON_FIELDS, assert_envelope, is_flat_signable, passes_signature_layer
from tests.helpers import signed_post

schema = load_api_schema()

STATEMENT = "/openapi/v1/statement"
SIGNED_OPERATIONS = {"/openapi/v1/balance", STATEMENT, "/openapi/v1/pay/create", "/openapi/v1/pay/query",
                     "/openapi/v1/payout/create", "/openapi/v1/payout/query", "/openapi/v1/callbacks/list",
                     "/openapi/v1/callbacks/resend", "/openapi/v1/refund/create", "/openapi/v1/refund/query"}
# Which codes each endpoint may answer, besides the signature layer's (docs/api.md, "Checks, in order", "Error codes",
# "Endpoints").
BUSINESS_CODES = {
    "/openapi/v1/balance": {"0", "1000", "1001"},
    STATEMENT: {"0", "1000", "1001"},
    "/openapi/v1/pay/create": {"0", "1000", "1001", "1002", "1003", "2001"},
    "/openapi/v1/pay/query": {"0", "1000", "2002"},
    "/openapi/v1/payout/create": {"0", "1000", "1001", "1002", "1003", "2001", "2003", "2006"},
    "/openapi/v1/payout/query": {"0", "1000", "2002"},
    "/openapi/v1/callbacks/list": {"0", "1000"},
    "/openapi/v1/refund/create": {"0", "1000", "2001", "2002", "2003", "2007", "2008"},
    "/openapi/v1/refund/query": {"0", "1000", "2002"},
    # 2001: the event is pending (a re-send already queued it); docs/api.md, "Callback events: list and re-send".
    "/openapi/v1/callbacks/resend": {"0", "1000", "2001", "2002"},
}
CREATE_OPERATIONS = {"/openapi/v1/pay/create", "/openapi/v1/payout/create"}

# Strings that have broken payment APIs before: separators of the string to sign, escapes JSON can carry but
# UTF-8 cannot (a lone surrogate), control characters, overlong values, markup and injection classics.
HOSTILE_STRINGS = st.one_of(
    st.sampled_from(["\ud800", "a\udfffb", "\x00", "a&b=c", "=", "&", " ", "\t\n", "é", "日本", "😀", "PHP ",
                     "php", "x" * 65, "9" * 400, "<script>alert(1)</script>", "' OR 1=1 --", "../../etc/passwd",
                     "NaN", "true", "null", "-1", "0", "1e3", "\u202e", "\ufeff"]),
    st.text(max_size=80),
    st.text(st.characters(codec="utf-16", categories=["Cs", "Cc", "Zs", "So"]), max_size=8),
)
HOSTILE_VALUES = st.one_of(HOSTILE_STRINGS, st.integers(min_value=-(2**70), max_value=2**70), st.booleans(),
                           st.none(), st.sampled_from([1.5, 0.0, -0.0, 1e308, [], {}, [1], {"a": 1}]))
MODES = st.sampled_from(["valid"] * 5 + ["tampered"] * 2 + ["broken"] * 2 + ["raw"])
PROFILES = st.sampled_from(["golden"] * 3 + ["clean"] * 2 + ["mixed"] + ["hostile"])
FRESH_ORDER_NOS = st.integers(0, 10**12).map(lambda n: f"FZ-{n}")
FIELD_CHOICES = {"mixed": st.sampled_from(["keep"] * 3 + ["good"] * 5 + ["edge", "hostile", "absent"]),
                 "hostile": st.sampled_from(["keep"] * 2 + ["hostile"] * 2 + ["edge", "good", "absent"])}


def _business_fields(case) -> tuple[set, set]:
    """Required and optional business fields of the operation's request body, as the schema states them."""
    ref = case.operation.definition.raw["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    component = case.operation.schema.raw_schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    business = set(component["properties"]) - set(COMMON_FIELDS)
    required = set(component.get("required", ())) & business
    return required, business - required


def _manila_day(offset: int) -> str:
    """Today (+ offset days) in the settlement time zone, as the statement's `date` takes it."""
    return (datetime.now(ZoneInfo(settings.SETTLEMENT_TIME_ZONE)).date() + timedelta(days=offset)).isoformat()


@dataclass
class FuzzState:
    """What the run has learnt so far: created orders (to query and replay) and what was answered."""

    merchant: object
    other_key: object
    products: dict
    bank_codes: dict
    events: list = field(default_factory=list)  # ids of the merchant's seeded callback events (dead at first)
    created: dict = field(default_factory=lambda: defaultdict(dict))  # path -> mch_order_no -> platform_order_no
    sent_nonces: set = field(default_factory=set)
    codes: dict = field(default_factory=lambda: defaultdict(Counter))  # path -> Counter of codes
    modes: Counter = field(default_factory=Counter)
    messages: Counter = field(default_factory=Counter)  # (code, msg) of error answers, for the run's summary

    @staticmethod
    def edge_values(name: str) -> st.SearchStrategy:
        """Just outside docs/api.md's "Field formats" (1000 expected): the boundaries the clean values stay inside."""
        pool = {"expire_seconds": [59, 86401, 0, -1], "return_url": ["ftp://shop.example/", "javascript:alert(1)",
                "https://" + "x" * 505], "subject": ["x" * 257], "attach": ["x" * 513], "payee_name": ["x" * 129],
                "payee_account": ["0012-345", "x" * 65, "١٢٣"], "mch_order_no": ["x" * 65, "FZ A", "FZ/1"],
                "platform_order_no": ["P-1", "x" * 65], "amount": [0, -1, 2**53, 2**64], "currency": ["php", "PHPX"],
                "limit": [0, 101, -1], "cursor": ["Y2IxOjA", "x" * 65, "bad cursor", "Y2IxOjQy\n"],
                "event_id": [0, -1, 2**63], "created_from": [-1, 253402300800], "created_to": [-1, 2**53],
                "type": ["collection", "payout.terminal ", "DEAD"], "status": ["DEAD", "failed", "dead "]}
        return st.sampled_from(pool.get(name, ["\ud800"]))

    def good_values(self, path: str, name: str) -> st.SearchStrategy:
        """Values the platform knows for this merchant, so generated requests get past validation."""
        kind = "payout" if "payout" in path else "collection"
        created = self.created["/openapi/v1/payout/create" if kind == "payout" else "/openapi/v1/pay/create"]
        pool = {
            "currency": ["PHP", "PHP", "USD", "EUR"],
            "product_code": self.products[kind] + self.products["payout" if kind == "collection" else "collection"][:1],
            "bank_code": self.bank_codes.get("PHP", [])[:3] + self.bank_codes.get("USD", [])[:2] + ["NOPE"],
            "amount": [1, 99, 100, 101, 10_000, 1_000_000, 5_000_000, 5_000_001, 50_000_000, 50_000_001, 2**53 - 1],
            "mch_order_no": ["FZ-A", "FZ-B", *list(created)[:5]],
            "platform_order_no": [*list(created.values())[:5], "P" + "0" * 20],
            "payee_name": ["Juan dela Cruz", "Ana Santos"],
            "payee_account": ["0012345678", "99994000", "12344001", "777"],
            "expire_seconds": [60, 600, 86400],
            "return_url": ["https://shop.example/return", "http://127.0.0.1/r"],
            "subject": ["Kape at pandesal ☕", "x" * 256],
            "attach": ["order-42", "x" * 512],
            "date": [_manila_day(0), _manila_day(-1), _manila_day(1), "2026-02-30", "1970-01-01", "1969-12-31"],
            "format": ["json", "csv", "csv"],
            "event_id": [*self.events, 2**62],
            "type": ["collection.success", "payout.terminal", "payout.reversed", "refund.terminal"],
            "status": ["pending", "delivered", "dead"],
            "limit": [1, 20, 100],
            "cursor": [encode_cursor(pk) for pk in self.events] + [encode_cursor(2**62)],
            "created_from": [0, int(time.time()) - 60, 253402300799],
            "created_to": [0, int(time.time()) + 60, 253402300799],
        }.get(name)
        if name == "mch_order_no" and path in CREATE_OPERATIONS:  # mostly new orders, sometimes a replay or 2001
            return st.one_of(FRESH_ORDER_NOS, FRESH_ORDER_NOS, st.sampled_from(pool))
        return st.sampled_from(pool) if pool else HOSTILE_STRINGS

    def template(self, path: str, data) -> dict:
        """A request that succeeds for this merchant; the golden profile perturbs a field or two of it."""
        return {
            "/openapi/v1/balance": lambda: {"currency": "PHP"},
            STATEMENT: lambda: {"date": _manila_day(0), "currency": "PHP",
                                "format": data.draw(st.sampled_from(["json", "csv"]), label="format")},
            "/openapi/v1/pay/create": lambda: {
                "mch_order_no": data.draw(FRESH_ORDER_NOS, label="mch_order_no"), "amount": 10_000, "currency": "PHP",
                "product_code": self.products["collection"][0], "subject": "Kape", "expire_seconds": 600},
            "/openapi/v1/payout/create": lambda: {
                "mch_order_no": data.draw(FRESH_ORDER_NOS, label="mch_order_no"), "amount": 10_000, "currency": "PHP",
                "product_code": self.products["payout"][0], "payee_name": "Juan dela Cruz",
                "payee_account": "0012345678", "bank_code": self.bank_codes["PHP"][0]},
            "/openapi/v1/pay/query": lambda: {"platform_order_no": self.created["/openapi/v1/pay/create"]["FZ-A"]},
            "/openapi/v1/payout/query": lambda: {"mch_order_no": "FZ-A"},
            "/openapi/v1/callbacks/list": lambda: {"status": "dead", "limit": 20},
            "/openapi/v1/refund/create": lambda: {"mch_order_no": "FZ-A", "amount": 100,
                                                  "mch_refund_no": data.draw(FRESH_ORDER_NOS, label="mch_refund_no")},
            "/openapi/v1/refund/query": lambda: {"mch_refund_no": "FZ-A"},
            "/openapi/v1/callbacks/resend": lambda: {"event_id": data.draw(st.sampled_from(self.events),
                                                                           label="event_id")},
        }[path]()


@dataclass
class Prepared:
    mode: str
    body: object
    signed_ok: bool = False  # what the oracle's independent check of the order of checks says about the body sent


class CaseSigner:
    """The signing hook: turns a generated case into a request from the real merchant (docs/api.md, "Signing")."""

    def __init__(self, state: FuzzState):
        self.state = state
        self.merchant = state.merchant

    def common_fields(self) -> dict:
        return {"merchant_no": self.merchant.merchant_no, "app_id": self.merchant.app_id,
                "key_version": self.merchant.key_version, "timestamp": int(time.time()),
                "nonce": secrets.token_urlsafe(18), "sign_type": "RSA2"}

    def sign(self, body: dict, key=None) -> dict:
        try:
            body["sign"] = signing.sign(key or self.merchant.private_key, body)
        except (signing.UnsignableValue, UnicodeEncodeError):
            body["sign"] = base64.b64encode(secrets.token_bytes(256)).decode()  # parser must refuse it first
        return body

    def prepare(self, case, data) -> Prepared:
        mode = data.draw(MODES, label="mode")
        generated = case.body
        if mode == "raw" or not isinstance(generated, dict):
            return Prepared("raw" if isinstance(generated, dict) else "not-an-object", generated)
        required, optional = _business_fields(case)
        # golden: a request known to succeed with zero to two fields changed; clean: every field a known value
        # (optional ones sometimes left out); mixed/hostile: Schemathesis' values (unknown extra fields
        # included), known values, boundary values and hostile ones, field by field.
        # A broken signature goes on a golden request: flat and signable, so the signature layer is what answers
        # (1101), never the parser, and every operation's examples reach past it.
        profile = "golden" if mode == "broken" else data.draw(PROFILES, label="profile")
        if profile == "golden":
            business = self.state.template(case.path, data)
            names = data.draw(st.lists(st.sampled_from(sorted(required | optional)), max_size=2, unique=True),
                              label="perturbed")
            choices = {name: data.draw(FIELD_CHOICES["mixed"], label=f"{name} from") for name in names}
        elif profile == "clean":
            business = {k: v for k, v in generated.items() if k in required | optional}
            choices = {name: "good" if name in required else data.draw(st.sampled_from(["good", "absent"]), label=name)
                       for name in sorted(required | optional)}
        else:
            business = {k: v for k, v in generated.items() if k not in COMMON_FIELDS}
            choices = {name: data.draw(FIELD_CHOICES[profile], label=f"{name} from")
                       for name in sorted(set(business) | required | optional)}
        for name, choice in choices.items():
            if choice == "keep" and name not in generated:
                choice = "absent"
            if choice == "keep":
                business[name] = generated[name]
            elif choice == "good":
                business[name] = data.draw(self.state.good_values(case.path, name), label=name)
            elif choice == "edge":
                business[name] = data.draw(self.state.edge_values(name), label=name)
            elif choice == "hostile":
                business[name] = data.draw(HOSTILE_VALUES, label=name)
            elif choice == "absent":
                business.pop(name, None)
        body = {**business, **self.common_fields()}
        if mode == "tampered":
            for name in data.draw(st.lists(st.sampled_from(COMMON_FIELDS[:-1]), min_size=1, max_size=3, unique=True),
                                  label="tampered fields"):
                body[name] = data.draw(self._tampered_value(name, generated), label=name)
        self.sign(body)
        if mode == "broken":
            self._break(body, data)
        return Prepared(mode, body)

    def _tampered_value(self, name: str, generated: dict) -> st.SearchStrategy:
        now = int(time.time())
        specific = {
            "merchant_no": st.sampled_from(["M00000000", "M99999999", self.merchant.merchant_no.lower()]),
            "app_id": st.sampled_from(["A00000000", self.merchant.app_id + "0"]),
            "key_version": st.sampled_from([0, 2, -1, 2**63, True, "1"]),
            "timestamp": st.one_of(st.integers(-(2**64), 2**64), st.sampled_from(
                [now - 301, now + 301, now - 10**6, str(now), now * 1000, 0])),
            "nonce": st.sampled_from(["short", "x" * 65, "bad nonce!", "ok_nonce-" + "é", "FIXEDNONCE1"]),
            "sign_type": st.sampled_from(["RSA", "rsa2", "HMAC", "RSA2 ", None, ""]),
        }[name]
        options = [specific, HOSTILE_VALUES]
        if name in generated:
            options.append(st.just(generated[name]))
        return st.one_of(*options)

    def _break(self, body: dict, data) -> None:
        how = data.draw(st.sampled_from(["flip", "other-key", "changed-after", "truncated", "dropped"]), label="break")
        if how == "flip":
            raw = bytearray(base64.b64decode(body["sign"]))
            index = data.draw(st.integers(0, len(raw) - 1), label="byte")
            raw[index] ^= data.draw(st.integers(1, 255), label="xor")
            body["sign"] = base64.b64encode(bytes(raw)).decode()
        elif how == "other-key":
            self.sign(body, key=self.state.other_key)
        elif how == "changed-after":
            body["timestamp"] += data.draw(st.sampled_from([-1, 1]), label="shift")
        elif how == "truncated":
            body["sign"] = body["sign"][: data.draw(st.integers(0, len(body["sign"]) - 1), label="cut")]
        else:
            del body["sign"]


@pytest.fixture
def fuzz_state(funded_merchant, rsa_keys, client, unthrottled):
    products = defaultdict(list)
    for mp in MerchantProduct.objects.filter(merchant=funded_merchant.merchant).select_related("product"):
        products[mp.product.kind].append(mp.product.code)
    bank_codes = defaultdict(list)
    for bank in BankCode.objects.filter(is_active=True).order_by("code"):
        bank_codes[bank.currency_id].append(bank.code)
    state = FuzzState(funded_merchant, rsa_keys[1], dict(products), dict(bank_codes))
    # One order of each kind already exists, so queries can find something and creates can collide (2001).
    seeds = {"/openapi/v1/pay/create": {"product_code": products["collection"][0]},
             "/openapi/v1/payout/create": {"product_code": products["payout"][0], "payee_name": "Juan dela Cruz",
                                           "payee_account": "0012345678", "bank_code": bank_codes["PHP"][0]}}
    for path, params in seeds.items():
        body = {"mch_order_no": "FZ-A", "amount": 10_000, "currency": "PHP", **params}
        _, answer = signed_post(client, funded_merchant, path, body)
        assert answer["code"] == "0", answer
        state.created[path]["FZ-A"] = answer["data"]["platform_order_no"]
    # The pay-in FZ-A is paid and has a refund FZ-A, so a refund of it can be made (from the funded available balance),
    # replayed, refused or queried.
    collection_notify_paid(platform_order_no=state.created["/openapi/v1/pay/create"]["FZ-A"])
    refund_create(merchant=funded_merchant.merchant, mch_order_no="FZ-A", mch_refund_no="FZ-A", amount=100)
    # Dead callback events of the merchant, so a re-send can succeed (then 2001 while pending) and the list shows some.
    for index in range(8):
        state.events.append(CallbackEvent.objects.create(
            merchant=funded_merchant.merchant, type=CallbackEvent.Type.COLLECTION_SUCCESS,
            platform_order_no=f"FZEVENT{index}", payload={"platform_order_no": f"FZEVENT{index}"},
            status=CallbackEvent.Status.DEAD).pk)
    with requests_keep_the_connection():  # after the seeding: Django's test client reconnects the signal
        yield state
    print("\nfuzz modes:", dict(state.modes))
    for path, counter in sorted(state.codes.items()):
        print(f"fuzz codes {path}: {dict(sorted(counter.items()))}")
    print("fuzz most common errors:", state.messages.most_common(8))
    if FUZZ_EXAMPLES >= 30:
        # The fuzzer must reach past the signature layer, or it only tested the front door.
        for path, counter in state.codes.items():
            assert {"0", "1000", "1101"} <= set(counter), (path, counter)
            if path == "/openapi/v1/payout/create":
                assert "2001" in counter, (path, counter)


@fuzz_settings()
@schema.parametrize()
@schema.given(data=st.data())
def test_every_response_is_a_contract_envelope(case, data, fuzz_state):
    if case.path not in SIGNED_OPERATIONS:  # GET /currencies: public, unsigned
        response = case.call()
        body = assert_envelope(response.status_code, response.content, case.path)
        assert body["code"] == "0"
        return

    prepared = CaseSigner(fuzz_state).prepare(case, data)
    sent = prepared.body
    if isinstance(sent, dict):
        prepared.signed_ok = is_flat_signable(sent) and passes_signature_layer(sent, merchant=fuzz_state.merchant)
        nonce_seen_before = sent.get("nonce") in fuzz_state.sent_nonces if isinstance(sent.get("nonce"), str) else False
        if isinstance(sent.get("nonce"), str):
            fuzz_state.sent_nonces.add(sent["nonce"])
    response, status, content = send(case, sent, edited=prepared.mode in ("valid", "tampered", "broken"))
    context = (prepared.mode, case.path, sent)
    if _content_type(response).startswith("text/csv"):
        # statement with format=csv: the one answer that is not the envelope; errors still are (docs/api.md,
        # "Statements").
        assert case.path == STATEMENT and status == 200 and sent.get("format") == "csv", context
        assert prepared.signed_ok, f"accepted a request that fails the signature checks: {context!r}"
        key_version = int(content.decode().split("# key_version=", 1)[1].split("\n", 1)[0])
        key = signing.load_public_key(PlatformKey.objects.get(version=key_version).public_key_pem)
        assert statement_verify(content.decode(), key), context
        fuzz_state.modes[prepared.mode] += 1
        fuzz_state.codes[case.path]["0"] += 1
        case.validate_response(response, checks=[schemathesis.checks.status_code_conformance,
                                                 schemathesis.checks.content_type_conformance])
        return
    body = assert_envelope(status, content, context)
    code = body["code"]
    fuzz_state.modes[prepared.mode] += 1
    fuzz_state.codes[case.path][code] += 1
    if code != "0":
        fuzz_state.messages[(code, body["msg"])] += 1

    assert code in BUSINESS_CODES[case.path] | AUTH_CODES, context
    assert code != "1106", "rate limit is lifted for the fuzzer"
    if not is_flat_signable(sent):
        # The first check: not a JSON object of flat values -> 1000, before anything else.
        assert code == "1000", (body, context)
        return
    if prepared.mode == "valid":
        assert code not in AUTH_CODES, (body, context)
    if prepared.mode == "broken":
        assert code == "1101", (body, context)
    if code == "0":
        assert prepared.signed_ok, f"accepted a request that fails the signature checks: {context!r}"
        _check_success(fuzz_state, case.path, sent, body["data"])
    if code == "1103":
        assert nonce_seen_before, f"1103 for a nonce never sent before: {context!r}"
    # The schema's own response definitions (status codes, content type, body shape) hold too.
    case.validate_response(response, checks=[
        schemathesis.checks.status_code_conformance, schemathesis.checks.content_type_conformance,
        schemathesis.checks.response_schema_conformance,
    ])


_wsgi = Client(WSGIHandler())


def _content_type(response) -> str:
    value = response.headers.get("Content-Type") or response.headers.get("content-type") or ""
    return (value[0] if isinstance(value, list) else value).lower()


def send(case, body, *, edited: bool):
    """Send the case; returns (response, HTTP status, body bytes). An edited body is POSTed as JSON through the
    WSGI handler directly, not by case.call(): Schemathesis re-validates an edited body before sending and
    fails on the lone surrogates the hostile values carry (valid JSON escapes, not valid UTF-8)."""
    if not edited:
        response = case.call()
        return response, response.status_code, response.content
    try:
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        pass  # the generated body stays on the case; only failure reports show it
    else:
        case.body = body
    response = _wsgi.post(case.path, data=json.dumps(body).encode(), content_type="application/json",
                          headers={"Host": "localhost"})
    return response, response.status_code, response.get_data()


def _check_success(state: FuzzState, path: str, sent: dict, data: dict) -> None:
    if path in CREATE_OPERATIONS:
        # Idempotent create (docs/api.md): one mch_order_no is one order, however often it is replayed.
        known = state.created[path].setdefault(sent["mch_order_no"], data["platform_order_no"])
        assert known == data["platform_order_no"], (sent, data)
        assert (data["mch_order_no"], data["amount"], data["currency"]) == (
            sent["mch_order_no"], sent["amount"], sent["currency"])
    elif path.endswith("/query"):
        for number in ("platform_order_no", "mch_order_no"):
            if sent.get(number) not in (None, ""):
                assert data[number] == sent[number] or (number == "mch_order_no" and sent.get("platform_order_no"))
