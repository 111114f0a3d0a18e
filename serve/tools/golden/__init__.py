"""Golden sets built by the product: pool → judge → prune → Plackett–Luce refinement.

``steadyrank golden build`` pools candidates from an index (dense, BM25, hybrid), grades each on the
1–5 utility rubric with a judge (:mod:`.judges`), prunes the pool (:mod:`.prune`), refines the top
of the order with listwise judge calls and a confidence-aware Plackett–Luce update with pairwise
locks (:mod:`.plackett_luce`, :mod:`.refine`), and checkpoints after every judge call
(:mod:`.checkpoint`). See docs/ARCHITECTURE.md.
"""
