"""Long-lived sandboxes: ``Sandbox.start()``, commands run in them, and code
contexts (a persistent interpreter whose variables outlive each cell)."""
from __future__ import annotations

import asyncio
import functools
import json
import os
import secrets
import select
import signal
import socket
import struct
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Union

from . import _nsbox
from .errors import SandboxError
from .result import Result

if TYPE_CHECKING:
    from .sandbox import Argv, Sandbox, Stdin

__all__ = ["LiveSandbox", "Context", "CONTEXT_LANGUAGES"]

# What runs a context: the interpreter and its agent (nsbox/contexts/).
CONTEXT_LANGUAGES: Dict[str, Tuple[List[str], str]] = {
    "python": (["python3", "-I", "-u", "-c"], "agent.py"),
    "node": (["node", "-e"], "agent.js"),
}
# A cell that ignores the interrupt this long after its timeout is killed,
# with the context (the next cell starts a fresh one).
INTERRUPT_GRACE_S = 2.0
_FRAME_MAX = 16 << 20


def _agent(name: str) -> str:
    with open(os.path.join(os.path.dirname(__file__), "contexts", name), encoding="utf-8") as f:
        return f.read()


def _call(fn: Any, *args: Any) -> Any:
    from .sandbox import _call as call   # the SDK's one translation of _nsbox.Error
    return call(fn, *args)


def _ms(timeout: Union[None, str, float]) -> int:
    if timeout is None:
        return 0
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        return max(1, int(timeout * 1000))
    return int(_call(_nsbox.parse_duration_ms, str(timeout)))


