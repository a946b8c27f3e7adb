"""The host: images and the `nsbox check` report."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from . import _nsbox
from .sandbox import _call

__all__ = ["Image", "images", "check", "version"]


@dataclass(frozen=True)
class Image:
    """An image the caller may run (its own, then root's system images)."""
    name: str
    path: str
    size_bytes: int
    created: Optional[str]
    source: Optional[str]
    stripped: Optional[str]


def images() -> List[Image]:
    """`nsbox image ls` as data."""
    return [Image(**d) for d in _call(_nsbox.images)]


def check() -> Dict[str, Any]:
    """`nsbox check --json` as data: what this host offers nsbox."""
    return json.loads(_call(_nsbox.check))


def version() -> str:
    """libnsbox's version."""
    return str(_nsbox.version())
