"""nsbox as a Pydantic AI execution environment (``ExecutionEnvironment``).

    from nsbox.integrations.pydantic_ai import execution_environment
    async with execution_environment(nsbox.Sandbox("default")) as env:
        r = await env.execute("python3 -c 'print(6*7)'")     # r.output, r.exit_code
        await env.write_file("notes.txt", "hello\\n")
        print(await env.read_file("notes.txt"))

A long-lived sandbox is started on entering (``__aenter__``) and ended on
leaving. Shell commands run with /bin/sh in the workspace (``/workspace``
when the Sandbox has one, else ``/tmp/workspace``); files are read and written
through the sandbox's files API; ``glob`` and ``grep`` run in the sandbox.
``create_process`` starts an interactive process (stdin and stdout pipes
through ``/bin/sh``). With pydantic_ai installed, ``execution_environment``
returns a subclass of its ``ExecutionEnvironment`` and its result types;
nothing of it is imported before.
"""
from __future__ import annotations

import asyncio
import fnmatch
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..errors import SandboxError
from ..live import LiveSandbox
from ..sandbox import Sandbox
from . import _common

__all__ = ["NsboxEnvironment", "execution_environment", "ExecuteResult", "FileInfo"]

MAX_OUTPUT_CHARS = 100_000


# The environment's result types (pydantic_ai/environments/_base.py), used
# when pydantic_ai is not installed.
@dataclass
class ExecuteResult:
    output: str
    exit_code: int
    truncated: bool = False


@dataclass
class FileInfo:
    name: str
    path: str
    is_dir: bool
    size: Optional[int] = None


def _types() -> Tuple[Any, Any]:
    env = _common.framework("pydantic_ai.environments")
    if env is None or not hasattr(env, "ExecuteResult"):
        return ExecuteResult, FileInfo
    return env.ExecuteResult, env.FileInfo


def _not_found(e: SandboxError, path: str) -> BaseException:
    import errno
    if e.errno == errno.ENOENT:
        return FileNotFoundError(errno.ENOENT, "no such file in the sandbox", path)
    return e


