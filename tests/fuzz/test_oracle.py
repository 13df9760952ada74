"""The fuzzers' oracle agrees with the code table the app raises from, and refuses what it must refuse."""

import pytest

from apps.common.errors import ErrorCode
from tests.fuzz.oracle import CONTRACT_CODES, assert_envelope


def test_contract_table_matches_error_codes():
    app_table: dict[str, set[int]] = {}
    for error in ErrorCode:
        app_table.setdefault(error.code, set()).add(error.http_status)
    assert app_table.pop("9999") == {500}
    assert app_table == CONTRACT_CODES


@pytest.mark.parametrize(("status", "content"), [
    (500, b'{"code": "9999", "msg": "Internal error.", "data": null}'),
    (200, b'{"code": "9999", "msg": "Internal error.", "data": null}'),
    (400, b'{"code": "1000", "msg": "x", "data": {}}'),
    (401, b'{"code": "1000", "msg": "x", "data": null}'),
    (404, b'{"code": "1001", "msg": "x", "data": null}'),
    (400, b'{"code": 1000, "msg": "x", "data": null}'),
    (400, b'{"code": "1000", "msg": "", "data": null}'),
    (400, b'{"code": "1000", "msg": "x"}'),
    (400, b'{"code": "1000", "msg": "x", "data": null, "detail": "x"}'),
    (400, b"<html>Bad Request</html>"),
    (200, b'{"code": "0", "msg": "OK", "data": null}'),
])
def test_oracle_rejects_what_the_contract_rules_out(status, content):
    with pytest.raises(AssertionError):
        assert_envelope(status, content)


@pytest.mark.parametrize(("status", "content"), [
    (200, b'{"code": "0", "msg": "OK", "data": {"currency": "PHP"}}'),
    (405, b'{"code": "1004", "msg": "No such method.", "data": null}'),
    (404, b'{"code": "1004", "msg": "No such endpoint.", "data": null}'),
    (429, b'{"code": "1106", "msg": "Slow down.", "data": null}'),
])
def test_oracle_accepts_contract_envelopes(status, content):
    assert_envelope(status, content)["code"]
