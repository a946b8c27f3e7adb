"""Long-lived sandboxes: ``Sandbox.start()``, commands run in them, and code
contexts (a persistent interpreter whose variables outlive each cell)."""
from __future__ import annotations

import asyncio
import functools
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from . import _nsbox
from .result import Result

if TYPE_CHECKING:
    from .sandbox import Argv, OutputCallback, Sandbox, Stdin

__all__ = ["LiveSandbox", "Context", "Files", "FileInfo", "Process", "Logs", "CONTEXT_LANGUAGES", "connect",
           "sandboxes", "stop", "snapshots", "remove_snapshot"]

# The languages a context can run (the library's agents, src/lib/code/agents/).
CONTEXT_LANGUAGES = ("python", "node")


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    from .sandbox import _call as call   # the SDK's one translation of _nsbox.Error
    return call(fn, *args, **kwargs)


@dataclass(frozen=True)
class FileInfo:
    """An entry inside a sandbox: ``type`` is "file", "dir", "symlink" or
    "other"; ``mode`` the permission bits; ``mtime`` seconds since the epoch
    (a float, nanoseconds kept)."""
    name: str
    path: str
    type: str
    size: int
    mode: int
    mtime: float


_TYPES = {"f": "file", "d": "dir", "l": "symlink", "o": "other"}


def _info(t: Any) -> FileInfo:
    name, path, typ, mode, size, mtime_ns = t
    return FileInfo(name, path, _TYPES.get(typ, "other"), size, mode, mtime_ns / 1e9)


class Files:
    """The files of a long-lived sandbox (``live.files``): read and written
    inside it, as its user, in its own root. A symlink in the sandbox that
    points at /etc/shadow reads the sandbox's file, never the host's; a write
    lands only where the sandbox's user may write. Paths are absolute, or
    relative to the sandbox's working directory. Binary-exact; bounded by
    ``files.max_size`` (256 MiB unless the policy says otherwise), not by
    ``max_output``. Every method has an async form (``awrite``, ``aread``...)."""

    def __init__(self, live: "LiveSandbox") -> None:
        self._live = live

    def write(self, path: str, data: Union[str, bytes, int, Any], *, mode: int = 0o644) -> None:
        """Write ``data`` as the file at ``path``, whole or not at all (a
        temporary beside it, renamed into place). ``data``: str (as UTF-8),
        bytes, or a readable binary file object or fd, streamed to its end."""
        if isinstance(data, str):
            src: Any = data.encode()
        elif isinstance(data, (bytes, bytearray, memoryview)):
            src = bytes(data)
        elif isinstance(data, int) and not isinstance(data, bool):
            src = data
        elif hasattr(data, "fileno"):
            src = data.fileno()
        else:
            raise TypeError("data: expected str, bytes, a binary file object or an fd")
        _call(self._live._live.file_write, path, src, mode, 0)

    def read(self, path: str) -> bytes:
        """The file's bytes."""
        return bytes(_call(self._live._live.file_read, path, 0))

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding)

    def list(self, path: str = ".") -> List[FileInfo]:
        """The directory's entries (not . and ..), in the order the
        filesystem gives them."""
        return [_info(t) for t in _call(self._live._live.file_list, path)]

    def stat(self, path: str) -> Optional[FileInfo]:
        """What is at ``path`` (a symlink itself), or None."""
        t = _call(self._live._live.file_stat, path)
        return None if t is None else _info(t)

    def exists(self, path: str) -> bool:
        return self.stat(path) is not None

    def remove(self, path: str, *, recursive: bool = True) -> None:
        """Remove the file, link or directory (with what it holds)."""
        _call(self._live._live.file_remove, path, recursive)

    def make_dir(self, path: str, *, mode: int = 0o755) -> None:
        """Make the directory and any parent it lacks."""
        _call(self._live._live.file_mkdir, path, mode)

    async def _a(self, fn: Any, *args: Any, **kw: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args, **kw))

    async def awrite(self, path: str, data: Union[str, bytes], **kw: Any) -> None:
        await self._a(self.write, path, data, **kw)

    async def aread(self, path: str) -> bytes:
        return await self._a(self.read, path)

    async def alist(self, path: str = ".") -> List[FileInfo]:
        return await self._a(self.list, path)

    async def aexists(self, path: str) -> bool:
        return await self._a(self.exists, path)

    async def aremove(self, path: str, **kw: Any) -> None:
        await self._a(self.remove, path, **kw)