class NsboxEnvironment:
    """``ExecutionEnvironment`` over one long-lived nsbox sandbox."""

    def __init__(self, sandbox: Optional[Sandbox] = None, *, root: Optional[str] = None) -> None:
        self._config = sandbox
        self._root_arg = root
        self._live: Optional[LiveSandbox] = None
        self.root = root or _common.WORKSPACE_SCRATCH
        self._types = _types()

    # ---- lifecycle ----------------------------------------------------------

    async def __aenter__(self) -> "NsboxEnvironment":
        if self._live is None:
            _, self._live, self.root = await asyncio.to_thread(_common.start, self._config, self._root_arg)
        return self

    async def __aexit__(self, *args: Any) -> None:
        live, self._live = self._live, None
        if live is not None:
            await asyncio.to_thread(live.close)

    @property
    def live(self) -> LiveSandbox:
        if self._live is None:
            raise RuntimeError("the environment is not started: use 'async with env:'")
        return self._live

    @property
    def system_prompt(self) -> Optional[str]:
        return ("Commands run in an nsbox sandbox (Linux namespaces, seccomp, no network unless its policy "
                "allows it); the workspace is %s and persists between commands." % self.root)

    # ---- commands -----------------------------------------------------------

    async def execute(self, command: str, *, timeout: Optional[float] = 120,
                      env: Optional[Dict[str, str]] = None) -> Any:
        r = await self.live.aexec(_common.shell(command, env), timeout=_common.seconds(timeout), workdir=self.root)
        out = r.stdout
        cut = r.stdout_truncated or len(out) > MAX_OUTPUT_CHARS
        return self._types[0](output=out[:MAX_OUTPUT_CHARS], exit_code=_common.exit_code(r), truncated=cut)

    async def create_process(self, command: str, *, env: Optional[Dict[str, str]] = None) -> "NsboxProcess":
        return NsboxProcess(self, command, env)

    # ---- files --------------------------------------------------------------

    def _path(self, path: str) -> str:
        return _common.resolve(self.root, path)

    async def read_file_bytes(self, path: str) -> bytes:
        p = self._path(path)
        try:
            return await self.live.files.aread(p)
        except SandboxError as e:
            raise _not_found(e, path) from None

    async def read_file(self, path: str, *, offset: int = 0, limit: int = 2000) -> str:
        """The text with ``cat -n`` style line numbers, from line ``offset``
        (0-based), at most ``limit`` lines, and how to read on."""
        text = (await self.read_file_bytes(path)).decode("utf-8", "replace")
        lines = text.splitlines(keepends=True)
        if lines and offset >= len(lines):
            raise ValueError("Offset %d exceeds file length (%d lines)." % (offset, len(lines)))
        part = lines[max(0, offset):max(0, offset) + max(0, limit)]
        out = "".join("%6d\t%s" % (i, l) for i, l in enumerate(part, start=max(0, offset) + 1))
        if not out.endswith("\n"):
            out += "\n"
        left = len(lines) - (max(0, offset) + len(part))
        if left > 0:
            out += "... (%d more lines. Use offset=%d to continue reading.)\n" % (left, max(0, offset) + len(part))
        return out

    async def write_file(self, path: str, content: Any) -> None:
        p = self._path(path)
        parent = posixpath.dirname(p)
        await asyncio.to_thread(self.live.files.make_dir, parent)
        await self.live.files.awrite(p, content if isinstance(content, (str, bytes)) else bytes(content))

    async def edit_file(self, path: str, old_string: str, new_string: str, *, replace_all: bool = False) -> int:
        text = (await self.read_file_bytes(path)).decode("utf-8")
        n = text.count(old_string)
        if n == 0:
            raise ValueError("old_string not found in %s." % path)
        if n > 1 and not replace_all:
            raise ValueError("old_string found %d times in %s. Use replace_all=True or provide more context."
                             % (n, path))
        text = text.replace(old_string, new_string) if replace_all else text.replace(old_string, new_string, 1)
        p = self._path(path)
        info = await asyncio.to_thread(self.live.files.stat, p)
        await asyncio.to_thread(self.live.files.write, p, text, mode=info.mode if info else 0o644)
        return n if replace_all else 1

    async def ls(self, path: str = ".") -> List[Any]:
        p = self._path(path)
        try:
            entries = await self.live.files.alist(p)
        except SandboxError as e:
            raise _not_found(e, path) from None
        return [self._types[1](name=f.name, path=posixpath.join(path, f.name) if path != "." else f.name,
                               is_dir=f.type == "dir", size=None if f.type == "dir" else f.size)
                for f in sorted(entries, key=lambda f: f.name)]

    def _walk(self, top: str) -> List[Tuple[str, str]]:
        """(absolute path, path relative to top) of every file below top."""
        out, stack = [], [""]
        while stack:
            rel = stack.pop()
            for f in self.live.files.list(posixpath.join(top, rel) if rel else top):
                r = posixpath.join(rel, f.name) if rel else f.name
                if f.type == "dir":
                    stack.append(r)
                else:
                    out.append((f.path, r))
        return sorted(out, key=lambda x: x[1])

    async def glob(self, pattern: str, *, path: str = ".") -> List[str]:
        """Paths (relative to ``path``'s workspace form) of files matching
        ``pattern``; ``**`` matches any number of directories."""
        files = await asyncio.to_thread(self._walk, self._path(path))
        rx = _glob_regex(pattern)
        base = "" if path in (".", "") else path.rstrip("/") + "/"
        return [base + r for _, r in files if rx.fullmatch(r) or ("/" not in pattern and
                                                                   fnmatch.fnmatch(posixpath.basename(r), pattern))]

    async def grep(self, pattern: str, *, path: Optional[str] = None, glob_pattern: Optional[str] = None,
                   output_mode: str = "content") -> str:
        """Lines matching the regular expression ``pattern`` as
        ``file:line:text`` (or ``files_with_matches``, ``count``)."""
        if output_mode not in ("content", "files_with_matches", "count"):
            raise ValueError("output_mode: content, files_with_matches or count")
        rx = re.compile(pattern)
        top = self._path(path or ".")
        info = await asyncio.to_thread(self.live.files.stat, top)
        if info is None:
            raise FileNotFoundError(path)
        files = [(top, posixpath.basename(top))] if info.type == "file" else await asyncio.to_thread(self._walk, top)
        results: List[str] = []
        for full, rel in files:
            if glob_pattern and not fnmatch.fnmatch(posixpath.basename(rel), glob_pattern):
                continue
            data = await self.live.files.aread(full)
            if b"\0" in data[:8192]:
                continue   # binary
            lines = data.decode("utf-8", "replace").splitlines()
            hits = [(i, l) for i, l in enumerate(lines, start=1) if rx.search(l)]
            if not hits:
                continue
            if output_mode == "files_with_matches":
                results.append(rel)
            elif output_mode == "count":
                results.append("%s:%d" % (rel, len(hits)))
            else:
                results.extend("%s:%d:%s" % (rel, i, l) for i, l in hits)
        return "\n".join(results)


