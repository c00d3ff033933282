"""PII masking (core/pii.py): tracking numbers and phone numbers in their written formats are masked; amounts, dates,
times, quantities and prices are left readable."""

from __future__ import annotations

import pytest

from core.pii import find_pii, mask

# Tracking numbers as carriers print them; the demo ones come from knowledge/demo/orders.csv.
TRACKING_NUMBERS = [
    "1Z9A72W10301846529",           # UPS (demo order NW-106112)
    "JD014600003828473621",         # the demo shop's DHL numbers
    "9400100000000000000000",       # USPS, 22 digits
    "94001000000000000000",         # USPS, 20 digits
    "9400 1000 0000 0000 0000 00",  # USPS as printed on a label
    "EC123456789US",                # USPS international (UPU S10)
    "123456789012",                 # FedEx, 12 digits
    "123456789012345",              # FedEx, 15 digits
]

PHONES = ["555-1234", "(555) 123-4567", "555.123.4567", "555-123-4567", "+44 20 7946 0958", "+1-555-123-4567",
          "+1 415 555 0134", "138 0013 8000", "13800138000", "020 7946 0958"]

# Not personal data: what customers write about money, dates, times and quantities.
ORDINARY = ["$12.99", "2026-12-04", "30 days", "10:30", "2026-12-04 to 2026-12-05", "€149.00", "1,299.00 EUR",
            "2x Organic Cotton T-Shirt (M)", "Power Bank 10000 mAh", "Electric Kettle 1.7 L", "Jeans (32/32)",
            "12/04/2026", "between 9:00 and 17:00", "10:30-11:45", "the 2025-2026 catalogue", "3 items", "qty 12",
            "order of 100-2000 units", "14 days", "3.5 kg", "Total: $1,234.56"]


@pytest.mark.parametrize("number", TRACKING_NUMBERS)
def test_carrier_tracking_numbers_are_masked_as_tracking(number):
    assert mask(f"my parcel {number} has not arrived") == "my parcel [tracking] has not arrived"


@pytest.mark.parametrize("phone", PHONES)
def test_phone_numbers_in_common_formats_are_masked_as_phone(phone):
    assert mask(f"call me on {phone} please") == "call me on [phone] please"


@pytest.mark.parametrize("text", ORDINARY)
def test_amounts_dates_times_and_quantities_are_not_masked(text):
    assert mask(text) == text and find_pii(text) == []


def test_a_tracking_number_next_to_chinese_text_is_masked():
    assert mask("运单号JD014600003828473621还没到") == "运单号[tracking]还没到"


def test_an_order_tool_answer_keeps_status_carrier_and_date_readable():
    answer = ("Order NW-104233 (1x Stoneware Mug Set (4 pcs), 1x Linen Tea Towel Set) is **shipped**. It travels "
              "with DHL, tracking number JD014600003828473621. Expected delivery: 2026-11-20.")
    assert mask(answer) == ("Order [order] (1x Stoneware Mug Set (4 pcs), 1x Linen Tea Towel Set) is **shipped**. "
                            "It travels with DHL, tracking number [tracking]. Expected delivery: 2026-11-20.")
