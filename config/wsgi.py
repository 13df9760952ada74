import os

from django.core.wsgi import get_wsgi_application

# Fail closed: without DJANGO_SETTINGS_MODULE, production settings, which refuse to start without their secrets
# (docs/runbook.md, "Start"). Development sets config.settings.local (make run does).
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
application = get_wsgi_application()
