"""Sandbox: a reusable configuration that runs commands and code, sync or async."""
from __future__ import annotations

import asyncio
import codecs
import concurrent.futures
import json
import os
import threading
from typing import (IO, TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union)

from . import _nsbox
from .errors import SandboxError
from .result import Result

if TYPE_CHECKING:
    from .live import LiveSandbox

__all__ = ["Sandbox", "run", "run_code", "arun", "arun_code", "LANGUAGES"]

Argv = Union[str, Sequence[Union[str, bytes]]]
Stdin = Union[None, bytes, str, int, IO[Any]]
OutputCallback = Callable[[str], Any]
Setting = Tuple[str, str, str]

# The languages of code runs and the NSBOX_* variables are the library's
# tables (src/lib/code/lang.c, src/lib/config/env.c): one list for every door.
LANGUAGES: Tuple[str, ...] = tuple(_nsbox.languages())
ENV_KEYS: Tuple[Tuple[str, str], ...] = tuple(_nsbox.env_settings())


def _text(name: str, v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise TypeError("%s: expected a str or a number, got %r" % (name, v))
    return v if isinstance(v, str) else repr(v)


def _duration(name: str, v: Any) -> str:
    """Seconds as a number, or the CLI's text ("30s", "500ms", "2m")."""
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise TypeError("%s: expected seconds or a duration such as '30s', got %r" % (name, v))
    if isinstance(v, str):
        return v
    if v < 0:
        raise ValueError("%s: a duration cannot be negative" % name)
    return "%dms" % round(v * 1000)


def _size(name: str, v: Any) -> str:
    """Bytes as an int, or the CLI's text ("512m", "1g")."""
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise TypeError("%s: expected bytes or a size such as '512m', got %r" % (name, v))
    return v if isinstance(v, str) else str(v)


def _volume(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, (tuple, list)) and len(v) in (2, 3) and all(isinstance(x, (str, os.PathLike)) for x in v):
        return ":".join(os.fspath(x) for x in v)
    raise TypeError("volumes: expected 'SRC:DST[:ro|rw]' or (src, dst[, 'ro'|'rw']), got %r" % (v,))


def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call into the extension, turning its errors into SandboxError."""
    try:
        return fn(*args, **kwargs)
    except _nsbox.Error as e:
        step, errnum, message, hint = e.args
        raise SandboxError._from(step, errnum, message, hint) from None


def _result(text: str) -> Result:
    """The library's record as a Result; a run that could not start (status
    "setup_failed") raises SandboxError with the record attached."""
    record = json.loads(text)
    if record["status"] == "setup_failed":
        e = record.get("error") or {}
        raise SandboxError._from(e.get("step") or "setup", int(e.get("errno") or 0),
                                 e.get("message") or "set up the sandbox", e.get("hint"), record)
    return Result(record)


def _timeout_ms(timeout: Union[None, str, float]) -> int:
    """A per-call timeout for the library: 0 for the configuration's."""
    if timeout is None:
        return 0
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        return max(1, int(round(timeout * 1000)))
    if not isinstance(timeout, str):
        raise TypeError("timeout: expected seconds or a duration such as '30s', got %r" % (timeout,))
    ms = int(_call(_nsbox.parse_duration_ms, timeout))
    if ms == 0:
        raise ValueError("timeout must be positive")
    return ms


def _code_bytes(code: Union[str, bytes], language: str) -> bytes:
    if language not in LANGUAGES:
        raise ValueError("unknown language %r (%s)" % (language, ", ".join(LANGUAGES)))
    return code.encode() if isinstance(code, str) else bytes(code)


