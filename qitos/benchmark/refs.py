"""Code named as 'module:attribute' and imported when first used.

The adapter protocol names what sits in the layers above it this way (the built-in families in the registry,
a family's recipes, a scorer or data conversion a family provides), so that the protocol never imports them:
the layers point one way, and naming a thing does not import its dependencies.
"""

from __future__ import annotations

import importlib
from typing import Any


def load_ref(ref: str) -> Any:
    """The attribute `ref` ('package.module:name') names, its module imported now."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)