class LiveSandbox:
    """A sandbox that stays up: ``exec`` runs commands in it one after another
    (or at once, from several threads), files persist between them, and
    ``context`` gives a persistent interpreter. Every exec has the sandbox's
    namespaces, root filesystem, limits (one cgroup shared by all execs),
    seccomp filter and credentials, and a pid namespace of its own: what a
    command starts dies with it. Made by ``Sandbox.start()``; a context
    manager; ``close()`` ends it and everything in it."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sandbox = sandbox
        self._contexts: List["Context"] = []
        self._lock = threading.Lock()
        self._live = _call(_nsbox.Live, sandbox.policy, sandbox._settings)

    @property
    def id(self) -> Optional[str]:
        """The sandbox's id: ``sandbox`` in each exec's record."""
        return self._live.id

    def exec(self, argv: "Argv", *, stdin: "Stdin" = None, timeout: Union[None, str, float] = None,
             workdir: Optional[str] = None) -> Result:
        """Run a command in the sandbox and wait for it: a Result with the
        same record as ``Sandbox.run`` (plus ``sandbox``). ``timeout``
        (default: the sandbox's) kills the command and all it started."""
        from .sandbox import _argv, _stdin_fd
        fd, close_fd = _stdin_fd(stdin)
        try:
            text = _call(self._live.exec, _argv(argv), None, workdir, _ms(timeout), fd)
        finally:
            if close_fd:
                os.close(fd)
        record = json.loads(text)
        if record["status"] == "setup_failed":
            e = record.get("error") or {}
            raise SandboxError._from(e.get("step") or "setup", int(e.get("errno") or 0),
                                     e.get("message") or "run in the sandbox", record)
        return Result(record)

    async def aexec(self, argv: "Argv", **kwargs: Any) -> Result:
        """``exec`` for asyncio (in a worker thread)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(self.exec, argv, **kwargs))

    def context(self, language: str = "python") -> "Context":
        """A persistent interpreter in this sandbox (started now)."""
        ctx = Context(self, language)
        with self._lock:
            self._contexts.append(ctx)
        return ctx

    def close(self) -> None:
        """End the sandbox and everything in it; idempotent."""
        with self._lock:
            contexts, self._contexts = self._contexts, []
        for c in contexts:
            c.close()
        self._live.close()

    def __enter__(self) -> "LiveSandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "nsbox.LiveSandbox(id=%r)" % (self.id,)


class _Capture:
    """Head and tail of a stream, bounded like the record's."""

    def __init__(self, cap: int) -> None:
        self.cap, self.head, self.tail, self.total = cap, bytearray(), bytearray(), 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.cap // 2 - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            del self.tail[:max(0, len(self.tail) - (self.cap - self.cap // 2))]

    def text(self) -> Tuple[str, bool]:
        truncated = self.total > len(self.head) + len(self.tail)
        sep = b"\n[... output truncated ...]\n" if truncated else b""
        return (bytes(self.head) + sep + bytes(self.tail)).decode("utf-8", "replace"), truncated


class Context:
    """A persistent interpreter in a long-lived sandbox: ``run(code)`` runs a
    cell; variables, imports and functions persist from one cell to the next.
    A cell's final expression is printed (as in a notebook). A cell that
    outlives its timeout is interrupted (KeyboardInterrupt in Python) and
    reported ``timed_out``; the context and its state survive. One that does
    not stop within INTERRUPT_GRACE_S is killed, and the next cell gets a
    fresh interpreter (``restarted`` in its record). ``restart()`` gives a
    fresh one on demand. Cells of one context run one at a time."""

    def __init__(self, live: LiveSandbox, language: str) -> None:
        if language not in CONTEXT_LANGUAGES:
            raise ValueError("unknown context language %r (python, node)" % (language,))
        self.language = language
        self._live = live
        self._lock = threading.Lock()
        self._exec: Any = None
        self._sock: Optional[socket.socket] = None
        self._out: List[int] = []
        self._cells = 0
        self._restarted = False
        self._cap = 10240
        self._start()

    # ---- the interpreter -------------------------------------------------

    def _start(self) -> None:
        prefix, agent = CONTEXT_LANGUAGES[self.language]
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        try:
            self._exec = _call(self._live._live.spawn, prefix + [_agent(agent)], None, None, 0, -1,
                               out_w, err_w, theirs.fileno())
        except BaseException:
            for fd in (out_r, err_r):
                os.close(fd)
            ours.close()
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
            theirs.close()
        self._sock, self._out = ours, [out_r, err_r]
        hello = self._recv(30.0, None)
        if not hello or not hello.get("ready"):
            err = self._drain_text()
            self._stop()
            raise SandboxError._from("context", 0, "start the %s context: %s" % (
                self.language, err.strip() or "the interpreter ended before it was ready"))

    def _stop(self) -> None:
        if self._exec is not None:
            self._exec.kill(signal.SIGKILL)
            try:
                self._exec.wait()
            except _nsbox.Error:
                pass
            self._exec = None
        if self._sock:
            self._sock.close()
            self._sock = None
        for fd in self._out:
            os.close(fd)
        self._out = []

    def _drain_text(self) -> str:
        caps = [_Capture(4096), _Capture(4096)]
        self._pump_rest(caps)
        return caps[1].text()[0] or caps[0].text()[0]

    def _recv(self, timeout: Optional[float], outs: Optional[List[_Capture]]) -> Optional[Dict[str, Any]]:
        """The agent's next frame, pumping the output meanwhile; None on the
        timeout or when the interpreter is gone."""
        assert self._sock is not None
        buf = bytearray()
        need = 4
        deadline = None if timeout is None else time.monotonic() + timeout
        fds = [self._sock.fileno()] + self._out
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select(fds, [], [], left)
            if not ready:
                return None
            for fd in ready:
                if fd == self._sock.fileno():
                    chunk = self._sock.recv(65536)
                    if not chunk:
                        return None
                    buf += chunk
                elif outs is not None:
                    data = os.read(fd, 65536)
                    if data:
                        outs[self._out.index(fd)].feed(data)
                    else:
                        fds.remove(fd)
                else:
                    if not os.read(fd, 65536):
                        fds.remove(fd)
            while len(buf) >= need:
                n = struct.unpack(">I", buf[:4])[0]
                if n > _FRAME_MAX:
                    return None
                if len(buf) < 4 + n:
                    need = 4 + n
                    break
                frame = bytes(buf[4:4 + n])
                del buf[:4 + n]
                try:
                    msg = json.loads(frame)
                except ValueError:
                    return None
                return msg if isinstance(msg, dict) else None

    # ---- cells -----------------------------------------------------------

    def run(self, code: str, *, timeout: Union[None, str, float] = None) -> Result:
        """Run one cell; a Result (``context`` in its record: the language,
        the cell's number, whether the interpreter was restarted first)."""
        with self._lock:
            return self._run(code, _ms(timeout) / 1000 if timeout is not None else None)

    def _run(self, code: str, timeout: Optional[float]) -> Result:
        restarted = self._restarted
        self._restarted = False
        if self._exec is None:
            self._start()
            restarted = True
        self._cells += 1
        n = self._cells
        payload = json.dumps({"id": n, "code": code}).encode()
        assert self._sock is not None
        outs = [_Capture(self._cap), _Capture(self._cap)]
        t0 = time.monotonic()
        timed_out = False
        reply: Optional[Dict[str, Any]] = None
        try:
            self._sock.sendall(struct.pack(">I", len(payload)) + payload)
            reply = self._recv(timeout, outs)
            if reply is None and timeout is not None and self._alive():
                # Interrupt, again every 100 ms until the reply: an interrupt
                # that lands as the cell returns can be lost (Node).
                timed_out = True
                end = time.monotonic() + INTERRUPT_GRACE_S
                while reply is None and time.monotonic() < end:
                    self._exec.kill(signal.SIGINT)
                    reply = self._recv(min(0.1, max(0.0, end - time.monotonic())), outs)
        except OSError:
            reply = None
        duration = (time.monotonic() - t0) * 1000
        if reply is not None and reply.get("id") == n:
            self._pump_rest(outs)
            status = reply.get("status")
            code_ = int(reply.get("exit_code") or 0)
            err = reply.get("error")
            if status == "interrupted" and timed_out:
                return self._result(n, "timed_out", None, outs, duration, True, restarted,
                                    "Code execution timed out after %d ms" % int(timeout * 1000), 0)
            return self._result(n, "exited", code_, outs, duration, False, restarted, err,
                                0 if status in ("ok", "exit") and code_ == 0 else 1)
        # No answer: the interpreter is stuck or gone; it is replaced at the
        # next cell.
        self._pump_rest(outs)
        self._stop()
        self._restarted = True
        if timed_out:
            return self._result(n, "timed_out", None, outs, duration, True, restarted,
                                "Code execution timed out after %d ms (the interpreter did not stop "
                                "and was restarted: its state is lost)" % int((timeout or 0) * 1000), 0)
        return self._result(n, "signaled", None, outs, duration, False, restarted,
                            "the interpreter ended during the cell: its state is lost", 1)

    def _alive(self) -> bool:
        return self._exec is not None

    def _pump_rest(self, outs: List[_Capture]) -> None:
        for i, fd in enumerate(self._out):
            os.set_blocking(fd, False)
            try:
                while True:
                    b = os.read(fd, 65536)
                    if not b:
                        break
                    outs[i].feed(b)
            except BlockingIOError:
                pass
            os.set_blocking(fd, True)

    def _result(self, n: int, status: str, exit_code: Optional[int], outs: List[_Capture], duration: float,
                timed_out: bool, restarted: bool, error: Optional[str], failed: int) -> Result:
        out, out_t = outs[0].text()
        err, err_t = outs[1].text()
        exit_status = 124 if timed_out else (exit_code if exit_code is not None else 137)
        record: Dict[str, Any] = {
            "version": 1, "id": secrets.token_hex(16), "sandbox": self._live.id,
            "command": [self.language, "<cell %d>" % n], "status": status, "exit_code": exit_code,
            "signal": None, "timed_out": timed_out, "oom_killed": False, "pids_limit_hit": False,
            "duration_ms": round(duration, 3), "exit_status": exit_status,
            "stdout": out, "stderr": err, "stdout_bytes": outs[0].total, "stderr_bytes": outs[1].total,
            "stdout_truncated": out_t, "stderr_truncated": err_t,
            "context": {"language": self.language, "cell": n, "restarted": restarted},
            "error": {"step": "code", "errno": 0, "message": error} if (error and (failed or timed_out)) else None,
        }
        return Result(record)

    def restart(self) -> None:
        """A fresh interpreter: every variable is gone."""
        with self._lock:
            self._stop()
            self._start()
            self._restarted = True

    def close(self) -> None:
        with self._lock:
            self._stop()

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
