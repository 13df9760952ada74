from django.urls import re_path

from apps.collection.views import pay_page

# Hosted pages under {pay_base_url}/pay/. Any token shape reaches the view, so unknown links get its HTML 404.
urlpatterns = [re_path(r"^(?P<pay_token>.*)$", pay_page, name="pay-page")]
