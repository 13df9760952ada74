"""Content negotiation of the signed merchant API: JSON only (interface: every answer is the JSON envelope)."""

from rest_framework.negotiation import DefaultContentNegotiation


class JSONOnlyNegotiation(DefaultContentNegotiation):
    """Every response is the JSON envelope, whatever `Accept` says: the header is not parsed (DRF's parsing of it
    was 4 % of pay/create's CPU) and a merchant whose HTTP client sends `Accept: text/html` still gets JSON
    instead of a 406. Request parsers are chosen as usual."""

    def select_renderer(self, request, renderers, format_suffix=None):
        renderer = renderers[0]
        return renderer, renderer.media_type
