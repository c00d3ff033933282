"""Knowledge: FAQ sources parsed into answers and example questions, stored (Chroma) and searched (hybrid dense +
BM25), behind the :class:`knowledge.base.KnowledgeBase` contract."""
