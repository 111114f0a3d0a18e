"""Package exports imported on first use (PEP 562 module ``__getattr__``).

A package that re-exports names from heavy submodules (FAISS, bm25s, torch) binds
``__getattr__ = lazy_exports(__name__, {"Name": "steadyrank.pkg.module", ...})``: importing one light
submodule of the package then loads none of the heavy ones.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``name`` → ``getattr(import(exports[name]), name)``,
    cached in the package's namespace after the first access."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
