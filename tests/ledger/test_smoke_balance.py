from tests.helpers import signed_post


def test_balance_of_new_merchant_is_zero(client, merchant):
    status, body = signed_post(client, merchant, "/openapi/v1/balance", {"currency": "PHP"})
    assert (status, body) == (200, {"code": "0", "msg": "OK", "data": {"currency": "PHP", "available": 0, "settling": 0}})
