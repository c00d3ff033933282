"""Catalog: the shop's products, ingested from a product feed (Google Merchant Center or Shopify CSV), stored (SQLModel
rows, a Chroma collection per language, a lexical index) and searched with filters parsed from a message, with
product facts and comparisons answered from the records alone.

It sits beside :mod:`knowledge` (it may use storage, core and knowledge's encoder/Chroma helpers); nothing above it
imports its insides: callers use :class:`catalog.store.Catalog`, :class:`catalog.search.ProductSearch` and the answer
types in :mod:`catalog.answers`.
"""
