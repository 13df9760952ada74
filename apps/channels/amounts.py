"""Minor units (ours, integers) ↔ an upstream's major-unit numbers, exactly: Decimal exists only on the wire."""

from decimal import Decimal


def major_units(amount: int, minor_unit: int) -> Decimal:
    """150000 minor units of PHP (minor_unit 2) → Decimal('1500.00'); exact, no float on the way."""
    if type(amount) is not int:
        raise TypeError("amounts are integers in minor units")
    return Decimal(amount).scaleb(-minor_unit).quantize(Decimal(1).scaleb(-minor_unit))


def minor_units(value, minor_unit: int) -> int:
    """An upstream's number (int, or Decimal as parsed with parse_float=Decimal) → minor units; ValueError when it is
    not a whole number of minor units."""
    if isinstance(value, float):
        raise TypeError("parse upstream JSON with parse_float=Decimal")
    scaled = Decimal(value).scaleb(minor_unit)
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{value} is not a whole number of minor units (minor_unit {minor_unit})")
    return int(scaled)
