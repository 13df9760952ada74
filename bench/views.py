"""The benchmark's reference view (make bench): the stack's ceiling for a signed write.

It does the least a signed write can: parse the JSON body, verify one RSA2 signature, insert one row. Routed by
bench/urls.py, the URL configuration of config.settings.bench only (never in a normal deployment).
"""

from functools import lru_cache

from django.conf import settings
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from apps.common import signing
from apps.common.api.parsers import parse_flat_json_object
from apps.common.models import AuditLog


@lru_cache(maxsize=1)
def _public_key():
    with open(settings.BENCH_REFERENCE_PUBLIC_KEY, encoding="ascii") as handle:
        return signing.load_public_key(handle.read())


@csrf_exempt
@require_POST
def reference(request):
    body = parse_flat_json_object(request.body)
    if not signing.verify(_public_key(), body, body.get("sign", "")):
        return JsonResponse({"code": "1101", "msg": "bad signature", "data": None}, status=401)
    AuditLog.objects.create(actor_label="bench", action="bench.reference", object_type="bench",
                            object_id=str(body.get("nonce", ""))[:64])
    return JsonResponse({"code": "0", "msg": "OK", "data": {"ok": True}}, json_dumps_params={"separators": (",", ":")})
