"""Error reports to Sentry when SENTRY_DSN is set; nothing at all when it is not (docs/runbook.md, "Health and logs").

No personal data (send_default_pii=False: no user, cookies or client IP) and no request bodies (they hold signed
merchant requests and payee accounts): only the exception, its stack and the request's method and route.
"""


def sentry_init(*, dsn: str, environment: str = "", traces_sample_rate: float = 0.0) -> bool:
    """Initialise the Sentry SDK with the Django and Celery integrations; False (and nothing done) without a DSN."""
    if not dsn:
        return False
    # Imported only with a DSN: sentry_sdk took about a second of every process's start-up.
    import sentry_sdk
    from sentry_sdk.integrations.celery import CeleryIntegration
    from sentry_sdk.integrations.django import DjangoIntegration

    sentry_sdk.init(
        dsn=dsn,
        environment=environment or None,
        integrations=[DjangoIntegration(), CeleryIntegration()],
        send_default_pii=False,
        max_request_body_size="never",
        include_local_variables=False,  # a frame's locals can hold a private key or a payee account
        traces_sample_rate=traces_sample_rate,
    )
    return True
