"""The result of a run: the record of `nsbox run --json`, as attributes."""
from __future__ import annotations

import base64
import calendar
import os
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

__all__ = ["Result", "RunError", "Change"]


@dataclass(frozen=True)
class RunError:
    """Why a run failed, as data (the record's ``error``).

    ``kind`` is the library's classification: "timeout", "oom", "signal",
    "syntax_error", "interpreter_missing", "runtime_error", "interrupted",
    "exec" (the command was not found or cannot be executed), or the setup
    step for other errors. ``message`` is the text for a person or a model,
    ``hint`` the remedy when there is one, ``step`` and ``errno`` as in the
    record.
    """
    kind: str
    message: str
    step: str
    errno: int
    hint: Optional[str] = None

    @classmethod
    def from_record(cls, e: Optional[Dict[str, Any]]) -> Optional["RunError"]:
        if not e:
            return None
        step = e.get("step") or ""
        return cls(e.get("kind") or step or "error", e.get("message") or "", step, int(e.get("errno") or 0),
                   e.get("hint"))


@dataclass(frozen=True)
class Change:
    """One change a workspace run made (see `nsbox session changes`).

    ``path`` is relative to the workspace (decoded with the file system
    encoding and surrogateescape: ``os.fsencode(path)`` gives the raw bytes);
    ``kind``: "added", "modified", "deleted", "type_changed" or "error";
    ``detail``: "file", "directory", "symlink", "content", "mode", ...;
    ``mode``: permission bits (None when deleted); ``target``: a symlink's
    target; ``denied``: matched workspace.deny_changes (never applied);
    ``rule``: "apply", "denied", "git" (git's housekeeping, applied by
    workspace.git) or "dropped" (housekeeping left out); ``mtime``: the
    modification time in the session (ISO 8601 UTC, to the nanosecond), which
    apply keeps; ``mtime_ns``: the same in nanoseconds since the epoch.
    """
    path: str
    kind: str
    detail: str
    denied: bool = False
    mode: Optional[int] = None
    target: Optional[str] = None
    rule: str = "apply"
    mtime: Optional[str] = None

    @property
    def mtime_ns(self) -> Optional[int]:
        if not self.mtime:
            return None
        whole, _, frac = self.mtime.rstrip("Z").partition(".")
        sec = calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S"))
        return sec * 1_000_000_000 + int((frac + "000000000")[:9])

    @classmethod
    def from_record(cls, d: Dict[str, Any]) -> "Change":
        mode = d.get("mode")
        return cls(d.get("path", ""), d.get("kind", ""), d.get("detail", ""), bool(d.get("denied")),
                   int(mode, 8) if isinstance(mode, str) else mode, d.get("target"),
                   d.get("rule") or ("denied" if d.get("denied") else "apply"), d.get("mtime"))

    def __str__(self) -> str:
        s = "%s %s %s" % (self.kind, self.detail, _escape(self.path))
        if self.target is not None:
            s += " -> " + _escape(self.target)
        return s + (" (denied)" if self.denied else "")


def _escape(s: str) -> str:
    """A path chosen by the sandbox, safe to show: controls and odd bytes as \\xNN."""
    out = []
    for ch in s:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif o < 0x20 or o == 0x7F or 0x80 <= o <= 0x9F or 0x202A <= o <= 0x202E or 0x2066 <= o <= 0x2069:
            out.append("\\x%02x" % o if o < 0x100 else "\\u%04x" % o)
        elif 0xDC80 <= o <= 0xDCFF:   # a byte that was not UTF-8 (surrogateescape)
            out.append("\\x%02x" % (o - 0xDC00))
        else:
            out.append(ch)
    return "".join(out)


