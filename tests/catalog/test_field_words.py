"""Which field a product question names (catalog.field_words): by a word for it, the product's own field first,
a unit of one of its values, a word of its own field's name; a field word inside the product's name is its name."""

from __future__ import annotations

import pytest

from catalog.field_words import asked_field, fits_units, unit_field
from catalog.store import CatalogProduct

NAMES = ["arm reach", "bulb", "cable", "capacity", "cups", "dimensions", "fabric weight", "impedance", "keep warm",
         "keeps hot", "length", "power", "temperature control", "usb ports", "weight", "weight per m²"]


def product(title: str, attributes: dict[str, str], title_zh: str = "") -> CatalogProduct:
    return CatalogProduct(id=title.upper().replace(" ", "-"), title=title, title_zh=title_zh, price=10.0,
                          material="Plastic", category="Things", item_group_id=title, attributes=attributes)


def asked(message: str, item: CatalogProduct | None) -> str:
    name = f"{item.title} {item.title_zh}" if item else ""
    return asked_field(message, NAMES, item, name)


CABLE = product("Charging Cable 1 m", {"length": "1 m", "power": "60 W"}, "充电线 1 米")
BANK = product("Pocket Power Bank 5000 mAh", {"capacity": "5000 mAh", "power": "18 W", "weight": "150 g"},
               "口袋充电宝 5000 毫安")
JUG = product("Tall Jug Kettle 2 L", {"capacity": "2 L", "weight": "1 kg", "temperature control": "50-100 °C"},
              "高水壶 2 升")
TEE = product("Linen Tee", {"fabric weight": "160 g/m²"})
TOWEL = product("Terry Towel", {"weight per m²": "550 g"})
BOTTLE = product("Steel Bottle", {"keeps hot": "12 hours"})
LAMP = product("Crane Arm Lamp", {"arm reach": "70 cm", "bulb": "E14"})
HEADSET = product("Monitor Headset", {"impedance": "80 ohm"})


def test_a_field_the_product_states_beats_a_question_word_for_another():
    assert asked("充电线功率多大", CABLE) == "power"  # "多大" asks the dimensions of other products
    assert asked("how long is the charging cable", CABLE) == ""  # "cable" is the product's name, not a field here


def test_one_word_for_two_fields_is_the_products_own():
    assert asked("what's the gsm of the linen tee?", TEE) == "fabric weight"
    assert asked("what's the gsm of the terry towel?", TOWEL) == "weight per m²"


def test_a_unit_asked_names_the_field_whose_value_has_it():
    assert asked("how many mAh is the pocket power bank?", BANK) == "capacity"
    assert asked("口袋充电宝多少毫安", BANK) == "capacity"
    assert asked("how many ohms is the monitor headset?", HEADSET) == "impedance"


def test_a_unit_after_a_number_is_a_measure_given_not_the_field_asked():
    assert asked("what does the 2 litre jug kettle weigh?", JUG) == "weight"
    assert asked("how much does the 2 l jug kettle hold?", JUG) == "capacity"


def test_a_field_word_used_again_outside_the_products_name_is_asked():
    assert asked("what's the power output of the pocket power bank?", BANK) == "power"


def test_a_word_of_the_products_own_field_names_it():
    assert asked("what temperatures can the tall jug kettle be set to?", JUG) == "temperature control"
    assert asked("arm length of the crane arm lamp?", LAMP) == "arm reach"  # "arm" right before the word asked
    assert asked("what's the length of the crane arm lamp?", LAMP) == "length"  # "arm" only in its name: no guess


@pytest.mark.parametrize("message", ["how long will the steel bottle keep tea hot?", "does the steel bottle keep soup warm?"])
def test_keep_something_hot_is_the_keeps_hot_field(message):
    assert asked(message, BOTTLE) == "keeps hot"


def test_a_suffix_still_names_the_field():
    mug = product("Stone Mug", {"microwave safe": "yes"})
    assert asked_field("is the stone mug microwaveable?", [*NAMES, "microwave safe"], mug, "Stone Mug") == \
        "microwave safe"
    assert asked("is the pocket power bank portable?", BANK) == ""  # "port" is no word of "portable"


CLIP = product("Clip Lamp", {"battery life": "20 hours", "bulb": "E14, max 40 W"}, "夹灯")


def test_a_field_named_that_the_record_lacks_is_asked_even_when_a_stated_value_has_its_unit():
    assert asked("how many watts is the clip lamp?", CLIP) == "power"  # not the bulb's "max 40 W"
    assert asked("夹灯多少瓦", CLIP) == "power"


def test_a_field_word_before_another_modifies_it():
    assert asked("what's the battery capacity of the clip lamp?", CLIP) == "capacity"
    assert asked("what's the battery weight of the clip lamp?", CLIP) == "weight"
    assert asked("夹灯的电池容量是多少", CLIP) == "capacity"
    assert asked("充电线功率多大", CABLE) == "power"  # a question word after a field word asks about that field


def test_a_unit_asked_rules_out_a_value_of_another_measure():
    assert not fits_units("how many mAh is the clip lamp's battery?", "20 hours")
    assert fits_units("how many ml does the tall jug kettle hold?", "2 L")
    assert fits_units("夹灯能用几个小时", "20 hours")
    assert fits_units("米色的是什么材质", "cotton")  # 米 in 米色 (beige) is no unit asked
    assert unit_field("how many mAh is the clip lamp's battery?") == "capacity"


def test_a_unit_no_stated_value_has_names_its_field_not_stated():
    assert asked("how many mAh is the charging cable?", CABLE) == "capacity"
    assert asked("how many decibels is the clip lamp?", CLIP) == "volume limit"
    assert asked("how many cm long is the charging cable?", CABLE) == ""  # "1 m" has the measure: left to the ranking
