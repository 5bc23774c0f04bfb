"""Where probectl keeps what it can rebuild: ``$XDG_CACHE_HOME/probectl`` (default ``~/.cache/probectl``).

Everything kept there is an optimisation only (indexes of large files, analysed grammars, unpacked
modules); ``PROBECTL_NO_CACHE=1`` turns caching off.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional


def cache_dir() -> Optional[Path]:
    """Where cache files live, or None when caching is turned off."""
    if os.environ.get("PROBECTL_NO_CACHE") == "1":
        return None
    base = os.environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):
        home = os.path.expanduser("~")
        if home == "~":
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "probectl"
