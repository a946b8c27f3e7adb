"""Workspace sessions: the kept changes of a run with ``session=NAME``."""
from __future__ import annotations

import os
import time
from typing import Iterable, List, Optional, Tuple, Union

from . import _nsbox
from .result import Change
from .sandbox import _call

__all__ = ["Session", "sessions"]

# nsbox.h's NSBOX_APPLY_* flags.
_APPLY_FORCE, _APPLY_SKIP_DENIED, _APPLY_KEEP = 1, 2, 4


class Session:
    """A session's changes, for review: ``changes()``, ``diff()``, then
    ``apply()`` what was approved or ``discard()`` it all.

    ``policy`` supplies workspace.deny_changes and workspace.git (default:
    $NSBOX_POLICY, as the CLI). Paths are relative to the workspace."""

    def __init__(self, name: str, policy: Optional[Union[str, os.PathLike]] = None) -> None:
        self.name = name
        p = policy if policy is not None else os.environ.get("NSBOX_POLICY") or None
        self.policy: Optional[str] = os.fspath(p) if p is not None else None
        #: After apply(): what it left out, as (path, why) pairs.
        self.left: List[Tuple[str, str]] = []

    def changes(self) -> List[Change]:
        """What the runs changed: added, modified, deleted, type_changed."""
        rows = _call(_nsbox.session_changes, self.name, self.policy, ())
        return [Change(os.fsdecode(p), kind, detail, denied, mode if kind not in ("deleted", "error") else None,
                       os.fsdecode(t) if t is not None else None, rule, _iso(mtime_ns))
                for p, kind, detail, mode, t, denied, rule, mtime_ns in rows]

    def diff(self, escape: bool = False) -> str:
        """Every change as one patch in git's format, from the library's one
        diff writer (the same as `nsbox session diff`): ``patch -p1`` or
        ``git apply`` in the workspace reproduces the session's files,
        including files without a final newline, new, deleted and empty
        files and symlinks. Binary and very large files are named, not
        shown; paths are quoted as git quotes them. The text is decoded from
        UTF-8 with surrogateescape: ``d.encode("utf-8", "surrogateescape")``
        gives the patch's exact bytes. With ``escape``, control characters
        in the content are shown as \\xNN, for a terminal (the patch then no
        longer applies byte for byte)."""
        data = _call(_nsbox.session_diff, self.name, bool(escape))
        return data.decode("utf-8", "surrogateescape")

    def apply(self, paths: Optional[Iterable[str]] = None, force: bool = False, skip_denied: bool = False,
              keep: bool = False) -> List[Tuple[str, str]]:
        """Write the changes (all, or those at or below ``paths``) into the
        host workspace with their modification times, all or nothing; see
        `nsbox session apply` for what is refused without ``force``. With
        ``skip_denied`` what would be refused is left out and the rest
        applied. An apply of the whole session (no ``paths``) removes it
        afterwards unless ``keep``; one of some paths keeps it. Returns
        (and keeps in ``self.left``) what was left out, as (path, why)
        pairs. Raises SandboxError when refused."""
        if force and skip_denied:
            raise ValueError("force and skip_denied ask opposite things; give one")
        p = None if paths is None else [os.fsencode(x) for x in ([paths] if isinstance(paths, str) else paths)]
        flags = (_APPLY_FORCE if force else 0) | (_APPLY_SKIP_DENIED if skip_denied else 0) | \
            (_APPLY_KEEP if keep else 0)
        _removed, left = _call(_nsbox.session_apply, self.name, self.policy, (), p, flags)
        self.left = [(os.fsdecode(path), why) for path, why in left]
        return self.left

    def discard(self) -> None:
        """Drop the session and its changes."""
        _call(_nsbox.session_discard, self.name)

    def __repr__(self) -> str:
        return "nsbox.Session(%r)" % self.name


def _iso(ns: int) -> Optional[str]:
    if not ns:
        return None
    sec, frac = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)) + ".%09dZ" % frac


def sessions(all: bool = False) -> List[Session]:
    """The caller's sessions (root: those of this login; ``all``: every
    root caller's)."""
    return [Session(n) for n in _call(_nsbox.session_list, bool(all))]
