"""What the catalog answers with: product cards, a search answer with its filters, product facts with their source,
and comparison tables whose every cell names the record and field it came from. Plain pydantic models, so the API
and the chat can send them as JSON as they are."""

from __future__ import annotations

from pydantic import BaseModel

from catalog.constraints import Filters


class Card(BaseModel):
    id: str
    title: str
    price: float
    sale_price: float | None = None
    currency: str = "USD"
    availability: str
    link: str = ""
    image_link: str = ""
    color: str = ""
    size: str = ""
    category: str = ""
    score: float = 0.0


class SearchAnswer(BaseModel):
    filters: Filters
    products: list[Card] = []
    relaxed: list[str] = []  # constraints dropped to find anything ("color blue")
    relaxed_fields: list[str] = []  # the same by name ("color", "price", "in_stock")
    carried: bool = True  # False only when the catalog has nothing of the kind asked for
    note: str = ""  # one honest line for the customer (what was relaxed, what is not carried)


class Fact(BaseModel):
    product_id: str
    title: str
    field: str
    value: str = ""
    stated: bool = True  # False: the record does not state this field, and ``value`` is empty
    score: float = 0.0
    text: str = ""


class FactAnswer(BaseModel):
    facts: list[Fact] = []
    filters: Filters | None = None
    note: str = ""

    @property
    def sources(self) -> list[dict[str, str]]:
        return [{"product_id": f.product_id, "field": f.field} for f in self.facts if f.stated]


class VariantAnswer(BaseModel):
    """Whether a product comes in the colour/size asked, and whether that variant is in stock."""

    group: str
    title: str
    color: str = ""  # what was asked ("" when not asked)
    size: str = ""
    offered: bool = False  # some variant has the asked colour and size
    variants: list[Card] = []  # the variants with the asked colour and size (all the group's when none was asked)
    colors: list[str] = []  # every colour and size the product comes in
    sizes: list[str] = []
    text: str = ""


class Cell(BaseModel):
    value: str = ""
    product_id: str
    field: str
    stated: bool = True


class Row(BaseModel):
    field: str
    cells: list[Cell]


class Comparison(BaseModel):
    products: list[Card]
    rows: list[Row]
    filters: Filters | None = None
    note: str = ""

    def markdown(self) -> str:
        head = "| | " + " | ".join(c.title for c in self.products) + " |"
        rule = "|---" * (len(self.products) + 1) + "|"
        body = ["| " + row.field + " | " + " | ".join(c.value if c.stated else "not stated" for c in row.cells) + " |"
                for row in self.rows]
        return "\n".join([head, rule, *body])