class Sandbox:
    """A sandbox configuration. Every run starts a fresh sandbox from it.

    Values are as in the CLI: sizes as "512m" (or bytes as an int), durations
    as "30s" (or seconds as a number), cpus as 0.5. A bad or unknown value
    raises SandboxError (step "config") here, not at the first run.

    A Sandbox may be used from many threads and tasks at once.
    """

    def __init__(self, image: Optional[str] = None, *, rootfs: Optional[Union[str, os.PathLike]] = None,
                 policy: Optional[Union[str, os.PathLike]] = None, memory: Union[None, str, int] = None,
                 cpus: Union[None, str, float] = None, pids: Optional[int] = None,
                 timeout: Union[None, str, float] = None, tmpfs_size: Union[None, str, int] = None,
                 max_output: Union[None, str, int] = None, network: Optional[str] = None,
                 allow_hosts: Iterable[str] = (), allow_host_loopback: bool = False,
                 workspace: Optional[Union[str, os.PathLike]] = None, workspace_mode: Optional[str] = None,
                 workspace_max_size: Union[None, str, int] = None, session: Optional[str] = None,
                 env: Optional[Mapping[str, str]] = None, env_pass: Iterable[str] = (),
                 volumes: Iterable[Any] = (), user: Optional[str] = None, seccomp: Optional[str] = None,
                 seccomp_log: bool = False, workdir: Optional[str] = None, hostname: Optional[str] = None,
                 sysfs: bool = False, nofile: Optional[int] = None, fsize: Union[None, str, int] = None,
                 require_cgroup: bool = False, cgroup_parent: Optional[str] = None,
                 settings: Optional[Mapping[str, Any]] = None, _base: Sequence[Setting] = ()) -> None:
        if image is not None and rootfs is not None:
            raise ValueError("give image or rootfs, not both")
        self.policy: Optional[str] = os.fspath(policy) if policy is not None else None
        s: List[Setting] = list(_base)

        def put(key: str, value: str, origin: str) -> None:
            s.append((key, value, origin))

        if image is not None:
            put("image", _text("image", image), "image")
        if rootfs is not None:
            put("rootfs", os.fspath(rootfs), "rootfs")
        for name, key, val, conv in (("memory", "limits.memory", memory, _size),
                                     ("cpus", "limits.cpus", cpus, _text),
                                     ("pids", "limits.pids", pids, _text),
                                     ("timeout", "limits.timeout", timeout, _duration),
                                     ("tmpfs_size", "limits.tmpfs", tmpfs_size, _size),
                                     ("max_output", "limits.output", max_output, _size),
                                     ("network", "network.mode", network, _text),
                                     ("workspace_mode", "workspace.mode", workspace_mode, _text),
                                     ("workspace_max_size", "workspace.max_size", workspace_max_size, _size),
                                     ("session", "workspace.session", session, _text),
                                     ("user", "security.user", user, _text),
                                     ("seccomp", "security.seccomp", seccomp, _text),
                                     ("workdir", "workdir", workdir, _text),
                                     ("hostname", "hostname", hostname, _text),
                                     ("nofile", "limits.nofile", nofile, _text),
                                     ("fsize", "limits.fsize", fsize, _size),
                                     ("cgroup_parent", "limits.cgroup_parent", cgroup_parent, _text)):
            if val is not None:
                put(key, conv(name, val), name)
        if workspace is not None:
            put("workspace.path", os.fspath(workspace), "workspace")
        if isinstance(allow_hosts, str) or isinstance(env_pass, str):
            raise TypeError("allow_hosts and env_pass take a list of names")
        for h in allow_hosts:
            put("network.allow", _text("allow_hosts", h), "allow_hosts")
        if allow_host_loopback:
            put("network.allow_host_loopback", "true", "allow_host_loopback")
        for k, v in (env or {}).items():
            if "=" in k or not k:
                raise ValueError("env: invalid variable name %r" % k)
            put("environment.set", "%s=%s" % (k, v), "env")
        for n in env_pass:
            put("environment.pass", _text("env_pass", n), "env_pass")
        for v in volumes:
            put("filesystem.mounts", _volume(v), "volumes")
        if seccomp_log:
            put("security.seccomp_log", "true", "seccomp_log")
        if sysfs:
            put("filesystem.sysfs", "true", "sysfs")
        if require_cgroup:
            put("limits.fallback", "refuse", "require_cgroup")
        for k, v in (settings or {}).items():
            for one in (v if isinstance(v, (list, tuple)) else (v,)):
                put(k, _text(k, one) if not isinstance(one, bool) else str(one).lower(), k)
        self._settings: Tuple[Setting, ...] = tuple(s)
        _call(_nsbox.validate, self.policy, self._settings)

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None, **kwargs: Any) -> "Sandbox":
        """A sandbox configured as `nsbox run` would be from the environment:
        NSBOX_POLICY, then the NSBOX_* variables, then the keywords given."""
        env = os.environ if environ is None else environ
        base = [(key, env[var], var) for var, key in ENV_KEYS if var in env]
        if "policy" not in kwargs and env.get("NSBOX_POLICY"):   # as nsbox_env_policy() reads it
            kwargs["policy"] = env["NSBOX_POLICY"]
        return cls(_base=base, **kwargs)

    def config_yaml(self) -> str:
        """The effective configuration as a policy file (`nsbox policy show`)."""
        return str(_call(_nsbox.config_yaml, self.policy, self._settings))

    # ---- running ---------------------------------------------------------

    def run(self, argv: Argv, *, stdin: Stdin = None, timeout: Union[None, str, float] = None,
            on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None) -> Result:
        """Run a command in a fresh sandbox and wait for it.

        ``argv`` is a list (argv[0] looked up in the sandbox's PATH) or a
        string run by ``/bin/sh -c``. ``stdin``: bytes or str to feed, an fd or
        a file object to read from, or None for /dev/null. ``timeout``
        overrides the sandbox's for this run. ``on_stdout``/``on_stderr``
        receive the output (str, decoded as UTF-8 with replacement) while the
        run goes on, in the thread that runs it; an exception raised there
        kills the sandbox and is raised from here. The result holds the
        bounded capture whatever the callbacks did.

        A non-zero exit, a timeout, OOM, a signal are data in the Result.
        SandboxError is raised when nsbox could not run the command.
        """
        return self._run(_argv(argv), None, None, stdin, timeout, on_stdout, on_stderr)

    def run_code(self, code: Union[str, bytes], language: str = "python", *, stdin: Stdin = None,
                 timeout: Union[None, str, float] = None, on_stdout: Optional[OutputCallback] = None,
                 on_stderr: Optional[OutputCallback] = None) -> Result:
        """Run a snippet of ``language`` ("python", "node" or "bash") as
        `nsbox run-code` does: the code is placed in the sandbox's /tmp during
        setup and run there; a failure is classified in ``Result.error``
        (timeout, syntax error, last line of stderr, ...)."""
        return self._run(None, _code_bytes(code, language), language, stdin, timeout, on_stdout, on_stderr)

    async def arun(self, argv: Argv, *, stdin: Stdin = None, timeout: Union[None, str, float] = None,
                   on_stdout: Optional[OutputCallback] = None,
                   on_stderr: Optional[OutputCallback] = None) -> Result:
        """``run`` for asyncio. The sandbox runs in a thread of its own (many
        may run at once); cancelling the task kills the sandbox, waits until
        nothing of it is left (processes, cgroup, mounts), then raises
        CancelledError. Callbacks run in that thread."""
        return await self._arun(_argv(argv), None, None, stdin, timeout, on_stdout, on_stderr)

    async def arun_code(self, code: Union[str, bytes], language: str = "python", *, stdin: Stdin = None,
                        timeout: Union[None, str, float] = None, on_stdout: Optional[OutputCallback] = None,
                        on_stderr: Optional[OutputCallback] = None) -> Result:
        """``run_code`` for asyncio, cancellable as ``arun``."""
        return await self._arun(None, _code_bytes(code, language), language, stdin, timeout, on_stdout, on_stderr)

    def start(self, *, name: Optional[str] = None, idle_timeout: Union[None, str, float] = None,
              lifetime: Union[None, str, float] = None, publish: Any = (), pause_when_idle: bool = False,
              detach: bool = False, from_snapshot: Optional[str] = None) -> "LiveSandbox":
        """A long-lived sandbox from this configuration (set up now): run
        commands in it with ``exec``, keep an interpreter with ``context``,
        move files with ``files``; a context manager (``with sb.start() as
        live: ...``). ``name`` (default: generated) is how ``nsbox ps``,
        ``nsbox exec NAME`` and ``nsbox.connect(name)`` find it. It ends
        with ``close()``, when this process exits (unless ``detach`` or
        ``detach()``), after ``idle_timeout`` without a request or a
        running background process (paused instead with
        ``pause_when_idle``), and after ``lifetime``. ``publish``: ports
        forwarded from the host's loopback (``[8080]``: any free host port;
        ``[(18080, 8080)]``; ``["0.0.0.0:18080:8080"]``). ``from_snapshot``:
        start with a snapshot's files (``LiveSandbox.snapshot``), its
        configuration the policy under this Sandbox's settings."""
        from .live import LiveSandbox
        return LiveSandbox(self, name=name, idle_timeout=idle_timeout, lifetime=lifetime, publish=publish,
                           pause_when_idle=pause_when_idle, detach=detach, from_snapshot=from_snapshot)

    # ---- internals -------------------------------------------------------

    async def _arun(self, argv: Any, code: Optional[bytes], language: Optional[str], stdin: Stdin, timeout: Any,
                    on_stdout: Optional[OutputCallback], on_stderr: Optional[OutputCallback]) -> Result:
        return await _in_thread(lambda handle: self._run(argv, code, language, stdin, timeout, on_stdout,
                                                         on_stderr, handle))

    def _run(self, argv: Any, code: Optional[bytes], language: Optional[str], stdin: Stdin, timeout: Any,
             on_stdout: Optional[OutputCallback], on_stderr: Optional[OutputCallback], handle: Any = None) -> Result:
        ms = _timeout_ms(timeout)
        out = _Stream(on_stdout, on_stderr) if (on_stdout or on_stderr) else None
        fd, close_fd = _stdin_fd(stdin)
        args = (self.policy, self._settings, argv, code, language, fd, out.feed if out else None)
        try:
            if handle is None and threading.current_thread() is threading.main_thread():
                text = _interruptible(lambda h: _call(_nsbox.run, *args, h, ms))
            else:
                text = _call(_nsbox.run, *args, handle, ms)
        finally:
            if close_fd:
                os.close(fd)
        if out:
            out.flush()
        return _result(text)

    def __repr__(self) -> str:
        return "nsbox.Sandbox(%s)" % ", ".join("%s=%r" % (o, v) for _, v, o in self._settings)


