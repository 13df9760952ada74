"""gunicorn's settings for the platform (docs/staff-access.md, "No request header moves the admin"; docs/runbook.md,
"Behind a proxy"): `gunicorn -c config/gunicorn.py config.wsgi:application --bind ... --workers N`, as the
Dockerfile, docker-compose.yml and the fault drills run it. Options on the command line override these."""

# gunicorn takes SCRIPT_NAME and PATH_INFO from request headers of the addresses in forwarded_allow_ips (127.0.0.1
# by default: any process on the host, or a proxy that passes a client's headers through). The platform is served at
# the root of its host and nothing in front of it sets these; a client's would change the prefix of every URL Django
# writes for that request. Not believed from anyone: gunicorn drops them (header_map "drop").
forwarder_headers = ""


def pre_request(worker, req):
    """A body larger than Django reads (DATA_UPLOAD_MAX_MEMORY_SIZE: the API answers 400 "The body is too large."
    without reading it) ends the connection after the answer, and the answer says so (`Connection: close`). Left
    open, the unread body is still on the connection: gunicorn drains 64 KiB of it at most, then closes without a
    word, and a keep-alive client's next request on that connection is reset. A header of the application cannot
    do this: WSGI forbids hop-by-hop headers and gunicorn drops them."""
    worker.log.debug("%s %s", req.method, req.path)  # gunicorn's own pre_request
    from django.conf import settings

    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    length = next((value for name, value in req.headers if name == "CONTENT-LENGTH"), "")
    if limit is not None and length.isdigit() and int(length) > limit:
        req.force_close()
