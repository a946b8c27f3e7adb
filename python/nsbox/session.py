"""Workspace sessions: the kept changes of a run with ``session=NAME``."""
from __future__ import annotations

import difflib
import os
from typing import Iterable, List, Optional, Union

from . import _nsbox
from .result import Change, _escape
from .sandbox import _call

__all__ = ["Session", "sessions"]

_MAX_DIFF_BYTES = 1 << 20   # larger files are summarised, not diffed


class Session:
    """A session's changes, for review: ``changes()``, ``diff()``, then
    ``apply()`` what was approved or ``discard()`` it all.

    ``policy`` supplies workspace.deny_changes (default: $NSBOX_POLICY, as
    the CLI). Paths are relative to the workspace."""

    def __init__(self, name: str, policy: Optional[Union[str, os.PathLike]] = None) -> None:
        self.name = name
        p = policy if policy is not None else os.environ.get("NSBOX_POLICY") or None
        self.policy: Optional[str] = os.fspath(p) if p is not None else None

    def changes(self) -> List[Change]:
        """What the runs changed: added, modified, deleted, type_changed."""
        rows = _call(_nsbox.session_changes, self.name, self.policy, ())
        return [Change(os.fsdecode(p), kind, detail, denied, mode if kind not in ("deleted", "error") else None,
                       os.fsdecode(t) if t is not None else None)
                for p, kind, detail, mode, t, denied in rows]

    def diff(self) -> str:
        """A unified diff of every changed regular file (text; binary and
        very large files are named, not shown). Paths are escaped."""
        out: List[str] = []
        for c in self.changes():
            if c.kind == "error" or c.detail == "directory":
                continue
            label = _escape(c.path)
            host_fd, sess_fd = _call(_nsbox.session_open_pair, self.name, os.fsencode(c.path))
            try:
                a = _read(host_fd)
            finally:
                b = _read(sess_fd)
            if c.kind == "deleted":
                b = None
            if a is None and b is None:
                out.append("--- a/%s\n+++ b/%s\n(%s %s)\n" % (label, label, c.kind, c.detail))
                continue
            ta, tb = _lines(a), _lines(b)
            if ta is None or tb is None:
                out.append("Binary or large file a/%s and b/%s differ\n" % (label, label))
                continue
            out.extend(difflib.unified_diff(ta, tb, "a/" + label if a is not None else "/dev/null",
                                            "b/" + label if b is not None else "/dev/null"))
        return "".join(out)

    def apply(self, paths: Optional[Iterable[str]] = None, force: bool = False) -> None:
        """Write the changes (all, or those at or below ``paths``) into the
        host workspace, all or nothing; see `nsbox session apply` for what is
        refused without ``force``. Raises SandboxError when refused."""
        p = None if paths is None else [os.fsencode(x) for x in ([paths] if isinstance(paths, str) else paths)]
        _call(_nsbox.session_apply, self.name, self.policy, (), p, force)

    def discard(self) -> None:
        """Drop the session and its changes."""
        _call(_nsbox.session_discard, self.name)

    def __repr__(self) -> str:
        return "nsbox.Session(%r)" % self.name


def _read(fd: int) -> Optional[bytes]:
    if fd < 0:
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read(_MAX_DIFF_BYTES + 1)
    return data


def _lines(data: Optional[bytes]) -> Optional[List[str]]:
    if data is None:
        return []
    if len(data) > _MAX_DIFF_BYTES or b"\0" in data:
        return None
    text = data.decode("utf-8", "replace")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return [_escape_line(l) for l in lines]


def _escape_line(line: str) -> str:
    # Terminal controls in file content are shown, not obeyed.
    body = line[:-1] if line.endswith("\n") else line
    return "".join(ch if (ch == "\t" or ord(ch) >= 0x20 and ord(ch) != 0x7F and not 0x80 <= ord(ch) <= 0x9F)
                   else "\\x%02x" % ord(ch) for ch in body) + ("\n" if line.endswith("\n") else "")


def sessions() -> List[Session]:
    """The caller's sessions."""
    return [Session(n) for n in _call(_nsbox.session_list)]
