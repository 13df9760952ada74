"""Reading an upstream's list to its end, or answering "unknown" (docs/channels.md, "Lookups by our reference").

A lookup by our reference (is there a transfer, payout or invoice of this order?) may answer "none" only after it has
read every page the upstream holds for the question and matched our reference itself on each object, since an
upstream may page its answer or ignore the filter. Anything less raises LookupUnknown: the order then stays where it
is, is not sent again as new and is not failed. The adapters say how their upstream pages (its cursor, its "more"
flag); this module walks the pages within a bound.
"""

import logging
from collections.abc import Callable

from apps.channels.base import LookupUnknown, UpstreamRejected, UpstreamUnavailable

logger = logging.getLogger(__name__)

# Objects asked for per page (the most PayMongo's and Xendit's list endpoints document), and pages read before a
# lookup gives up as unknown: 500 objects under one reference is far past any order of ours (an upstream that filters
# answers one or two), so reaching the bound means the upstream ignores our filter on a long history, which a person
# must look at. The submission leases are sized by it (apps.channels.paymongo, apps.payout.failover).
LOOKUP_PAGE_SIZE = 100
LOOKUP_PAGES = 5


def every_page(*, where: str, page: Callable[[str | None], tuple[object, bool | None]]) -> list[dict]:
    """Every object of an upstream list, in order. `page(cursor)` reads the page after `cursor` (None: the first) and
    returns (its objects, whether more follow: None when the answer does not say); the next cursor is the id of a
    page's last object.

    Raises LookupUnknown when the list cannot be read to its end: more than LOOKUP_PAGES pages, an error on a page
    after the first, a refusal (4xx) of any page, an answer that is no list of objects with ids, does not say whether
    more follow, or repeats objects (a cursor the upstream did not honour). On the first page an UpstreamUnavailable
    is raised as it came (UpstreamDeclined included: nothing was asked)."""
    listed: list[dict] = []
    seen: set[str] = set()
    cursor = None
    for number in range(1, LOOKUP_PAGES + 1):
        try:
            objects, more = page(cursor)
        except UpstreamRejected as exc:
            raise LookupUnknown(f"{where}: page {number} refused ({exc})") from None
        except UpstreamUnavailable as exc:
            if number == 1:
                raise
            # Declined or not, a later page's failure leaves the pages before it proving nothing about the rest.
            raise LookupUnknown(f"{where}: page {number} not read ({exc})") from None
        if not isinstance(objects, list) or not all(isinstance(o, dict) and o.get("id") for o in objects):
            raise _unknown(f"{where}: page {number} is not a list of objects with ids")
        ids = [str(o["id"]) for o in objects]
        if seen.intersection(ids) or len(set(ids)) != len(ids):
            raise _unknown(f"{where}: page {number} repeats objects already listed (the cursor was not honoured)")
        seen.update(ids)
        listed.extend(objects)
        if more is None:
            raise _unknown(f"{where}: page {number} does not say whether more follow")
        if not more:
            return listed
        if not objects:
            raise _unknown(f"{where}: page {number} is empty but says more follow")
        cursor = ids[-1]
    raise _unknown(f"{where}: more than {LOOKUP_PAGES} pages of {LOOKUP_PAGE_SIZE}: the upstream may not filter by "
                   f"our reference; a person must look in its dashboard")


def _unknown(message: str) -> LookupUnknown:
    """A list that will not read differently when asked again: logged for a person, not only retried."""
    logger.error("lookup unknown: %s", message)
    return LookupUnknown(message)
