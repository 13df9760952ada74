import pytest

from tests.portal.team import member


@pytest.fixture
def team(merchant):
    """The merchant's people, one per role, plus a second owner (the checker of the first owner's batches)."""
    m = merchant.merchant
    return {"owner": member(m, "owner"), "owner2": member(m, "owner", f"{m.merchant_no.lower()}-owner2"),
            "finance": member(m, "finance"), "developer": member(m, "developer"), "viewer": member(m, "viewer")}


@pytest.fixture
def other_team(other_merchant):
    m = other_merchant.merchant
    return {"owner": member(m, "owner"), "finance": member(m, "finance")}
