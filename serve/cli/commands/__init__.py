"""Subcommands of the `steadyrank` CLI, one module each."""
