"""Knowledge base: ingest FAQ sources into Chroma and retrieve answers by hybrid (MiniLM + BM25) search."""
