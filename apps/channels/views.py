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
    channel = Channel.objects.filter(code=channel_code, adapter=XENDIT).first()
    if channel is None:
        return JsonResponse({"error": "unknown channel"}, status=404)
    try:
        (payin_adapter if channel.direction == Channel.Direction.PAYIN else payout_adapter)(channel)
        done = xendit_webhook_handle(channel=channel, token=request.headers.get("x-callback-token", ""),
                                     body=request.body)
    except WebhookRefused:
        logger.warning("xendit webhook for %s refused: bad x-callback-token", channel_code)
        return JsonResponse({"error": "forbidden"}, status=403)
    except ChannelNotAllowed as exc:
        return JsonResponse({"error": str(exc)}, status=404)
    except UpstreamUnavailable as exc:
        logger.warning("xendit webhook for %s: %s; left for the retry or reconciliation", channel_code, exc)
        return JsonResponse({"error": "upstream unavailable"}, status=503)
    except UpstreamRejected as exc:
        logger.warning("xendit webhook for %s not applied: %s", channel_code, exc)
        return JsonResponse({"error": str(exc)}, status=exc.status if 400 <= exc.status < 500 else 400)
    logger.info("xendit webhook for %s: %s", channel_code, done)
    return JsonResponse({"ok": True, **done})


@csrf_exempt
@require_POST
def paymongo_webhook(request, channel_code: str):
    """POST /channels/paymongo/<channel_code>/webhook: 200 once applied (or nothing to apply), 403 on a missing, wrong or
    stale Paymongo-Signature or an event of the other mode, 503 when PayMongo's API could not be asked (PayMongo
    retries; reconciliation resolves what stays open)."""
    channel = Channel.objects.filter(code=channel_code, adapter=PAYMONGO).first()
    if channel is None:
        return JsonResponse({"error": "unknown channel"}, status=404)
    try:
        (payin_adapter if channel.direction == Channel.Direction.PAYIN else payout_adapter)(channel)
        done = paymongo_webhook_handle(channel=channel, signature=request.headers.get("Paymongo-Signature", ""),
                                       body=request.body)
    except PayMongoWebhookRefused as exc:
        logger.warning("paymongo webhook for %s refused: %s", channel_code, exc)
        return JsonResponse({"error": "forbidden"}, status=403)
    except ChannelNotAllowed as exc:
        return JsonResponse({"error": str(exc)}, status=404)
    except UpstreamUnavailable as exc:
        logger.warning("paymongo webhook for %s: %s; left for the retry or reconciliation", channel_code, exc)
        return JsonResponse({"error": "upstream unavailable"}, status=503)
    except UpstreamRejected as exc:
        logger.warning("paymongo webhook for %s not applied: %s", channel_code, exc)
        return JsonResponse({"error": str(exc)}, status=exc.status if 400 <= exc.status < 500 else 400)
    logger.info("paymongo webhook for %s: %s", channel_code, done)
    return JsonResponse({"ok": True, **done})