@dataclass(frozen=True)
class Logs:
    """A background process's output: the last bytes of each stream (a
    bounded ring), decoded as UTF-8 with replacement, and how many bytes it
    wrote in all."""
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int


class Process:
    """A command running in the background of a long-lived sandbox (made by
    ``LiveSandbox.spawn``): it outlives the call that started it and ends
    with the sandbox, or when killed. Its record (``wait()``) is a run's."""

    def __init__(self, live: "LiveSandbox", proc: Any, argv: List[str]) -> None:
        self._live, self._proc, self.argv = live, proc, argv

    @property
    def id(self) -> str:
        return self._proc.id

    @property
    def running(self) -> bool:
        return self._proc.running

    def logs(self) -> Logs:
        out, n_out = _call(self._proc.logs, 1)
        err, n_err = _call(self._proc.logs, 2)
        return Logs(out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), n_out, n_err)

    def wait(self, timeout: Union[None, str, float] = None) -> Result:
        """Its record once it ends; TimeoutError if it still runs after
        ``timeout`` (None: wait as long as it takes)."""
        from .sandbox import _result, _timeout_ms
        text = _call(self._proc.wait, _timeout_ms(timeout))
        if text is None:
            raise TimeoutError("process %s still runs" % self.id)
        return _result(text)

    def kill(self, sig: int = 9) -> bool:
        """Signal it (SIGKILL: it and all it started); False once it ended."""
        return bool(self._proc.kill(int(sig)))

    def __repr__(self) -> str:
        return "nsbox.Process(id=%r, argv=%r, running=%r)" % (self.id, self.argv, self.running)


