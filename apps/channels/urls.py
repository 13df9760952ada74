from django.urls import path

from apps.channels.views import paymongo_webhook, xendit_webhook

# Upstream webhooks under /channels/ (docs/channels.md): one URL per channel, set in the upstream's dashboard.
urlpatterns = [
    path("xendit/<str:channel_code>/webhook", xendit_webhook, name="xendit-webhook"),
    path("paymongo/<str:channel_code>/webhook", paymongo_webhook, name="paymongo-webhook"),
]
