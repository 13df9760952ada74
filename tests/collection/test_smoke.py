from apps.collection.models import CollectionOrder
from apps.collection.services import collection_notify_paid
from tests.collection.conftest import balances, create_ok


def test_create_then_pay_credits_settling(client, merchant):
    order = create_ok(client, merchant)
    assert order.status == CollectionOrder.Status.CREATED
    collection_notify_paid(platform_order_no=order.platform_order_no)
    order.refresh_from_db()
    assert order.status == CollectionOrder.Status.SUCCESS
    assert balances(merchant) == {"available": 0, "settling": 10000, "frozen": 0}
