"""apps.common.db.model_insert: the hot paths' INSERT writes the same row Model.save() would."""

import pytest
from django.db import IntegrityError, transaction
from django.db.models import signals

from apps.collection.models import CollectionOrder
from apps.common.db import model_insert
from apps.common.models import AuditLog


@pytest.mark.django_db
def test_model_insert_sends_pre_and_post_save_like_save(merchant):
    seen = []

    def pre(sender, instance, **kwargs):
        seen.append(("pre", instance.pk, kwargs["raw"]))

    def post(sender, instance, created, **kwargs):
        seen.append(("post", instance.pk, created))

    signals.pre_save.connect(pre, sender=AuditLog, dispatch_uid="test_pre")
    signals.post_save.connect(post, sender=AuditLog, dispatch_uid="test_post")
    try:
        row = model_insert(AuditLog(actor_label="t", action="a", object_type="x", object_id="1"))
    finally:
        signals.pre_save.disconnect(dispatch_uid="test_pre", sender=AuditLog)
        signals.post_save.disconnect(dispatch_uid="test_post", sender=AuditLog)
    assert seen == [("pre", None, False), ("post", row.pk, True)]


@pytest.mark.django_db
def test_model_insert_applies_defaults_auto_now_add_and_json_like_save(merchant):
    inserted = model_insert(AuditLog(actor_label="t", action="a", object_type="x", object_id="1",
                                     new={"nested": {"k": [1, "two"]}}))
    saved = AuditLog.objects.create(actor_label="t", action="a", object_type="x", object_id="2",
                                    new={"nested": {"k": [1, "two"]}})
    row = AuditLog.objects.get(pk=inserted.pk)
    assert row.created_at is not None and row.created_at == inserted.created_at
    assert row.new == saved.new == {"nested": {"k": [1, "two"]}}
    assert (row.old, row.reason, row.actor_id) == (saved.old, saved.reason, saved.actor_id) == ({}, "", None)
    assert inserted._state.adding is False


@pytest.mark.django_db
def test_model_insert_raises_django_integrity_error_on_a_unique_conflict(merchant):
    from apps.collection.services import collection_create

    order = collection_create(merchant=merchant.merchant, mch_order_no="dup-1", product_code="PHP_COLLECT_D1",
                              amount=10000, currency="PHP")
    clone = CollectionOrder.objects.get(pk=order.pk)
    clone.pk = None
    clone.platform_order_no = "C-other"
    clone.pay_token = "other-token"
    with pytest.raises(IntegrityError), transaction.atomic():
        model_insert(clone)  # same (merchant, mch_order_no)
