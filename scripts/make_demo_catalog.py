"""Write the demo shop's product feed, catalog/demo/catalog.tsv, for Northwind Goods (knowledge/demo).

Deterministic (seeded): running it again writes the same file. The feed is in the Google Merchant Center product data
format, tab-separated, plus Tandem's optional Chinese columns title_zh, description_zh and product_type_zh (see
docs/catalog.md). Variants share an item_group_id and differ by color and/or size; every GTIN-13 has a valid check
digit (prefix 200, GS1's range for in-store numbers, so none is a real product's). The products named in the demo
orders (knowledge/demo/orders.csv) are in it under the same names.

    .venv/bin/python scripts/make_demo_catalog.py
"""

# ruff: noqa: E501  (the product table reads best one family per few lines; its sentences are not wrapped)
from __future__ import annotations

import csv
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from catalog.feed import gtin_check_digit  # noqa: E402

OUT = REPO / "catalog" / "demo" / "catalog.tsv"
COLUMNS = ["id", "title", "description", "link", "image_link", "price", "sale_price", "availability", "brand", "gtin",
           "mpn", "color", "size", "material", "pattern", "product_type", "item_group_id", "product_detail",
           "title_zh", "description_zh", "product_type_zh"]
ZH_COLOUR = {"Black": "黑色", "White": "白色", "Grey": "灰色", "Silver": "银色", "Blue": "蓝色", "Navy": "藏青色",
             "Red": "红色", "Green": "绿色", "Olive": "橄榄绿", "Pink": "粉色", "Cream": "奶油色", "Natural": "原木色",
             "Brass": "黄铜色", "Charcoal": "炭灰色", "Yellow": "黄色", "Brown": "棕色", "Beige": "米色"}
W = "Northwind"