class LiveSandbox:
    """A sandbox that stays up: ``exec`` runs commands in it one after another
    (or at once, from several threads), files persist between them, and
    ``context`` gives a persistent interpreter. Every exec has the sandbox's
    namespaces, root filesystem, limits (one cgroup shared by all execs),
    seccomp filter and credentials, and a pid namespace of its own: what a
    command starts dies with it. Every exec and cell is governed by the
    sandbox's policy as a run is (audit log, artifacts, import gate).

    It has a name and a monitor process of its own, so it shows in
    ``nsbox ps`` and any process of the same user can attach to it
    (``nsbox.connect(name)``, ``nsbox exec NAME``). Made by
    ``Sandbox.start()``, it belongs to this process: it ends with ``close()``
    (or the ``with`` block), or when this process exits, unless
    ``detach()``ed; ``idle_timeout`` and ``lifetime`` bound it either way.
    One from ``nsbox.connect`` belongs to no one here: ``close()`` lets it
    go, ``stop()`` ends it."""

    def __init__(self, sandbox: Optional["Sandbox"], *, name: Optional[str] = None,
                 idle_timeout: Union[None, str, float] = None, lifetime: Union[None, str, float] = None,
                 publish: Any = (), pause_when_idle: bool = False, detach: bool = False,
                 from_snapshot: Optional[str] = None, _attach: Optional[str] = None) -> None:
        from .sandbox import _timeout_ms
        self._sandbox = sandbox
        self._contexts: List["Context"] = []
        self._processes: List[Process] = []
        self._lock = threading.Lock()
        self._owner = _attach is None and not detach
        if _attach is not None:
            self._live = _call(_nsbox.Live, attach=_attach)
        else:
            assert sandbox is not None
            flags = (1 if detach else 0) | (2 if pause_when_idle else 0)
            pub = [_publish_spec(p) for p in (publish or ())]
            policy = sandbox.policy
            if from_snapshot is not None:
                if policy is not None:
                    raise ValueError("from_snapshot: the snapshot's configuration is the policy; the Sandbox "
                                     "has one of its own (%r)" % (policy,))
                policy = _call(_nsbox.snapshot_policy, from_snapshot)
            self._live = _call(_nsbox.Live, policy, sandbox._settings, name, _timeout_ms(idle_timeout),
                               _timeout_ms(lifetime), pub, flags, None, from_snapshot)
        self.files = Files(self)

    @property
    def name(self) -> Optional[str]:
        """Its name: ``nsbox ps`` lists it, ``nsbox.connect(name)`` attaches."""
        return self._live.name

    def detach(self) -> None:
        """Let the sandbox outlive this process and this handle (its idle
        timeout and lifetime still bound it)."""
        _call(self._live.detach)
        self._owner = False

    def snapshot(self, name: str) -> None:
        """Keep what the sandbox wrote to /tmp and its home (files, packages
        installed with pip --user or npm) and its configuration as the
        snapshot ``name`` (replacing one of that name);
        ``Sandbox().start(from_snapshot=name)`` or ``nsbox start --from
        name`` starts sandboxes with them. Process memory is not kept."""
        _call(self._live.snapshot, name)

    def stop(self) -> None:
        """End the sandbox and everything in it, whoever started it."""
        with self._lock:
            contexts, self._contexts = self._contexts, []
        for c in contexts:
            c.close()
        self._live.close(True)

    @property
    def id(self) -> Optional[str]:
        """The sandbox's id: ``sandbox`` in each exec's record."""
        return self._live.id

    def exec(self, argv: "Argv", *, stdin: "Stdin" = None, timeout: Union[None, str, float] = None,
             workdir: Optional[str] = None, on_stdout: Optional["OutputCallback"] = None,
             on_stderr: Optional["OutputCallback"] = None) -> Result:
        """Run a command in the sandbox and wait for it: a Result with the
        same record as ``Sandbox.run`` (plus ``sandbox``). ``timeout``
        (default: the sandbox's) kills the command and all it started."""
        from .sandbox import _argv
        return self._exec(_argv(argv), None, None, stdin, timeout, workdir, on_stdout, on_stderr, None)

    def run_code(self, code: Union[str, bytes], language: str = "python", *, stdin: "Stdin" = None,
                 timeout: Union[None, str, float] = None, workdir: Optional[str] = None,
                 on_stdout: Optional["OutputCallback"] = None,
                 on_stderr: Optional["OutputCallback"] = None) -> Result:
        """Run a snippet in the sandbox in a fresh interpreter (the code on
        its command line), classified as ``Sandbox.run_code`` classifies it.
        For state that persists between snippets, use ``context``."""
        from .sandbox import _code_bytes
        return self._exec(None, _code_bytes(code, language), language, stdin, timeout, workdir, on_stdout,
                          on_stderr, None)

    def _exec(self, argv: Any, code: Optional[bytes], language: Optional[str], stdin: "Stdin", timeout: Any,
              workdir: Optional[str], on_stdout: Any, on_stderr: Any, handle: Any) -> Result:
        from .sandbox import _interruptible, _result, _stdin_fd, _Stream, _timeout_ms
        ms = _timeout_ms(timeout)
        out = _Stream(on_stdout, on_stderr) if (on_stdout or on_stderr) else None
        fd, close_fd = _stdin_fd(stdin)
        args = (argv, code, language, None, workdir, ms, fd, out.feed if out else None)
        try:
            if handle is None and threading.current_thread() is threading.main_thread():
                text = _interruptible(lambda h: _call(self._live.exec, *args, h))
            else:
                text = _call(self._live.exec, *args, handle)
        finally:
            if close_fd:
                os.close(fd)
        if out:
            out.flush()
        return _result(text)

    async def aexec(self, argv: "Argv", **kwargs: Any) -> Result:
        """``exec`` for asyncio; cancelling the task kills the command."""
        from .sandbox import _argv, _in_thread
        a = _argv(argv)
        return await _in_thread(lambda h: self._exec(a, None, None, kwargs.get("stdin"), kwargs.get("timeout"),
                                                     kwargs.get("workdir"), kwargs.get("on_stdout"),
                                                     kwargs.get("on_stderr"), h))

    def spawn(self, argv: "Argv", *, env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
              timeout: Union[None, str, float] = None, log_bytes: int = 1 << 20) -> Process:
        """Start a command in the background (a server, a watcher): its
        output is kept in a ring of the last ``log_bytes`` per stream
        (``Process.logs()``); ``env`` is set over the sandbox's environment.
        It runs until it exits, is killed, or the sandbox ends, or for
        ``timeout`` at most (default: no bound)."""
        from .sandbox import _argv, _timeout_ms
        a = _argv(argv)
        e = None if env is None else ["%s=%s" % kv for kv in env.items()]
        ms = _timeout_ms(timeout)
        proc = _call(self._live.spawn, a, e, cwd, ms, int(log_bytes))
        p = Process(self, proc, [x if isinstance(x, str) else x.decode() for x in a])
        with self._lock:
            self._processes.append(p)
        return p

    def expose(self, port: int, host_port: int = 0, *, host: str = "127.0.0.1") -> int:
        """Publish ``port`` of the sandbox (a server on its loopback) on the
        host: connections to ``host:host_port`` (0: a free port) are relayed
        to it, while the sandbox keeps its network mode. Returns the host
        port. It lasts as long as the sandbox."""
        return int(_call(self._live.expose, int(port), host, int(host_port)))

    def pause(self) -> None:
        """Freeze every process in the sandbox (the cgroup freezer: CPU time
        stops, memory stays) until ``resume()``. Execs, cells and file
        operations meanwhile fail (SandboxError, errno EAGAIN). Needs a
        cgroup (root, or a delegated cgroup v2 directory)."""
        _call(self._live.pause, True)

    def resume(self) -> None:
        _call(self._live.pause, False)

    @property
    def paused(self) -> bool:
        return bool(self._live.paused)

    def processes(self) -> List[Process]:
        """The sandbox's background processes, running or ended (those other
        clients started too)."""
        import json
        listed = json.loads(_call(self._live.process_list))
        with self._lock:
            mine = {p.id: p for p in self._processes}
        out = []
        for d in listed:
            p = mine.get(d["id"])
            if p is None:
                p = Process(self, _call(self._live.process, d["id"]), [])
                with self._lock:
                    self._processes.append(p)
            out.append(p)
        return out

    def process(self, id: str) -> Process:
        """The background process ``id`` (``nsbox exec --detach`` prints it)."""
        return Process(self, _call(self._live.process, id), [])

    def context(self, language: str = "python", name: Optional[str] = None) -> "Context":
        """A persistent interpreter in this sandbox (started now)."""
        ctx = Context(self, language, name)
        with self._lock:
            self._contexts.append(ctx)
        return ctx

    def close(self) -> None:
        """Let the sandbox go: one this process started (and did not
        detach) ends, with everything in it; one attached to with
        ``nsbox.connect`` runs on. Idempotent."""
        with self._lock:
            contexts, self._contexts = self._contexts, []
        for c in contexts:
            c.close()
        self._live.close(self._owner)

    def __enter__(self) -> "LiveSandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "nsbox.LiveSandbox(name=%r, id=%r)" % (self.name, self.id)


