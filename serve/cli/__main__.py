"""``python -m steadyrank.serve.cli``: the console script ``steadyrank``."""

from steadyrank.serve.cli.main import main

raise SystemExit(main())