# (handle, title, title_zh, product_type, product_type_zh, material, price, colours, sizes, size price steps,
#  description, description_zh, product_detail items, brand)
FAMILIES: list[dict] = [
    # kettles
    dict(handle="electric-kettle-17", title="Electric Kettle 1.7 L", zh="电水壶 1.7 升", type="Home > Kitchen > Kettles",
         type_zh="家居 > 厨房 > 电水壶", material="Stainless steel", price=49.90, colours=["Silver", "Black", "White"],
         desc="A 1.7-litre stainless steel kettle that boils a full jug in about four minutes. Auto shut-off and boil-dry protection; the lid opens at the touch of a button.",
         desc_zh="1.7 升不锈钢电水壶，约四分钟烧开满壶水，带自动断电和防干烧保护。",
         detail=["Specifications:capacity:1.7 L", "Specifications:power:2200 W", "Specifications:voltage:230 V",
                 "Specifications:dimensions:23 x 16 x 25 cm", "Specifications:weight:1.2 kg",
                 "Features:auto shut-off:yes", "Care:care:wipe the outside with a damp cloth; descale monthly"]),
    dict(handle="glass-kettle-15", title="Glass Electric Kettle 1.5 L", zh="玻璃电水壶 1.5 升", type="Home > Kitchen > Kettles",
         type_zh="家居 > 厨房 > 电水壶", material="Borosilicate glass", price=39.90, colours=["Clear"],
         desc="A borosilicate glass kettle with a blue LED that lights while it boils. 1.5 litres, 2000 W.",
         desc_zh="高硼硅玻璃电水壶，烧水时亮蓝色灯，容量 1.5 升，功率 2000 瓦。",
         detail=["Specifications:capacity:1.5 L", "Specifications:power:2000 W", "Specifications:voltage:230 V",
                 "Specifications:dimensions:22 x 15 x 24 cm", "Features:auto shut-off:yes"]),
    dict(handle="gooseneck-kettle", title="Gooseneck Pour-Over Kettle 1.0 L", zh="手冲鹅颈电水壶 1.0 升",
         type="Home > Kitchen > Kettles", type_zh="家居 > 厨房 > 电水壶", material="Stainless steel", price=79.00,
         colours=["Black", "White"],
         desc="A temperature-controlled gooseneck kettle for pour-over coffee and tea: set 40-100 °C in one-degree steps; keeps warm for 60 minutes.",
         desc_zh="可控温手冲鹅颈壶，40 至 100 °C 逐度设定，保温 60 分钟，适合手冲咖啡和泡茶。",
         detail=["Specifications:capacity:1.0 L", "Specifications:power:1200 W", "Specifications:voltage:230 V",
                 "Features:temperature control:40-100 °C", "Features:keep warm:60 minutes"]),
    dict(handle="family-kettle-22", title="Family Electric Kettle 2.2 L", zh="家庭大容量电水壶 2.2 升",
         type="Home > Kitchen > Kettles", type_zh="家居 > 厨房 > 电水壶", material="Stainless steel", price=59.90,
         colours=["Silver", "Red"],
         desc="Our largest kettle: 2.2 litres, enough for nine cups at once, with a 360° base and a water window on both sides.",
         desc_zh="我们容量最大的电水壶：2.2 升，一次可冲九杯，360° 底座，两侧水位窗。",
         detail=["Specifications:capacity:2.2 L", "Specifications:power:3000 W", "Specifications:voltage:230 V",
                 "Specifications:cups:9", "Features:auto shut-off:yes"]),
    dict(handle="travel-kettle", title="Compact Travel Kettle 0.8 L", zh="便携旅行电水壶 0.8 升",
         type="Home > Kitchen > Kettles", type_zh="家居 > 厨房 > 电水壶", material="Plastic", price=24.90,
         colours=["White", "Blue"],
         desc="A light 0.8-litre travel kettle with dual voltage (110-240 V) and two cups that store inside it.",
         desc_zh="轻便的 0.8 升旅行电水壶，支持 110-240 V 双电压，内附两只杯子。",
         detail=["Specifications:capacity:0.8 L", "Specifications:power:1000 W", "Specifications:voltage:110-240 V",
                 "Specifications:weight:0.6 kg"]),
    dict(handle="stovetop-kettle", title="Stovetop Whistling Kettle 2.5 L", zh="燃气鸣笛水壶 2.5 升",
         type="Home > Kitchen > Kettles", type_zh="家居 > 厨房 > 电水壶", material="Enamelled steel", price=34.50,
         colours=["Red", "Blue", "Cream"],
         desc="An enamelled steel kettle that whistles when the water boils; works on gas, electric and induction hobs.",
         desc_zh="搪瓷钢鸣笛水壶，水开时鸣笛提醒，适用于燃气灶、电炉和电磁炉。",
         detail=["Specifications:capacity:2.5 L", "Specifications:hob:gas, electric and induction"]),
    # blankets and throws
    dict(handle="cotton-throw", title="Cotton Throw Blanket", zh="纯棉盖毯", type="Home > Bedding > Throw Blankets",
         type_zh="家居 > 床上用品 > 毯子", material="100% cotton", price=39.90, colours=["Blue", "Grey", "Cream", "Green"],
         desc="A soft woven throw in 100% cotton, 130 x 170 cm, with knotted fringes. Machine washable at 30 °C.",
         desc_zh="100% 纯棉编织盖毯，130 x 170 厘米，带流苏，可 30 °C 机洗。",
         detail=["Specifications:dimensions:130 x 170 cm", "Specifications:weight:1.1 kg",
                 "Care:care:machine wash at 30 °C, do not tumble dry"]),
    dict(handle="merino-throw", title="Merino Wool Throw", zh="美利奴羊毛盖毯", type="Home > Bedding > Throw Blankets",
         type_zh="家居 > 床上用品 > 毯子", material="100% merino wool", price=89.00, colours=["Grey", "Navy", "Blue"],
         desc="A fine merino wool throw, 140 x 180 cm: warm, breathable and lighter than it looks.",
         desc_zh="细美利奴羊毛盖毯，140 x 180 厘米，保暖透气，轻盈。",
         detail=["Specifications:dimensions:140 x 180 cm", "Specifications:weight:1.3 kg",
                 "Care:care:hand wash cold or dry clean"]),
    dict(handle="chunky-knit-throw", title="Chunky Knit Throw", zh="粗针织盖毯", type="Home > Bedding > Throw Blankets",
         type_zh="家居 > 床上用品 > 毯子", material="Acrylic", price=54.90, colours=["Cream", "Pink", "Grey"],
         desc="A chunky hand-knit look throw in soft acrylic yarn, 120 x 150 cm.",
         desc_zh="柔软腈纶粗针织盖毯，120 x 150 厘米。",
         detail=["Specifications:dimensions:120 x 150 cm", "Care:care:hand wash cold, dry flat"]),
    dict(handle="fleece-blanket", title="Fleece Blanket", zh="抓绒毯", type="Home > Bedding > Throw Blankets",
         type_zh="家居 > 床上用品 > 毯子", material="Polyester fleece", price=19.90, colours=["Blue", "Red", "Grey"],
         desc="A warm polyester fleece blanket, 150 x 200 cm, anti-pilling, for the sofa or the car.",
         desc_zh="保暖涤纶抓绒毯，150 x 200 厘米，不易起球，适合沙发或车内。",
         detail=["Specifications:dimensions:150 x 200 cm", "Care:care:machine wash at 40 °C"]),
    # towels
    dict(handle="organic-bath-towel", title="Organic Cotton Bath Towel", zh="有机棉浴巾", type="Home > Towels > Bath Towels",
         type_zh="家居 > 毛巾 > 浴巾", material="100% organic cotton", price=24.90, colours=["White", "Grey", "Blue", "Green"],
         sizes=["Hand", "Bath", "Bath Sheet"], steps=[-12.0, 0.0, 10.0],
         desc="A thick 600 g/m² terry towel in 100% organic cotton (GOTS certified).",
         desc_zh="100% 有机棉厚毛圈浴巾，600 克/平方米，GOTS 认证。",
         detail=["Specifications:weight per m²:600 g", "Specifications:certification:GOTS",
                 "Care:care:machine wash at 60 °C, tumble dry low"]),
    dict(handle="quick-dry-towel", title="Quick-Dry Microfibre Towel", zh="速干超细纤维毛巾", type="Home > Towels > Bath Towels",
         type_zh="家居 > 毛巾 > 浴巾", material="Microfibre (polyester and polyamide)", price=16.90, colours=["Blue", "Grey"],
         sizes=["Bath", "Bath Sheet"], steps=[0.0, 6.0],
         desc="A light microfibre towel that dries three times faster than cotton; packs small for the gym and travel.",
         desc_zh="轻薄超细纤维毛巾，比棉干得快三倍，适合健身和旅行。",
         detail=["Care:care:machine wash at 40 °C, no fabric softener"]),
    dict(handle="linen-tea-towels", title="Linen Tea Towel Set", zh="亚麻茶巾套装", type="Home > Towels > Tea Towels",
         type_zh="家居 > 毛巾 > 茶巾", material="100% linen", price=18.90, colours=["Natural", "Blue"],
         desc="Three stonewashed linen tea towels, 50 x 70 cm each; lint-free for glasses.",
         desc_zh="三条石洗亚麻茶巾，每条 50 x 70 厘米，擦玻璃杯不掉毛。",
         detail=["Specifications:pieces:3", "Specifications:dimensions:50 x 70 cm", "Care:care:machine wash at 40 °C"]),
    # bedding
    dict(handle="percale-duvet-cover", title="Percale Duvet Cover", zh="精梳棉被套", type="Home > Bedding > Duvet Covers",
         type_zh="家居 > 床上用品 > 被套", material="100% cotton percale", price=59.00, colours=["White", "Grey"],
         sizes=["Single", "Double", "Queen", "King"], steps=[-15.0, 0.0, 10.0, 20.0],
         desc="A crisp 200-thread-count cotton percale duvet cover with a button closure.",
         desc_zh="200 支精梳棉被套，挺括清爽，纽扣开合。",
         detail=["Specifications:thread count:200", "Care:care:machine wash at 60 °C"]),
    dict(handle="linen-sheet-set", title="Linen Sheet Set", zh="亚麻床单套装", type="Home > Bedding > Sheets",
         type_zh="家居 > 床上用品 > 床单", material="100% linen", price=119.00, colours=["Natural", "White"],
         sizes=["Double", "Queen", "King"], steps=[0.0, 20.0, 40.0],
         desc="A stonewashed linen fitted sheet and two pillowcases; softens with every wash.",
         desc_zh="石洗亚麻床笠和两只枕套，越洗越柔软。",
         detail=["Specifications:pieces:3", "Care:care:machine wash at 40 °C"]),
    dict(handle="down-alt-pillow", title="Down-Alternative Pillow", zh="仿羽绒枕头", type="Home > Bedding > Pillows",
         type_zh="家居 > 床上用品 > 枕头", material="Polyester microfibre fill, cotton cover", price=29.90, colours=["White"],
         sizes=["Standard", "King"], steps=[0.0, 8.0],
         desc="A hypoallergenic down-alternative pillow, medium firm, machine washable.",
         desc_zh="防过敏仿羽绒枕，中等软硬，可机洗。",
         detail=["Specifications:firmness:medium", "Care:care:machine wash at 40 °C"]),
    # lamps
    dict(handle="smart-led-desk-lamp", title="Smart LED Desk Lamp", zh="智能 LED 台灯", type="Home > Lighting > Desk Lamps",
         type_zh="家居 > 灯具 > 台灯", material="Aluminium", price=64.50, colours=["White", "Black"],
         desc="A dimmable LED desk lamp with five colour temperatures, a USB-C charging port and app control.",
         desc_zh="可调光 LED 台灯，五档色温，带 USB-C 充电口，支持手机控制。",
         detail=["Specifications:power:10 W", "Specifications:colour temperature:2700-6500 K",
                 "Specifications:dimensions:40 x 18 x 45 cm", "Features:dimmable:yes", "Features:usb charging:USB-C"]),
    dict(handle="swing-arm-desk-lamp", title="Swing-Arm Desk Lamp", zh="摇臂台灯", type="Home > Lighting > Desk Lamps",
         type_zh="家居 > 灯具 > 台灯", material="Steel", price=44.90, colours=["Black", "Brass"],
         desc="A classic swing-arm lamp with a weighted base; takes an E27 bulb (not included).",
         desc_zh="经典摇臂台灯，配重底座，E27 灯头（不含灯泡）。",
         detail=["Specifications:bulb:E27, max 40 W, not included", "Specifications:arm reach:60 cm"]),
    dict(handle="clip-reading-lamp", title="Clip-On Reading Lamp", zh="夹式阅读灯", type="Home > Lighting > Desk Lamps",
         type_zh="家居 > 灯具 > 台灯", material="Plastic", price=19.90, colours=["White", "Black"],
         desc="A rechargeable clip-on LED lamp for books and desks; up to 20 hours on a charge.",
         desc_zh="可充电夹式 LED 阅读灯，一次充电最长使用 20 小时。",
         detail=["Specifications:power:3 W", "Specifications:battery life:20 hours", "Features:dimmable:yes"]),
    dict(handle="architect-desk-lamp", title="Architect Desk Lamp", zh="建筑师台灯", type="Home > Lighting > Desk Lamps",
         type_zh="家居 > 灯具 > 台灯", material="Steel", price=74.00, colours=["Black", "White"],
         desc="A spring-balanced architect lamp with a desk clamp and an LED head.",
         desc_zh="弹簧平衡建筑师台灯，桌夹固定，LED 灯头。",
         detail=["Specifications:power:8 W", "Specifications:arm reach:90 cm"]),
    dict(handle="ceramic-table-lamp", title="Ceramic Table Lamp", zh="陶瓷台面灯", type="Home > Lighting > Table Lamps",
         type_zh="家居 > 灯具 > 台面灯", material="Ceramic base, linen shade", price=69.00, colours=["White", "Blue", "Green"],
         desc="A glazed ceramic lamp with a linen shade, 48 cm tall.",
         desc_zh="釉面陶瓷灯座配亚麻灯罩，高 48 厘米。",
         detail=["Specifications:height:48 cm", "Specifications:bulb:E27, max 60 W, not included"]),
    # headphones
    dict(handle="nc-headphones", title="Noise-Cancelling Headphones", zh="降噪耳机", type="Electronics > Audio > Headphones",
         type_zh="电子产品 > 音频 > 耳机", material="Plastic and protein leather", price=149.00, colours=["Black", "Silver"],
         desc="Over-ear Bluetooth headphones with active noise cancelling and 30 hours of battery life.",
         desc_zh="头戴式蓝牙降噪耳机，续航 30 小时。",
         detail=["Specifications:battery life:30 hours", "Specifications:bluetooth:5.3", "Specifications:weight:250 g",
                 "Features:noise cancelling:active", "Warranty:warranty:2 years"]),
    dict(handle="wireless-earbuds", title="Wireless Earbuds", zh="无线耳塞", type="Electronics > Audio > Headphones",
         type_zh="电子产品 > 音频 > 耳机", material="Plastic", price=79.00, colours=["Black", "White"],
         desc="True wireless earbuds with a charging case: 6 hours per charge, 24 with the case; IPX4 splash-proof.",
         desc_zh="真无线耳塞，单次 6 小时，配合充电盒 24 小时，IPX4 防溅水。",
         detail=["Specifications:battery life:6 hours (24 with case)", "Specifications:bluetooth:5.2",
                 "Specifications:water resistance:IPX4", "Warranty:warranty:2 years"]),
    dict(handle="studio-headphones", title="Wired Studio Headphones", zh="有线监听耳机", type="Electronics > Audio > Headphones",
         type_zh="电子产品 > 音频 > 耳机", material="Aluminium and plastic", price=99.00, colours=["Black"],
         desc="Closed-back wired headphones for mixing and listening, with a detachable 3 m cable.",
         desc_zh="封闭式有线监听耳机，附 3 米可拆卸线。",
         detail=["Specifications:impedance:32 ohm", "Specifications:cable:3 m detachable", "Warranty:warranty:2 years"]),
    dict(handle="kids-headphones", title="Kids Headphones", zh="儿童耳机", type="Electronics > Audio > Headphones",
         type_zh="电子产品 > 音频 > 耳机", material="Plastic", price=29.90, colours=["Blue", "Pink"],
         desc="Volume-limited (85 dB) wired headphones for children aged 3 and up.",
         desc_zh="限音量（85 分贝）儿童有线耳机，适合 3 岁以上。",
         detail=["Specifications:volume limit:85 dB", "Specifications:age:3+"]),
    dict(handle="bt-speaker", title="Wireless Bluetooth Speaker", zh="无线蓝牙音箱", type="Electronics > Audio > Speakers",
         type_zh="电子产品 > 音频 > 音箱", material="Fabric and plastic", price=69.90, colours=["Black", "Blue", "Red"],
         desc="A portable waterproof (IP67) speaker with 12 hours of play.",
         desc_zh="便携防水（IP67）蓝牙音箱，播放 12 小时。",
         detail=["Specifications:battery life:12 hours", "Specifications:water resistance:IP67", "Warranty:warranty:2 years"]),
    # apparel
    dict(handle="merino-sweater", title="Merino Wool Sweater", zh="美利奴羊毛衫", type="Apparel > Knitwear > Sweaters",
         type_zh="服装 > 针织 > 毛衣", material="100% merino wool", price=89.00, colours=["Navy", "Grey", "Green"],
         sizes=["S", "M", "L", "XL"], steps=[0.0, 0.0, 0.0, 0.0],
         desc="A fine-gauge crew-neck sweater in extra-fine merino wool; soft enough to wear next to the skin.",
         desc_zh="细针圆领毛衣，特细美利奴羊毛，贴身穿着也柔软。",
         detail=["Specifications:fit:regular", "Care:care:hand wash cold or machine wool cycle, dry flat"]),
    dict(handle="cashmere-crew", title="Cashmere Crew Neck", zh="羊绒圆领衫", type="Apparel > Knitwear > Sweaters",
         type_zh="服装 > 针织 > 毛衣", material="100% cashmere", price=149.00, colours=["Beige", "Charcoal"],
         sizes=["S", "M", "L", "XL"], steps=[0.0, 0.0, 0.0, 0.0],
         desc="A two-ply cashmere crew neck, relaxed fit.",
         desc_zh="双股羊绒圆领衫，宽松版型。",
         detail=["Specifications:fit:relaxed", "Care:care:hand wash cold or dry clean"]),
    dict(handle="cable-knit-sweater", title="Cotton Cable-Knit Sweater", zh="纯棉麻花毛衣", type="Apparel > Knitwear > Sweaters",
         type_zh="服装 > 针织 > 毛衣", material="100% cotton", price=59.00, colours=["Cream", "Navy"],
         sizes=["S", "M", "L", "XL"], steps=[0.0, 0.0, 0.0, 0.0],
         desc="A chunky cable-knit sweater in soft cotton for spring evenings.",
         desc_zh="柔软纯棉麻花针织毛衣，适合春季傍晚。",
         detail=["Specifications:fit:regular", "Care:care:machine wash at 30 °C"]),
    dict(handle="organic-tshirt", title="Organic Cotton T-Shirt", zh="有机棉 T恤", type="Apparel > Tops > T-Shirts",
         type_zh="服装 > 上衣 > T恤", material="100% organic cotton", price=24.90, colours=["White", "Black", "Olive"],
         sizes=["S", "M", "L", "XL"], steps=[0.0, 0.0, 0.0, 0.0],
         desc="A classic crew-neck T-shirt in 180 g organic cotton jersey.",
         desc_zh="180 克有机棉平纹圆领 T恤。",
         detail=["Specifications:fabric weight:180 g/m²", "Care:care:machine wash at 30 °C"]),
    dict(handle="slim-fit-jeans", title="Slim Fit Jeans", zh="修身牛仔裤", type="Apparel > Bottoms > Jeans",
         type_zh="服装 > 裤装 > 牛仔裤", material="98% cotton, 2% elastane", price=69.00, colours=["Blue", "Black"],
         sizes=["30/32", "32/32", "34/32", "36/32"], steps=[0.0, 0.0, 0.0, 0.0],
         desc="Slim fit stretch denim jeans with a mid rise.",
         desc_zh="中腰修身弹力牛仔裤。",
         detail=["Specifications:rise:mid", "Care:care:machine wash at 30 °C inside out"]),
    dict(handle="canvas-belt", title="Canvas Belt", zh="帆布腰带", type="Apparel > Accessories > Belts",
         type_zh="服装 > 配饰 > 腰带", material="Cotton canvas, steel buckle", price=19.90, colours=["Navy", "Olive", "Black"],
         desc="A woven canvas belt with a brushed steel buckle; cut to length.",
         desc_zh="编织帆布腰带，拉丝钢扣，可裁剪长度。",
         detail=["Specifications:width:3.5 cm", "Specifications:length:120 cm, cut to fit"]),
    # mugs and kitchen
    dict(handle="stoneware-mug-set", title="Stoneware Mug Set (4 pcs)", zh="粗陶马克杯四件套", type="Home > Kitchen > Mugs",
         type_zh="家居 > 厨房 > 马克杯", material="Stoneware", price=34.90, colours=["Cream", "Blue", "Grey"],
         desc="Four reactive-glaze stoneware mugs, 350 ml each. Dishwasher and microwave safe.",
         desc_zh="四只窑变釉粗陶马克杯，每只 350 毫升，可用洗碗机和微波炉。",
         detail=["Specifications:capacity:350 ml", "Specifications:pieces:4", "Care:dishwasher safe:yes",
                 "Care:microwave safe:yes"]),
    dict(handle="ceramic-mug", title="Ceramic Mug 350 ml", zh="陶瓷马克杯 350 毫升", type="Home > Kitchen > Mugs",
         type_zh="家居 > 厨房 > 马克杯", material="Ceramic", price=9.90, colours=["White", "Black", "Yellow", "Blue"],
         desc="A simple glazed ceramic mug, 350 ml.",
         desc_zh="简约釉面陶瓷马克杯，350 毫升。",
         detail=["Specifications:capacity:350 ml", "Care:dishwasher safe:yes"]),
    dict(handle="travel-mug", title="Insulated Travel Mug 450 ml", zh="保温随行杯 450 毫升", type="Home > Kitchen > Mugs",
         type_zh="家居 > 厨房 > 马克杯", material="Stainless steel", price=22.90, colours=["Silver", "Black", "Green"],
         desc="A double-wall vacuum-insulated mug: hot for 6 hours, cold for 12; leak-proof lid.",
         desc_zh="双层真空保温杯：保热 6 小时，保冷 12 小时，防漏杯盖。",
         detail=["Specifications:capacity:450 ml", "Features:keeps hot:6 hours", "Care:dishwasher safe:lid only"]),
    dict(handle="glass-mug-set", title="Double-Wall Glass Mug Set (2 pcs)", zh="双层玻璃杯两件套", type="Home > Kitchen > Mugs",
         type_zh="家居 > 厨房 > 马克杯", material="Borosilicate glass", price=19.90, colours=["Clear"],
         desc="Two double-wall glass mugs, 300 ml each, cool to hold.",
         desc_zh="两只双层玻璃杯，每只 300 毫升，不烫手。",
         detail=["Specifications:capacity:300 ml", "Specifications:pieces:2", "Care:dishwasher safe:yes"]),
    dict(handle="dutch-oven-5l", title="Cast Iron Dutch Oven 5 L", zh="铸铁炖锅 5 升", type="Home > Kitchen > Cookware",
         type_zh="家居 > 厨房 > 锅具", material="Enamelled cast iron", price=89.00, colours=["Red", "Blue", "Black"],
         desc="An enamelled cast iron pot for every hob and the oven up to 250 °C.",
         desc_zh="搪瓷铸铁锅，适用所有炉灶，烤箱可耐 250 °C。",
         detail=["Specifications:capacity:5 L", "Specifications:weight:5.4 kg", "Care:dishwasher safe:no"]),
    dict(handle="oven-mitts", title="Silicone Oven Mitts", zh="硅胶隔热手套", type="Home > Kitchen > Oven Mitts",
         type_zh="家居 > 厨房 > 隔热手套", material="Silicone, cotton lining", price=14.90, colours=["Red", "Grey"],
         desc="A pair of heat-resistant silicone mitts, up to 230 °C.",
         desc_zh="一对耐高温硅胶隔热手套，最高 230 °C。",
         detail=["Specifications:heat resistance:230 °C", "Specifications:pieces:2"]),
    dict(handle="bamboo-baskets", title="Bamboo Storage Baskets", zh="竹编收纳篮", type="Home > Storage > Baskets",
         type_zh="家居 > 收纳 > 收纳篮", material="Bamboo", price=17.90, colours=["Natural"], sizes=["Small", "Medium", "Large"],
         steps=[-5.0, 0.0, 6.0],
         desc="A woven bamboo basket with a cotton liner.",
         desc_zh="竹编收纳篮，配棉质内衬。",
         detail=["Specifications:dimensions:small 20 x 20 x 15 cm, medium 30 x 25 x 20 cm, large 40 x 30 x 25 cm"]),
    # small electronics
    dict(handle="usb-c-cable", title="USB-C Cable 2 m", zh="USB-C 数据线 2 米", type="Electronics > Accessories > Cables",
         type_zh="电子产品 > 配件 > 数据线", material="Braided nylon", price=12.90, colours=["Black", "White"],
         desc="A braided USB-C to USB-C cable, 2 m, 100 W charging and 480 Mbps data.",
         desc_zh="编织 USB-C 对 USB-C 数据线，2 米，100 瓦充电，480 Mbps 传输。",
         detail=["Specifications:length:2 m", "Specifications:power:100 W"]),
    dict(handle="power-bank", title="Power Bank 10000 mAh", zh="充电宝 10000 毫安", type="Electronics > Accessories > Power Banks",
         type_zh="电子产品 > 配件 > 充电宝", material="Aluminium", price=34.90, colours=["Black", "Silver"],
         desc="A slim 10000 mAh power bank with 20 W USB-C fast charging.",
         desc_zh="轻薄 10000 毫安充电宝，支持 20 瓦 USB-C 快充。",
         detail=["Specifications:capacity:10000 mAh", "Specifications:power:20 W", "Specifications:weight:210 g",
                 "Warranty:warranty:2 years"]),
    dict(handle="travel-adapter", title="Travel Adapter", zh="旅行转换插头", type="Electronics > Accessories > Travel Adapters",
         type_zh="电子产品 > 配件 > 转换插头", material="Plastic", price=24.90, colours=["White"],
         desc="A universal travel adapter for EU, UK, US and AU sockets with two USB ports.",
         desc_zh="全球通用旅行转换插头，适用欧标、英标、美标和澳标插座，带两个 USB 口。",
         detail=["Specifications:sockets:EU, UK, US, AU", "Specifications:usb ports:2"]),
]


