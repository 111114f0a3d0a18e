"""CLQ sweep: evaluate retrieval + reranking configurations on a golden set and choose one.

Cost–latency–quality: every configuration of a grid (embedder × dimension × ANN × first stage × K
policy × reranker) is measured on quality, latency and cost; the Pareto frontier and the
SLA-bound / budget-bound picks are computed from those measurements (see docs/ARCHITECTURE.md).
"""
