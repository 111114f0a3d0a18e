"""Candidate generation: FAISS and BM25 indexes, fusion, the durable index store, dynamic-K routing."""