def _publish_spec(p: Any) -> str:
    """``8080`` (any free host port), ``(host_port, port)``,
    ``(host, host_port, port)``, or the CLI's "[ADDR:]HOSTPORT:PORT"."""
    if isinstance(p, int):
        return "0:%d" % p
    if isinstance(p, str):
        return p
    t = tuple(p)
    if len(t) == 2:
        return "%d:%d" % (int(t[0]), int(t[1]))
    if len(t) == 3:
        host = str(t[0])
        return "%s:%d:%d" % ("[%s]" % host if ":" in host else host, int(t[1]), int(t[2]))
    raise ValueError("publish: expected a port, (host_port, port), (host, host_port, port) or "
                     "'[ADDR:]HOSTPORT:PORT'")


def connect(name: str) -> LiveSandbox:
    """Attach to the running sandbox ``name`` (yours: same user; started by
    ``nsbox start``, ``Sandbox.start`` in any process, or an MCP server).
    ``close()`` lets it go; ``stop()`` ends it."""
    return LiveSandbox(None, _attach=name)


def snapshots() -> List[Dict[str, Any]]:
    """Your snapshots (``nsbox snapshot ls --json``): name, sandbox, id,
    created, size_bytes."""
    import json
    return list(json.loads(_call(_nsbox.snapshot_list)))