_main_worker: Optional[concurrent.futures.ThreadPoolExecutor] = None


def _forget_worker() -> None:
    # A forked child has no worker thread: it makes its own when it runs.
    global _main_worker
    _main_worker = None


os.register_at_fork(after_in_child=_forget_worker)


def _interruptible(call: Callable[[Any], Any]) -> Any:
    """``call(handle)`` in a worker thread while the main thread waits: a
    signal handler (Ctrl-C's KeyboardInterrupt) runs at once, and the
    exception it raises cancels the run (a command is killed, a cell
    interrupted), waits until it has ended, and goes on up. (In the main
    thread itself, the handler would wait for the run.) One worker kept for
    the purpose: only the main thread uses it."""
    global _main_worker
    if _main_worker is None:
        _main_worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="nsbox-main")
    handle = _nsbox.Handle()
    # Our own future, made before the hand-over: the handler may run inside
    # submit() itself (starting the worker thread waits), when the run is
    # queued or even started but submit's future not yet ours.
    fut: "concurrent.futures.Future[Any]" = concurrent.futures.Future()
    try:
        _main_worker.submit(_run_for, fut, call, handle)
        return fut.result()
    except BaseException:
        if not fut.done():
            handle.kill()
            # A run not started never starts; one running ends (killed)
            # before the exception goes on.
            if not fut.cancel():
                concurrent.futures.wait([fut])
        raise


