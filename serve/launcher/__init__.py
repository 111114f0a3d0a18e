"""What only ``steadyrank serve`` uses to start and stop a server: the Ray environment, the
command's flags over the settings, GPUs, HAProxy's side listeners and the lifecycle (drain, stop, reaping).
"""
