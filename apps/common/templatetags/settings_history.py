"""{% settings_history_url original %}: the admin page of this object's settings history (apps.common.history), or ""
for a model without one or a user who may not see it."""

from django import template
from django.urls import NoReverseMatch, reverse
from apps.common.history import TRACKED_MODELS, event_model_of

register = template.Library()


@register.simple_tag(takes_context=True)
def settings_history_url(context, obj) -> str:
    model = type(obj)
    if model not in TRACKED_MODELS:
        return ""
    event_model = event_model_of(model)
    request = context.get("request")
    if request is None or not request.user.has_perm(f"{event_model._meta.app_label}.view_{event_model._meta.model_name}"):
        return ""
    try:
        url = reverse(f"admin:{event_model._meta.app_label}_{event_model._meta.model_name}_changelist")
    except NoReverseMatch:
        return ""
    return f"{url}?pgh_obj={obj.pk}"


@register.simple_tag(takes_context=True)
def role_history_url(context, obj) -> str:
    """On a staff user's page: the history of the roles (groups) granted to and revoked from them, or ""."""
    from django.contrib.auth import get_user_model

    request = context.get("request")
    if not isinstance(obj, get_user_model()) or request is None or not request.user.has_perm(
            "common.view_usergroupevent"):
        return ""
    return f"{reverse('admin:common_usergroupevent_changelist')}?user={obj.pk}"
