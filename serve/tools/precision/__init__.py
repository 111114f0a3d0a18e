"""The precision report (Yang et al.'s protocol): the same candidates scored under several
precision regimes, compared with tie-aware metrics, tie statistics and Spearman ρ against FP32."""