def _run_for(fut: "concurrent.futures.Future[Any]", call: Callable[[Any], Any], handle: Any) -> None:
    """The worker's side of _interruptible: ``call(handle)`` into ``fut``,
    unless it was cancelled before the worker took it."""
    if not fut.set_running_or_notify_cancel():
        return
    try:
        fut.set_result(call(handle))
    except BaseException as e:   # handed to the waiting main thread
        fut.set_exception(e)


async def _in_thread(call: Callable[[Any], Any]) -> Any:
    """``call(handle)`` for asyncio, in a thread of its own (many may run at
    once); cancelling the task cancels the run (a command is killed, a cell
    interrupted), waits until it has ended, then raises CancelledError."""
    loop = asyncio.get_running_loop()
    done: "asyncio.Future[Any]" = loop.create_future()
    handle = _nsbox.Handle()

    def settle(value: Any, exc: Optional[BaseException]) -> None:
        if done.cancelled():
            return
        if exc is not None:
            done.set_exception(exc)
        else:
            done.set_result(value)

    def work() -> None:
        try:
            outcome: Tuple[Any, Optional[BaseException]] = (call(handle), None)
        except BaseException as e:   # handed to the awaiting task
            outcome = (None, e)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:
            pass   # the loop was closed meanwhile: no one waits for it

    runner = threading.Thread(target=work, name="nsbox-run", daemon=True)
    try:
        runner.start()
    except BaseException:
        # Interrupted while the thread started (a KeyboardInterrupt where
        # asyncio.run's handler is not installed): the run may be under way.
        # Cancelled first, it never starts or is killed; a thread that runs
        # is waited for.
        handle.kill()
        if runner.ident is not None:
            runner.join()
        raise
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        handle.kill()
        # Nothing of the run may outlive the task: wait for the thread's
        # run to end (it is cancelled, so this is short).
        while not done.done():
            try:
                await asyncio.shield(done)
            except asyncio.CancelledError:
                continue
            except BaseException:
                break
        if done.done() and not done.cancelled():
            done.exception()   # retrieved: no "never retrieved" warning
        raise


