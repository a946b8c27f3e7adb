"""Exceptions: failures of nsbox itself (the code's own failures are data in a Result)."""
from __future__ import annotations

import errno as _errno
from typing import Any, Dict, Optional

__all__ = ["SandboxError", "IsolationUnavailable"]

# Steps whose failure means this host (or this user on it) cannot build the
# sandbox's isolation at all: namespaces, id maps, limits that were required.
_ISOLATION_STEPS = {"namespaces", "idmap", "limits"}
_ISOLATION_ERRNOS = {_errno.EPERM, _errno.EACCES, _errno.ENOSYS, _errno.EINVAL, _errno.ENOSPC,
                     _errno.EOPNOTSUPP, _errno.EBUSY, _errno.ENOENT}


class SandboxError(Exception):
    """nsbox could not run the command: a bad value, a missing image, a volume
    the policy forbids, a failed setup step. Nothing of the sandbox is left.

    Attributes: ``step`` (the failing setup step: "config", "rootfs", "volume",
    "namespaces", ...), ``errno`` (0 when not a system error), ``message`` (the
    library's text without the hint), ``hint`` (what to do, or None), and
    ``record`` (the result record as a dict when the sandbox had started and
    failed during its setup, else None).
    """

    def __init__(self, step: str, errno: int, message: str, hint: Optional[str] = None,
                 record: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message if not hint else "%s (hint: %s)" % (message, hint))
        self.step = step
        self.errno = errno
        self.message = message
        self.hint = hint
        self.record = record

    def __reduce__(self) -> Any:
        # Picklable (multiprocessing, Celery's prefork pool): the base
        # class would call __init__ with the formatted text alone.
        return (type(self), (self.step, self.errno, self.message, self.hint, self.record))

    @classmethod
    def _from(cls, step: str, errnum: int, text: str, hint: Optional[str] = None,
              record: Optional[Dict[str, Any]] = None) -> "SandboxError":
        """From the library's error: its step, errno, message and hint (its
        own field; the message ends with " (hint: ...)" when there is one)."""
        message = text
        if hint and text.endswith(" (hint: %s)" % hint):
            message = text[:-len(" (hint: %s)" % hint)]
        elif hint is None:   # a message alone: its hint, if it ends with one
            mark = text.rfind(" (hint: ")
            if mark >= 0 and text.endswith(")"):
                message, hint = text[:mark], text[mark + 8:-1]
        kind = IsolationUnavailable if (step in _ISOLATION_STEPS and errnum in _ISOLATION_ERRNOS) else SandboxError
        return kind(step, errnum, message, hint, record)


class IsolationUnavailable(SandboxError):
    """The host cannot isolate a sandbox (user namespaces disabled, no id
    range, limits required but no cgroup). nsbox never falls back to running
    without isolation; ``hint`` says what to change."""
