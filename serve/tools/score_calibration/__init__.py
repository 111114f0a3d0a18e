"""Score calibration (``steadyrank calibrate``): a golden set's judged pairs scored by one reranker,
split by query into a fit half and a held-out half, a Platt map fitted on the first
(:mod:`.fit`), ECE, Brier and a reliability diagram measured on the second (:mod:`.report`,
:mod:`.plot`). The map is served by :mod:`serve.runtime.score_calibration`.
"""