def _argv(argv: Argv) -> List[Union[str, bytes]]:
    if isinstance(argv, str):
        return ["/bin/sh", "-c", argv]
    a = list(argv)
    if not a or not all(isinstance(x, (str, bytes)) for x in a):
        raise TypeError("argv: expected a non-empty list of str/bytes, or a shell command string")
    return a


def _stdin_fd(stdin: Stdin) -> Tuple[int, bool]:
    """The fd the sandbox reads as stdin, and whether we made (and close) it.
    Data is handed over in a sealed-size memfd: no thread needs to feed a pipe."""
    if stdin is None:
        return -1, False
    if isinstance(stdin, int) and not isinstance(stdin, bool):
        return stdin, False
    if isinstance(stdin, (bytes, bytearray, memoryview, str)):
        data = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
        fd = os.memfd_create("nsbox-stdin", os.MFD_CLOEXEC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.lseek(fd, 0, os.SEEK_SET)
        except BaseException:
            os.close(fd)
            raise
        return fd, True
    if hasattr(stdin, "fileno"):
        return stdin.fileno(), False
    raise TypeError("stdin: expected bytes, str, an fd, a file object or None")


class _Stream:
    """Chunks from the library, decoded incrementally (a character may be
    split between two reads), to the caller's callbacks."""

    def __init__(self, on_stdout: Optional[OutputCallback], on_stderr: Optional[OutputCallback]) -> None:
        self.cb = {1: on_stdout, 2: on_stderr}
        self.dec = {1: codecs.getincrementaldecoder("utf-8")("replace"),
                    2: codecs.getincrementaldecoder("utf-8")("replace")}

    def feed(self, stream: int, data: bytes) -> None:
        cb = self.cb.get(stream)
        if cb:
            text = self.dec[stream].decode(data)
            if text:
                cb(text)

    def flush(self) -> None:
        for s in (1, 2):
            cb = self.cb[s]
            if cb:
                text = self.dec[s].decode(b"", final=True)
                if text:
                    cb(text)


_SANDBOX_KW = ("image", "rootfs", "policy", "memory", "cpus", "pids", "timeout", "tmpfs_size", "max_output",
               "network", "allow_hosts", "allow_host_loopback", "workspace", "workspace_mode",
               "workspace_max_size", "session", "env", "env_pass", "volumes", "user", "seccomp", "seccomp_log",
               "workdir", "hostname", "sysfs", "nofile", "fsize", "require_cgroup", "cgroup_parent", "settings")


def _split(kw: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    sb = {k: kw.pop(k) for k in list(kw) if k in _SANDBOX_KW and k != "timeout"}
    return sb, kw


def run(argv: Argv, **kwargs: Any) -> Result:
    """One sandbox, one command: ``nsbox.run(["ls"], image="default", memory="256m")``.
    Takes the keywords of Sandbox and of Sandbox.run."""
    sb, rest = _split(kwargs)
    return Sandbox(**sb).run(argv, **rest)


def run_code(code: Union[str, bytes], language: str = "python", **kwargs: Any) -> Result:
    """One sandbox, one snippet: ``nsbox.run_code("print(6*7)").stdout == "42\\n"``."""
    sb, rest = _split(kwargs)
    return Sandbox(**sb).run_code(code, language, **rest)


async def arun(argv: Argv, **kwargs: Any) -> Result:
    sb, rest = _split(kwargs)
    return await Sandbox(**sb).arun(argv, **rest)


async def arun_code(code: Union[str, bytes], language: str = "python", **kwargs: Any) -> Result:
    sb, rest = _split(kwargs)
    return await Sandbox(**sb).arun_code(code, language, **rest)
