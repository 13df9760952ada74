from django.apps import AppConfig


class PayoutBatchesConfig(AppConfig):
    """The portal's batch payouts: a finance person uploads a CSV file or enters one payout, an owner independent of
    them approves, and the batch creates the payouts (docs/portal.md, "Payouts by hand").

    The label stays `merchant_payouts`, the app's earlier name: its tables (`merchant_payouts_payoutbatch`,
    `merchant_payouts_payoutbatchrow`), its rows in django_migrations and its content types (which the audit log's
    object_type names) keep their names, so an existing database needs no table rename and migrates forward as is."""

    name = "apps.payout_batches"
    label = "merchant_payouts"
    verbose_name = "Payout batches by hand"
