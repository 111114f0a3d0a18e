"""Offline tools behind CLI commands: golden-set builder (``golden``), cost-latency-quality sweep
(``clq``), precision report (``precision``) and the Δ-margin and noise probes (``probes``).
"""
