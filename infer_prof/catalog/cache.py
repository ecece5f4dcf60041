"""Where infer-prof keeps what it generates (the tiny model, alias configs for random weights)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where generated models and dummy-weight configs are cached: ``$INFER_PROF_CACHE``, else
    ``$XDG_CACHE_HOME/infer-prof``, else ``~/.cache/infer-prof``."""
    base = os.environ.get("INFER_PROF_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "infer-prof"
    )
    return Path(base)
