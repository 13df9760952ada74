from django.db import models

from apps.common.history import tracked


@tracked()
class Currency(models.Model):
    """The currency record of GET /currencies (docs/api.md, "Endpoints"). `active` false: no new transactions; history
    stays queryable."""

    code = models.CharField(max_length=3, primary_key=True)
    name = models.CharField(max_length=64)
    symbol = models.CharField(max_length=16)
    minor_unit = models.PositiveSmallIntegerField(help_text="Amount scale: 2 means amounts are in 1/100 units.")
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["code"]
        verbose_name_plural = "currencies"

    def __str__(self) -> str:
        return self.code