def rows() -> list[dict[str, str]]:
    rng = random.Random(59)
    out = []
    serial = 0
    for family in FAMILIES:
        sizes = family.get("sizes") or [""]
        steps = family.get("steps") or [0.0] * len(sizes)
        for colour in family["colours"]:
            for size, step in zip(sizes, steps):
                serial += 1
                body = f"200{serial:09d}"
                variant = "-".join(x.lower().replace("/", "").replace(" ", "") for x in (colour, size) if x)
                pid = f"NW-{family['handle']}-{variant}".upper()[:60]
                price = round(family["price"] + step, 2)
                sale = ""
                if rng.random() < 0.12:
                    sale = f"{round(price * 0.8, 2):.2f} USD"
                availability = "out_of_stock" if rng.random() < 0.13 else (
                    "backorder" if rng.random() < 0.03 else "in_stock")
                title = " - ".join([family["title"], " / ".join(x for x in (colour, size) if x)])
                zh_colour = ZH_COLOUR.get(colour, "")
                title_zh = " ".join(x for x in (family["zh"], zh_colour, size) if x)
                out.append({
                    "id": pid, "title": title, "description": family["desc"],
                    "link": f"https://northwind.example/products/{family['handle']}?variant={serial}",
                    "image_link": f"https://northwind.example/images/{pid.lower()}.png",
                    "price": f"{price:.2f} USD", "sale_price": sale, "availability": availability,
                    "brand": family.get("brand", W), "gtin": body + gtin_check_digit(body),
                    "mpn": f"NWG-{serial:05d}", "color": colour, "size": size, "material": family["material"],
                    "pattern": "", "product_type": family["type"], "item_group_id": family["handle"],
                    "product_detail": ",".join(family["detail"]), "title_zh": title_zh,
                    "description_zh": family["desc_zh"], "product_type_zh": family["type_zh"]})
    return out


def main() -> None:
    products = rows()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
        writer.writeheader()
        writer.writerows(products)
    print(f"wrote {len(products)} products to {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