def remove_snapshot(name: str) -> None:
    _call(_nsbox.snapshot_remove, name)


def sandboxes() -> List[Dict[str, Any]]:
    """Your running sandboxes, as ``nsbox ps --json`` lists them: name, id,
    image, started, paused, published ports, contexts..."""
    import json
    return list(json.loads(_call(_nsbox.live_list)))


def stop(name: str) -> None:
    """End the sandbox ``name`` and wait until it is gone."""
    _call(_nsbox.live_stop, name)


class Context:
    """A persistent interpreter in a long-lived sandbox: ``run(code)`` runs a
    cell; variables, imports and functions persist from one cell to the next.
    A cell's final expression is printed (as in a notebook). A cell that
    outlives its timeout is interrupted (KeyboardInterrupt in Python) and
    reported ``timed_out``; the context and its state survive. One that does
    not stop within two seconds is killed, and the next cell gets a fresh
    interpreter (``context.restarted`` in its record; the cell that lost it
    says ``state_lost``). So does one that runs out of memory
    (``oom_killed``). ``restart()`` gives a fresh one on demand,
    ``interrupt()`` stops the running cell (from any thread). Cells of one
    context run one at a time. The record is the library's, as for any run:
    output bounded by the sandbox's ``max_output``, resources, limits."""

    def __init__(self, live: LiveSandbox, language: str, name: Optional[str] = None) -> None:
        if language not in CONTEXT_LANGUAGES:
            raise ValueError("unknown context language %r (python, node)" % (language,))
        self.language = language
        self._live = live
        self._ctx = _call(_nsbox.Context, live._live, language, name)

    def run(self, code: str, *, timeout: Union[None, str, float] = None,
            on_stdout: Optional["OutputCallback"] = None, on_stderr: Optional["OutputCallback"] = None) -> Result:
        """Run one cell; a Result (``context`` in its record: its name, the
        language, the cell's number, whether the interpreter was restarted
        for it and whether its state was lost). ``on_stdout``/``on_stderr``
        receive the output while the cell runs."""
        return self._run(code, timeout, on_stdout, on_stderr, None)

    async def arun(self, code: str, *, timeout: Union[None, str, float] = None,
                   on_stdout: Optional["OutputCallback"] = None,
                   on_stderr: Optional["OutputCallback"] = None) -> Result:
        """``run`` for asyncio; cancelling the task interrupts the cell
        (KeyboardInterrupt) and keeps the state."""
        from .sandbox import _in_thread
        return await _in_thread(lambda h: self._run(code, timeout, on_stdout, on_stderr, h))

    def _run(self, code: str, timeout: Any, on_stdout: Any, on_stderr: Any, handle: Any) -> Result:
        from .sandbox import _interruptible, _result, _Stream, _timeout_ms
        if not isinstance(code, str):
            raise TypeError("code: expected str")
        ms = _timeout_ms(timeout)
        out = _Stream(on_stdout, on_stderr) if (on_stdout or on_stderr) else None
        args = (code, ms, out.feed if out else None)
        if handle is None and threading.current_thread() is threading.main_thread():
            text = _interruptible(lambda h: _call(self._ctx.run, *args, h))
        else:
            text = _call(self._ctx.run, *args, handle)
        if out:
            out.flush()
        return _result(text)

    def interrupt(self) -> None:
        """KeyboardInterrupt in the running cell (the state survives)."""
        self._ctx.interrupt()

    def restart(self) -> None:
        """A fresh interpreter: every variable is gone."""
        _call(self._ctx.restart)

    def close(self) -> None:
        self._ctx.close()

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
