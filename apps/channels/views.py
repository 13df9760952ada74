"""Upstream webhooks (docs/channels.md): thin; the adapter's handler checks the token and re-reads the object."""

import logging

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from apps.channels.base import UpstreamRejected, UpstreamUnavailable
from apps.channels.environment import ChannelNotAllowed
from apps.channels.models import Channel
from apps.channels.registry import payin_adapter, payout_adapter
from apps.channels.paymongo import ADAPTER as PAYMONGO
from apps.channels.paymongo import WebhookRefused as PayMongoWebhookRefused
from apps.channels.paymongo import paymongo_webhook_handle
from apps.channels.xendit import ADAPTER as XENDIT, WebhookRefused, xendit_webhook_handle

logger = logging.getLogger(__name__)


@csrf_exempt
@require_POST
def xendit_webhook(request, channel_code: str):
    """POST /channels/xendit/<channel_code>/webhook: 200 once applied (or nothing to apply), 403 on a bad token,
    503 when Xendit's API could not be asked (Xendit retries; reconciliation resolves what stays open)."""
    return _webhook(channel_code, adapter=XENDIT, refused=WebhookRefused, handle=lambda channel: xendit_webhook_handle(
        channel=channel, token=request.headers.get("x-callback-token", ""), body=request.body))


@csrf_exempt
@require_POST
def paymongo_webhook(request, channel_code: str):
    """POST /channels/paymongo/<channel_code>/webhook: 200 once applied (or nothing to apply), 403 on a missing, wrong or
    stale Paymongo-Signature or an event of the other mode, 503 when PayMongo's API could not be asked (PayMongo
    retries; reconciliation resolves what stays open)."""
    return _webhook(channel_code, adapter=PAYMONGO, refused=PayMongoWebhookRefused,
                    handle=lambda channel: paymongo_webhook_handle(
                        channel=channel, signature=request.headers.get("Paymongo-Signature", ""), body=request.body))


def _webhook(channel_code: str, *, adapter: str, refused: type[Exception], handle) -> JsonResponse:
    """The answer to an upstream's webhook for one of its channels: 404 unknown channel (or one this deployment may
    not use), 403 refused by the adapter's check, 503 the upstream could not be asked, 4xx the object is refused."""
    channel = Channel.objects.filter(code=channel_code, adapter=adapter).first()
    if channel is None:
        return JsonResponse({"error": "unknown channel"}, status=404)
    try:
        (payin_adapter if channel.direction == Channel.Direction.PAYIN else payout_adapter)(channel)
        done = handle(channel)
    except refused as exc:
        logger.warning("%s webhook for %s refused: %s", adapter, channel_code, exc or "bad credentials")
        return JsonResponse({"error": "forbidden"}, status=403)
    except ChannelNotAllowed as exc:
        return JsonResponse({"error": str(exc)}, status=404)
    except UpstreamUnavailable as exc:
        logger.warning("%s webhook for %s: %s; left for the retry or reconciliation", adapter, channel_code, exc)
        return JsonResponse({"error": "upstream unavailable"}, status=503)
    except UpstreamRejected as exc:
        logger.warning("%s webhook for %s not applied: %s", adapter, channel_code, exc)
        return JsonResponse({"error": str(exc)}, status=exc.status if 400 <= exc.status < 500 else 400)
    logger.info("%s webhook for %s: %s", adapter, channel_code, done)
    return JsonResponse({"ok": True, **done})