def _glob_regex(pattern: str) -> "re.Pattern[str]":
    rx, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            rx, i = rx + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            rx, i = rx + ".*", i + 2
        elif pattern[i] == "*":
            rx, i = rx + "[^/]*", i + 1
        elif pattern[i] == "?":
            rx, i = rx + "[^/]", i + 1
        else:
            rx, i = rx + re.escape(pattern[i]), i + 1
    return re.compile(rx)


class NsboxProcess:
    """An interactive process in the environment's sandbox
    (``ExecutionProcess``): not started until ``async with``; ``send`` writes
    to its stdin, ``recv``/``recv_stderr`` read what it wrote since."""

    def __init__(self, env: NsboxEnvironment, command: str, extra_env: Optional[Dict[str, str]]) -> None:
        self._env, self._command, self._extra = env, command, extra_env
        self._proc: Any = None

    async def __aenter__(self) -> "NsboxProcess":
        # A FIFO in the sandbox carries stdin: the process reads it, send()
        # appends to it through a short exec.
        import uuid
        live = self._env.live
        self._fifo = "/tmp/.nsbox-stdin-%s" % uuid.uuid4().hex
        argv = ["/bin/sh", "-c", 'mkfifo "$0" && exec 3<>"$0" && exec sh -c "$1" <&3 3<&-', self._fifo,
                self._command]
        self._proc = await asyncio.to_thread(live.spawn, argv, env=self._extra, cwd=self._env.root)
        self._seen = {1: 0, 2: 0}
        return self

    async def __aexit__(self, *args: Any) -> None:
        if self.returncode is None:
            await self.kill()

    async def send(self, data: bytes) -> None:
        live = self._env.live
        r = await live.aexec(["/bin/sh", "-c", 'while [ ! -p "$0" ]; do sleep 0.01; done; cat > "$0"', self._fifo],
                             stdin=bytes(data))
        if not r.ok:
            raise OSError("write to the process's stdin: %s" % r.stderr.strip())

    async def _recv(self, stream: int, timeout: Optional[float]) -> bytes:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            logs = self._proc.logs()
            text, total = (logs.stdout, logs.stdout_bytes) if stream == 1 else (logs.stderr, logs.stderr_bytes)
            new = total - self._seen[stream]
            if new > 0:
                self._seen[stream] = total
                return text.encode()[-new:]
            if not self._proc.running:
                return b""
            if deadline is not None and loop.time() >= deadline:
                raise TimeoutError("no output within %ss" % timeout)
            await asyncio.sleep(0.01)

    async def recv(self, timeout: Optional[float] = None) -> bytes:
        return await self._recv(1, timeout)

    async def recv_stderr(self, timeout: Optional[float] = None) -> bytes:
        return await self._recv(2, timeout)

    @property
    def returncode(self) -> Optional[int]:
        if self._proc is None or self._proc.running:
            return None
        return _common.exit_code(self._proc.wait())

    async def wait(self, timeout: Optional[float] = None) -> int:
        try:
            r = await asyncio.to_thread(self._proc.wait, timeout)
        except TimeoutError:
            raise TimeoutError("the process still runs after %ss" % timeout) from None
        return _common.exit_code(r)

    async def kill(self) -> None:
        self._proc.kill()


_bound: Optional[type] = None


def execution_environment(sandbox: Optional[Sandbox] = None, *, root: Optional[str] = None) -> NsboxEnvironment:
    """An ``NsboxEnvironment``; a subclass of pydantic_ai's
    ``ExecutionEnvironment`` too when pydantic_ai is installed."""
    global _bound
    env = _common.framework("pydantic_ai.environments")
    if env is None or not hasattr(env, "ExecutionEnvironment"):
        return NsboxEnvironment(sandbox, root=root)
    if _bound is None:
        _bound = type("NsboxExecutionEnvironment", (NsboxEnvironment, env.ExecutionEnvironment), {})
    return _bound(sandbox, root=root)
