"""Online quality: golden sets, the shadow evaluator, canary comparison, Prometheus quality series."""
