"""A small Merchant Center feed the catalog tests share (written here so each test can change a copy of it), and the
catalog built from it with the real encoder, a real Chroma store and SQLite."""

from __future__ import annotations

from pathlib import Path

COLUMNS = ["id", "title", "description", "price", "sale_price", "availability", "brand", "gtin", "color", "size",
           "material", "product_type", "item_group_id", "product_detail", "title_zh", "description_zh", "product_type_zh"]
KETTLES = ("Home > Kitchen > Kettles", "家居 > 厨房 > 电水壶")
THROWS = ("Home > Bedding > Throw Blankets", "家居 > 床上用品 > 毯子")
TOWELS = ("Home > Towels > Bath Towels", "家居 > 毛巾 > 浴巾")
LAMPS = ("Home > Lighting > Desk Lamps", "家居 > 灯具 > 台灯")
SWEATERS = ("Apparel > Knitwear > Sweaters", "服装 > 针织 > 毛衣")

# id, title, description, price, sale, availability, gtin, color, size, material, type, group, detail, title_zh, desc_zh
PRODUCTS = [
    ("K1", "Family Electric Kettle 2.2 L", "Our largest kettle, nine cups at once.", "59.90 USD", "", "in_stock",
     "2000000000015", "Silver", "", "Stainless steel", KETTLES, "family-kettle",
     "Specifications:capacity:2.2 L,Specifications:power:3000 W", "家庭电水壶 2.2 升", "容量最大的电水壶。"),
    ("K2", "Travel Kettle 0.8 L", "A light dual-voltage kettle for trips.", "24.90 USD", "", "in_stock",
     "2000000000022", "White", "", "Plastic", KETTLES, "travel-kettle",
     "Specifications:capacity:0.8 L,Specifications:voltage:110-240 V", "旅行电水壶 0.8 升", "轻便双电压旅行水壶。"),
    ("B1", "Cotton Throw Blanket - Blue", "A soft woven cotton throw, 130 x 170 cm.", "39.90 USD", "", "in_stock",
     "2000000000039", "Blue", "", "100% cotton", THROWS, "cotton-throw",
     "Specifications:dimensions:130 x 170 cm,Care:care:machine wash at 30 °C", "纯棉盖毯 蓝色", "柔软纯棉编织盖毯。"),
    ("B2", "Cotton Throw Blanket - Grey", "A soft woven cotton throw, 130 x 170 cm.", "39.90 USD", "", "in_stock",
     "2000000000046", "Grey", "", "100% cotton", THROWS, "cotton-throw",
     "Specifications:dimensions:130 x 170 cm,Care:care:machine wash at 30 °C", "纯棉盖毯 灰色", "柔软纯棉编织盖毯。"),
    ("B3", "Merino Wool Throw - Blue", "A fine merino wool throw, warm and light.", "89.00 USD", "", "in_stock",
     "2000000000053", "Blue", "", "100% merino wool", THROWS, "merino-throw",
     "Specifications:dimensions:140 x 180 cm,Care:care:hand wash cold", "美利奴羊毛盖毯 蓝色", "细美利奴羊毛盖毯。"),
    ("B4", "Fleece Blanket - Red", "A warm polyester fleece blanket for the sofa.", "19.90 USD", "", "out_of_stock",
     "2000000000060", "Red", "", "Polyester fleece", THROWS, "fleece-blanket",
     "Specifications:dimensions:150 x 200 cm", "抓绒毯 红色", "保暖涤纶抓绒毯。"),
    ("T1", "Organic Cotton Bath Towel", "A thick terry towel in organic cotton.", "24.90 USD", "", "in_stock",
     "2000000000077", "White", "Bath", "100% organic cotton", TOWELS, "organic-towel",
     "Care:care:machine wash at 60 °C", "有机棉浴巾", "有机棉厚毛圈浴巾。"),
    ("T2", "Quick-Dry Microfibre Towel", "A light towel that dries fast, for the gym.", "16.90 USD", "", "in_stock",
     "2000000000084", "Blue", "Bath", "Microfibre (polyester and polyamide)", TOWELS, "quick-towel",
     "", "速干超细纤维毛巾", "轻薄速干毛巾。"),
    ("L1", "Smart LED Desk Lamp", "A dimmable LED desk lamp with app control.", "64.50 USD", "", "in_stock",
     "2000000000091", "White", "", "Aluminium", LAMPS, "smart-lamp",
     "Specifications:power:10 W,Features:dimmable:yes", "智能 LED 台灯", "可调光 LED 台灯。"),
    ("L2", "Clip-On Reading Lamp", "A rechargeable clip-on lamp for books.", "19.90 USD", "", "in_stock",
     "2000000000107", "Black", "", "Plastic", LAMPS, "clip-lamp",
     "Specifications:power:3 W,Specifications:battery life:20 hours", "夹式阅读灯", "可充电夹式阅读灯。"),
    ("L3", "Swing-Arm Desk Lamp", "A classic swing-arm lamp with a weighted base.", "44.90 USD", "35.00 USD", "in_stock",
     "2000000000114", "Black", "", "Steel", LAMPS, "swing-lamp",
     "Specifications:bulb:E27, max 40 W, not included", "摇臂台灯", "经典摇臂台灯。"),
    ("S1", "Merino Wool Sweater - Navy / M", "A fine crew-neck sweater in merino wool.", "89.00 USD", "", "in_stock",
     "2000000000121", "Navy", "M", "100% merino wool", SWEATERS, "merino-sweater",
     "Care:care:hand wash cold", "美利奴羊毛衫 藏青色 M", "细针美利奴羊毛衫。"),
    ("S2", "Merino Wool Sweater - Navy / L", "A fine crew-neck sweater in merino wool.", "89.00 USD", "", "out_of_stock",
     "2000000000138", "Navy", "L", "100% merino wool", SWEATERS, "merino-sweater",
     "Care:care:hand wash cold", "美利奴羊毛衫 藏青色 L", "细针美利奴羊毛衫。"),
]


def rows() -> list[dict[str, str]]:
    out = []
    for (pid, title, desc, price, sale, avail, gtin, color, size, material, (ptype, ptype_zh), group, detail,
         title_zh, desc_zh) in PRODUCTS:
        out.append({"id": pid, "title": title, "description": desc, "price": price, "sale_price": sale,
                    "availability": avail, "brand": "Northwind", "gtin": gtin, "color": color, "size": size,
                    "material": material, "product_type": ptype, "item_group_id": group, "product_detail": detail,
                    "title_zh": title_zh, "description_zh": desc_zh, "product_type_zh": ptype_zh})
    return out


def write_feed(path: Path, products: list[dict[str, str]] | None = None, extra_lines: list[str] = ()) -> Path:
    """The feed as a Merchant Center TSV; ``extra_lines`` are appended raw (bad rows)."""
    lines = ["\t".join(COLUMNS)]
    lines += ["\t".join(row.get(c, "") for c in COLUMNS) for row in (rows() if products is None else products)]
    lines += list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def open_catalog(folder: Path, encoder):
    from catalog.store import Catalog
    from storage.db import Database

    folder.mkdir(parents=True, exist_ok=True)
    return Catalog(Database(f"sqlite:///{folder / 'catalog.db'}"), encoder, chroma_path=folder / "chroma")
