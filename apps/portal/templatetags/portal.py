"""Template helpers of the portal: amounts in a currency's own format, and the role check for menus and buttons."""

from django import template

from apps.currencies.formatting import format_minor
from apps.currencies.selectors import currency_get
from apps.portal.access import has_permission

register = template.Library()


@register.filter
def minor(amount, currency_code) -> str:
    """{{ order.amount|minor:order.currency_id }} → '₱1,234.56'."""
    if amount is None:
        return "-"
    currency = currency_get(str(currency_code))
    return format_minor(int(amount), currency) if currency else f"{amount} {currency_code}"


@register.simple_tag(takes_context=True)
def can(context, permission: str) -> bool:
    """{% can "export_orders" as may_export %}: whether the signed-in merchant user's role has the permission."""
    return has_permission(getattr(context.get("request"), "merchant_user", None), permission)
