"""The bounds of an amount of money (docs/api.md, "Field formats"): whoever enters it, a merchant through the API or
staff (a balance adjustment, a reversal, a fee refund; in the admin or the CLI), an amount is an integer of minor units
below 2^53 in magnitude, exact in every JSON reader and far inside PostgreSQL's bigint. Checked where it is asked for
and again where it is applied (docs/back-office.md)."""

MAX_AMOUNT = 2**53 - 1


class AmountOutOfBounds(ValueError):
    """An amount outside its bounds; nothing was asked for or moved."""


def amount_check(value, *, what: str = "amount", minimum: int = 1, maximum: int = MAX_AMOUNT) -> int:
    """`value` if it is an integer from `minimum` to `maximum`, else AmountOutOfBounds naming `what` and the bounds."""
    if type(value) is not int or not minimum <= value <= maximum:
        raise AmountOutOfBounds(f"{what} must be an integer of minor units from {minimum} to {maximum}.")
    return value


def signed_amount_check(value, *, what: str = "amount") -> int:
    """A credit (positive) or a debit (negative): not zero, and below 2^53 either way."""
    if type(value) is not int or value == 0 or abs(value) > MAX_AMOUNT:
        raise AmountOutOfBounds(f"{what} must be a non-zero integer of minor units from -{MAX_AMOUNT} to "
                                f"{MAX_AMOUNT}.")
    return value
