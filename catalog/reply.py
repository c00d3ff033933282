"""Which product messages the catalog answers by itself, and the reply it gives: text, cards, filter chips, sources.

:func:`intent` says whether a message is a product message the catalog can answer with no LLM, and of which kind:

* ``compare``: comparison wording ("compare", "vs", "difference between", 比较/对比) with a category or two products
  named ("compare the two cheapest desk lamps");
* ``stock``: a product named (or "it", the product the last answer was about) and stock or variant wording ("is the
  merino sweater in stock?", "does it come in navy in size L?");
* ``fact``: a field asked ("pure cotton", "how many litres", "warranty") about a product named or a category ("are your
  towels pure cotton?");
* ``search``: a category or a product named, with some constraint or shopping wording, or as a bare phrase ("a blue
  throw blanket under $50", "desk lamps").

It is deliberately narrow, so that what the rest of the chain answers well stays with it: advice ("which is best
for...", gifts, "good for sensitive skin?") goes to the LLM; a message about an order, a delivery, a return, an account,
a restock notice, the warranty's cover or the customer's own item ("my kettle stopped working") goes to the rules and
the help center; and so does a how-to
question with no field asked ("how do I descale the kettle?"). A message of no catalog kind and no named product is
never answered here ("we don't carry that" is the search's to say, inside a product message).

:func:`reply` answers a message of one of those kinds; ``None`` when the catalog has nothing to show for it (no
product found, fewer than two to compare): the chain then goes on as without a catalog.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from catalog.answers import Card
from catalog.attributes import content_words
from catalog.constraints import COMPARISON, Filters
from catalog.search import ProductSearch, base_title, card
from catalog.store import CatalogProduct
from core.text import language_of

KINDS = ("search", "fact", "compare", "stock", "photo")

_ADVICE = re.compile(r"\b(?:best|better|recommend\w*|suggest\w*|should i|gifts?|presents?|good for|suitable|ideal|"
                     r"worth|advice|opinion|prefer)\b|推荐|哪个好|哪款好|哪个更|"
                     r"适合(?!几岁|多大|什么年龄)|送礼|礼物|值得|建议", re.I)  # "适合几岁" asks the age, not advice
_NOT_PRODUCT = re.compile(
    r"\b(?:return\w*|refund\w*|exchang\w*|ship|shipp\w*|shipped|deliver\w*|orders?|ordered|track\w*|"
    r"(?<!noise )(?<!noise-)cancel\w*|"
    r"account|password|log ?in|invoice|receipt|pay|paying|payment|paid|charg(?!er|ing)\w*|coupon|promo\w*|voucher|"
    r"discount code|"
    r"gift ?card|arriv\w*|damaged|broken|defective|faulty|torn|missing|wrong|complain\w*|repair\w*|replac\w*|"
    r"stopped working|not working|doesn'?t work|human|agent|my|mine|i bought|i received|i got|do i need|notify\w*|"
    r"notification|let me know|alert me|restock\w*|available again|warranty cover\w*|does the warranty)\b|"
    r"退货|退款|换货|运费|快递|发货|物流|订单|取消|账户|密码|发票|优惠券|坏了|破损|维修|我买的|我的|人工", re.I)
_COMPARE = COMPARISON
_STOCK = re.compile(r"\b(?:in stock|out of stock|back in stock|sold out|in size|"
                    r"in (?:an? )?(?:extra )?(?:small|medium|large))\b|有货|缺货|现货|有没有.{0,8}(?:码|号|色)", re.I)
# "does it come in navy?", "what colours does it come in?" ask for a variant; "what fabric does it come in?" does not
_COMES_IN = re.compile(r"\b(?:come|comes|available) in\b", re.I)
_VARIANT_WORDS = re.compile(r"\b(?:colou?rs?|sizes?|shades?)\b|颜色|尺码", re.I)
_SHOPPING = re.compile(r"\b(?:find|show|looking|look for|want|need|buy|sell|sells|carry|you have|you got|any|search|"
                       r"browse|cheap\w*|priciest|under|below|between|over|above|less than|how much|price\w*)\b|"
                       r"找|想买|有没有|卖|看看|多少钱|价格", re.I)
_HOW_TO = re.compile(r"^\s*(?:how|why|when|where|can i|could i|what if|what happens)\b|怎么|为什么|如何", re.I)
_HOW_TO_DO = re.compile(r"^\s*(?:how (?:do|does|did|can|could|should|would|to)\b|why|when|where|what if|what happens)\b|"
                        r"怎么|为什么|如何", re.I)
# Chinese question words, wherever they stand ("数据线多长", "是什么做的", "是纯棉的吗 谢谢")
_ZH_FACT_CUE = re.compile(r"吗|多少|什么|几|多久|多长|多大|多重|多高|多宽|多厚|能不能|可不可以|是否")
_PRONOUN = re.compile(r"\b(?:it|this|that|this one|that one|they|them)\b|这款|这个|那款|那个|它", re.I)
_WORDS = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]", re.I)

AVAILABILITY = {"in_stock": ("in stock", "有货"), "out_of_stock": ("out of stock", "缺货"),
                "backorder": ("on backorder", "可预订"), "preorder": ("preorder", "预售")}


@dataclass
class Intent:
    kind: str
    filters: Filters
    product_id: str = ""  # the product the conversation's last answer named, for "is it in blue?"


@dataclass
class Reply:
    kind: str
    text: str
    products: list[dict[str, Any]] = field(default_factory=list)  # cards, in order of relevance
    filters: list[dict[str, Any]] = field(default_factory=list)   # the chips (Filters.chips)
    sources: list[dict[str, Any]] = field(default_factory=list)   # facts: product id and field
    detail: dict[str, Any] = field(default_factory=dict)           # for the trace
    # Why a person should take over ("" for no): a product photo that found nothing goes to a person with the photo
    handoff: str = ""
    handed_over: str = ""  # the line the customer reads once a person was asked (the chain's service adds it)


def intent(search: ProductSearch, message: str, last_answer: str = "") -> Intent | None:
    """The product intent of ``message`` (see the module's docstring), or None to leave it to the rest of the chain.
    ``last_answer``: the assistant's previous message, read only for a product the message calls "it"."""
    text = " ".join(message.split())
    if not text or _ADVICE.search(text) or _NOT_PRODUCT.search(text):
        return None
    filters = search.parse(text)
    named = search.named(text, by_material=True)
    category = bool(filters.categories)
    product_id = ""
    if not named and not category and last_answer and _PRONOUN.search(text):
        earlier = search.named(last_answer)
        product_id = earlier[0].id if len(earlier) == 1 else ""
    if _COMPARE.search(text):
        return Intent("compare", filters) if category or len(named) >= 2 else None
    asked_variant = bool(filters.color or filters.size or any(m.startswith(("color ", "size ")) for m in filters.missing))
    asked = search.asked_field(text)
    comes_in = bool(_COMES_IN.search(text)) and (asked_variant or bool(_VARIANT_WORDS.search(text)))
    if (named or product_id) and (_STOCK.search(text) or comes_in or (asked_variant and _is_question(text))):
        return Intent("stock", filters, product_id)
    if asked and asked != "availability" and (named or category or product_id) and _is_question(text):
        return Intent("fact", filters, product_id)
    if not asked and (named or product_id) and _asks_about(text) and _ranked_fact(search, text, named, product_id):
        return Intent("fact", filters, product_id)
    if asked == "availability" and category:
        return Intent("search", filters)
    if (category or named) and not _HOW_TO.search(text) and (
            filters.active() or filters.order or filters.count or _SHOPPING.search(text) or len(_WORDS.findall(text)) <= 6):
        return Intent("search", filters)
    return None


UNMET = "unmet"  # an Intent kind for the search log only: a shopping message for something the catalog lacks


def unmet(search: ProductSearch, message: str) -> Intent | None:
    """A shopping message the catalog has nothing of the kind for ("do you sell bicycles?", "find me a blue coat"):
    not answered here (the rest of the chain answers it as before), only logged as a null search, the demand the
    shop's catalog does not meet. None for anything else."""
    text = " ".join(message.split())
    if not text or _ADVICE.search(text) or _NOT_PRODUCT.search(text) or not _SHOPPING.search(text):
        return None
    filters = search.parse(text)
    return Intent(UNMET, filters) if search.not_carried(text, filters) else None


def _asks_about(text: str) -> bool:
    """A question that may ask a field no field word names ("how long is the USB-C cable?", "数据线多长？"): not
    shopping wording, nor a how-to ("how do I descale it?", for the help center)."""
    return _is_question(text) and not _SHOPPING.search(text) and not _HOW_TO_DO.search(text)


def _ranked_fact(search: ProductSearch, text: str, named: list[CatalogProduct], product_id: str) -> bool:
    """Whether the attribute ranking picks a field of the product's kind with confidence (catalog.field_ranking)."""
    product = named[0] if named else search.catalog.get(product_id)
    ranked = search.ranked_field(text, product) if product is not None else None
    return ranked is not None and ranked.confident


def _is_question(text: str) -> bool:
    """A question mark or a question's opening; in Chinese, also a question word anywhere ("摇臂台灯多重", with no
    question mark, as customers often type)."""
    return text.rstrip().endswith(("?", "？", "吗", "呢")) or bool(_ZH_FACT_CUE.search(text)) or bool(re.match(
        r"\s*(?:is|are|does|do|did|has|have|can|will|what|which|how|tell me)\b", text, re.I))


def reply(search: ProductSearch, message: str, found: Intent) -> Reply | None:
    """The catalog's answer to a message of a product intent; None when it has nothing to show."""
    zh = found.filters.language == "zh"
    if found.kind == "search":
        answer = search.search(message)
        if not answer.products:
            return None
        chips = answer.filters.chips(answer.relaxed_fields)
        lines = [answer.note] if answer.note else []
        if answer.filters.label:
            lines.append(("**筛选：** " if zh else "**Filters:** ") + answer.filters.label)
        lines.append(_card_list(answer.products, zh))
        return Reply("search", "\n\n".join(lines), [_card(c) for c in answer.products], chips,
                     detail={"filters": answer.filters.label, "relaxed": answer.relaxed,
                             "products": [c.id for c in answer.products]})
    if found.kind == "fact":
        facts = search.fact(message, product_id=found.product_id or None)
        if not facts.facts:
            return None
        lines = []
        for fact in facts.facts:
            source = (f"（来源：{fact.product_id}，字段 {fact.field}）" if zh
                      else f" (source: product {fact.product_id}, field `{fact.field}`)") if fact.stated else ""
            lines.append(f"- {fact.text}{source}")
        sources = [{"answer_id": f"{f.product_id}#{f.field}", "title": f"{f.title}: {f.field}", "score": f.score,
                    "product_id": f.product_id, "field": f.field} for f in facts.facts if f.stated]
        cards = [search.catalog.get(f.product_id) for f in facts.facts]
        return Reply("fact", "\n".join(lines), [_card(_of(p, zh)) for p in cards if p is not None],
                     facts.filters.chips() if facts.filters else [], sources,
                     detail={"facts": [{"product_id": f.product_id, "field": f.field, "stated": f.stated}
                                       for f in facts.facts]})
    if found.kind == "compare":
        table = search.compare(message)
        if len(table.products) < 2:
            return None
        head = "对比（每一格都来自商品资料）：" if zh else "Here is how they compare (every cell is from the product records):"
        lines = [table.note] if table.note else []
        lines += [head, table.markdown()]
        return Reply("compare", "\n\n".join(lines), [_card(c) for c in table.products],
                     table.filters.chips() if table.filters else [],
                     detail={"products": [c.id for c in table.products], "rows": [r.field for r in table.rows]})
    if found.kind == "stock":
        variant = search.variant(message, product_id=found.product_id or None)
        if variant is None:
            return None
        lines = [variant.text]
        if variant.variants:
            lines.append(_card_list(variant.variants, zh))
        return Reply("stock", "\n\n".join(lines), [_card(c) for c in variant.variants], found.filters.chips(),
                     detail={"group": variant.group, "offered": variant.offered,
                             "variants": [c.id for c in variant.variants]})
    return None


def _of(product: CatalogProduct, zh: bool) -> Card:
    return card(product, "zh" if zh else "en")


def _card(item: Card) -> dict[str, Any]:
    return item.model_dump()


def money(value: float, currency: str) -> str:
    return f"${value:.2f}" if currency == "USD" else f"{value:.2f} {currency}"


def _card_list(cards: list[Card], zh: bool) -> str:
    lines = []
    for i, c in enumerate(cards, 1):
        title = f"[{c.title}]({c.link})" if c.link else c.title
        price = money(c.price, c.currency)
        if c.sale_price is not None:
            price = (f"{money(c.sale_price, c.currency)}（原价 {price}）" if zh
                     else f"{money(c.sale_price, c.currency)} (was {price})")
        stock = AVAILABILITY.get(c.availability, (c.availability, c.availability))[1 if zh else 0]
        lines.append(f"{i}. **{title}** — {price} · {stock}")
    return "\n".join(lines)


# "What is this?", "which model is this", "do you sell this one?": the customer asks about the product in the photo
_WHAT_IS = re.compile(r"\b(?:what|which)\b.{0,30}\b(?:this|that|it)\b|\bidentify\b|\bthis (?:one|product|item|model)\b|"
                      r"\b(?:have|sell|carry|find) (?:this|it)\b|这是什么|什么型号|哪款|这个|这款|有卖", re.I)


def photo(search: ProductSearch, typed: str, codes: list[str], label: str) -> Reply | None:
    """A photo of a product: the product its barcode's GTIN names (the first code that is a product's), else the one
    its label's text (OCR) names. With the product found, a field asked in the typed text ("how many litres is
    this?") is answered as a fact, stock or a variant as stock, anything else with its card. When nothing is found
    the reply says so, when the photo was one of a product (a barcode was read, or the customer asks what it is);
    otherwise None (a screenshot of something else: the rest of the chain reads its text). Not for a message about
    the customer's own item or an order ("my kettle broke", with its photo): None. A photo that found nothing asks
    for a person (``Reply.handoff``): the chain's service queues the conversation with the photo in the packet."""
    zh = language_of(typed or label) == "zh"
    if _NOT_PRODUCT.search(typed) or _ADVICE.search(typed):
        return None
    found: CatalogProduct | None = None
    via = ""
    for code in codes:
        products = search.catalog.by_gtin(code)
        if products:
            found, via = products[0], f"barcode {code}"
            break
    if found is None and label.strip() and not _NOT_PRODUCT.search(label):
        named = search.named(label)
        if named:  # the one whose whole title (its kind too: "Merino Wool Sweater", not the Merino Wool Throw) is read
            words = content_words(label)
            found = max(named, key=lambda p: len(content_words(base_title(p)) & words))
            via = "label"
    if found is None:
        if not codes and not _WHAT_IS.search(typed):
            return None
        if codes:
            text = (f"我读到了条形码 {', '.join(codes)}，但我们的商品目录中没有这个条码的商品，所以无法告诉您这是哪款商品。"
                    "请输入商品名称。" if zh else
                    f"I read the barcode {', '.join(codes)}, but no product in our catalog has it, so I can't tell you "
                    "what this is. Please type the product's name.")
            why = f"product photo not recognised: barcode {', '.join(codes)} is no product's"
        else:
            read = "标签上的文字也没有对应我们目录中的商品" if label.strip() else "也没有读到任何文字"
            text = (f"我无法根据这张照片找到商品：照片中没有条形码，{read}。请输入商品名称，或拍一张条形码的照片。" if zh else
                    "I couldn't find this product from the photo: I read no barcode in it, and "
                    + ("the label's text names none of our products" if label.strip() else "no text on it")
                    + ". Please type its name, or send a photo of its barcode.")
            why = "product photo not recognised: " + ("no barcode, and its text names no product" if label.strip()
                                                      else "no barcode and no text read")
        handed = ("我已把您的照片转给同事，他们会查看并在这里回复您。" if zh else
                  "I've passed your photo to a colleague, who will look at it and reply here.")
        return Reply("photo", text, detail={"codes": codes, "via": "", "products": []}, handoff=why,
                     handed_over=handed)
    typed_text = " ".join(typed.split())
    if typed_text:
        filters = search.parse(typed_text)
        asked = search.asked_field(typed_text)
        kind = ("stock" if _STOCK.search(typed_text) or filters.color or filters.size
                else "fact" if asked and asked != "availability" else "")
        if kind:
            answer = reply(search, typed_text, Intent(kind, filters, found.id))
            if answer is not None:
                answer.detail.update(codes=codes, via=via, photo=found.id)
                return answer
    name = found.title_zh if zh and found.title_zh else found.title
    how = (f"条形码 {via.split()[-1]}" if via.startswith("barcode") else "标签上的文字") if zh else \
        (f"its {via}" if via.startswith("barcode") else "the label's text")
    head = f"照片中的商品是 **{name}**（根据{how}找到）。" if zh else f"This is **{name}** (found by {how})."
    item = _of(found, zh)
    return Reply("photo", head + "\n\n" + _card_list([item], zh), [_card(item)],
                 detail={"codes": codes, "via": via, "products": [found.id]})
