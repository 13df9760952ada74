"""URLs of config.settings.bench: the platform's own (config.urls) and the benchmark's reference view."""

from django.urls import path

from bench.views import reference
from config import urls as platform_urls

urlpatterns = [path("bench/reference", reference), *platform_urls.urlpatterns]

handler404 = platform_urls.handler404
handler500 = platform_urls.handler500
