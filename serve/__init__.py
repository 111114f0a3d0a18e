"""Model runtimes with High-Precision Scoring, the Ray Serve application and the `steadyrank` CLI."""