class Result:
    """What happened in one run. Every key of the `--json` record is an
    attribute; ``record`` is that record as a dict (what ``nsbox run --json``
    prints for the same run)."""

    __slots__ = ("record", "error", "changes", "results")

    def __init__(self, record: Dict[str, Any]) -> None:
        self.record = record
        self.error: Optional[RunError] = RunError.from_record(record.get("error"))
        self.changes: List[Change] = [Change.from_record(c) for c in record.get("changes") or []]
        # A context cell's rich results: its last expression and its
        # display() calls, each a mapping from MIME type to data (str for
        # text types, bytes for binary ones such as image/png).
        self.results: List[Dict[str, Any]] = [_decode(b) for b in record.get("results") or []]

    # The record's fields, typed. --------------------------------------------
    @property
    def status(self) -> str:
        """"exited", "signaled", "timed_out", "oom_killed" or "setup_failed"."""
        return self.record["status"]

    @property
    def exit_code(self) -> Optional[int]:
        """The payload's exit code, or None when it did not exit."""
        return self.record["exit_code"]

    @property
    def signal(self) -> Optional[int]:
        return self.record["signal"]

    @property
    def exit_status(self) -> int:
        """The status `nsbox run` exits with (124 timeout, 125 setup, 126, 127, 128+N)."""
        return self.record["exit_status"]

    @property
    def stdout(self) -> str:
        """Captured standard output (head and tail when truncated)."""
        return self.record["stdout"] or ""

    @property
    def stderr(self) -> str:
        return self.record["stderr"] or ""

    @property
    def stdout_raw(self) -> bytes:
        """The captured bytes of stdout, exactly (``stdout`` replaces what
        is not UTF-8; the record then carries the bytes as stdout_base64)."""
        return _raw(self.record, "stdout")

    @property
    def stderr_raw(self) -> bytes:
        return _raw(self.record, "stderr")

    @property
    def stdout_truncated(self) -> bool:
        return self.record["stdout_truncated"]

    @property
    def stderr_truncated(self) -> bool:
        return self.record["stderr_truncated"]

    @property
    def stdout_bytes(self) -> int:
        """Bytes the payload wrote to stdout (all of them, not only those kept)."""
        return self.record["stdout_bytes"]

    @property
    def stderr_bytes(self) -> int:
        return self.record["stderr_bytes"]

    @property
    def timed_out(self) -> bool:
        return self.record["timed_out"]

    @property
    def oom_killed(self) -> bool:
        return self.record["oom_killed"]

    @property
    def pids_limit_hit(self) -> bool:
        return self.record["pids_limit_hit"]

    @property
    def duration_ms(self) -> float:
        return self.record["duration_ms"]

    @property
    def resources(self) -> Dict[str, Any]:
        """peak_memory_bytes, cpu_user_ms, cpu_system_ms, cpu_source, pids_peak."""
        return self.record["resources"]

    @property
    def limits(self) -> Dict[str, Any]:
        return self.record["limits"]

    @property
    def isolation(self) -> Dict[str, Any]:
        return self.record["isolation"]

    @property
    def network(self) -> Dict[str, Any]:
        return self.record["network"]

    @property
    def denied(self) -> Optional[List[Dict[str, Any]]]:
        """System calls the filter denied (with seccomp_log), else None."""
        return self.record["denied"]

    @property
    def session(self) -> Optional[str]:
        return self.record.get("session")

    @property
    def id(self) -> str:
        return self.record["id"]

    @property
    def command(self) -> List[str]:
        return self.record["command"]

    @property
    def ok(self) -> bool:
        """The payload exited 0 (and was not stopped by a limit)."""
        return self.status == "exited" and self.exit_code == 0 and not self.timed_out

    def __getattr__(self, name: str) -> Any:
        # Keys a newer library adds to the record, before this class knows them.
        if name in Result.__slots__:
            raise AttributeError(name)
        try:
            return self.record[name]
        except KeyError:
            raise AttributeError(name) from None

    def reason(self) -> str:
        """How the run ended, in a few words."""
        if self.error is not None:
            return self.error.message
        if self.timed_out:
            return "timed out after %g s" % (self.limits["timeout_ms"] / 1000)
        if self.oom_killed:
            return "killed: out of memory"
        if self.status == "signaled":
            return "killed by signal %s" % self.signal
        if self.pids_limit_hit and not self.ok:
            return "exited with code %s (process limit reached)" % self.exit_code
        return "exited with code %s" % self.exit_code

    def __str__(self) -> str:
        """Compact text for a model: the output, then why the run ended."""
        parts = []
        if self.stdout:
            parts.append(self.stdout.rstrip("\n"))
        if self.stderr:
            parts.append("[stderr]\n" + self.stderr.rstrip("\n"))
        parts.append("[%s]" % self.reason())
        return "\n".join(parts)

    def __repr__(self) -> str:
        return "<nsbox.Result %s exit_code=%r duration_ms=%.1f>" % (self.status, self.exit_code, self.duration_ms)


def _textual(mime: str) -> bool:
    return mime.startswith("text/") or mime in ("application/json", "image/svg+xml") or mime.endswith("+json") \
        or mime.endswith("+xml")


def _decode(bundle: Dict[str, str]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for mime, data in bundle.items():
        if _textual(mime):
            out[mime] = data
        else:
            try:
                out[mime] = base64.b64decode(data, validate=True)
            except ValueError:
                out[mime] = data
    return out


def _raw(record: Dict[str, Any], stream: str) -> bytes:
    b64 = record.get(stream + "_base64")
    if b64 is not None:
        return base64.b64decode(b64)
    return (record.get(stream) or "").encode("utf-8")


def fsdecode(b: bytes) -> str:
    return os.fsdecode(b)
