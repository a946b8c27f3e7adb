"""Pool: sandboxes started ahead of demand, the interpreter already waiting.

    sb = nsbox.Sandbox(image="default", memory="256m", timeout=10)
    with nsbox.Pool(sb, size=4, preload=["numpy"]) as pool:
        r = pool.run_code("print(1)")          # a few ms instead of a cold start

Each pooled sandbox serves one run_code and is then destroyed, never reused;
the pool spawns its replacement in the background. To the code a pooled run
looks like `Sandbox.run_code`'s cold one (docs/python.md, "Warm pool"). The
pool is the library's (nsbox_pool): the warm hook, the record and the
governance (audit log, artifacts, import gate) are the same as every run's.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, Iterable, Optional, Tuple, Union

from . import _nsbox
from .result import Result
from .sandbox import OutputCallback, Sandbox, _call

__all__ = ["Pool"]

WARM_LANGUAGES = ("python", "node")


class Pool:
    """A warm pool for ``sandbox`` (its options: image, limits, network...).

    ``size`` sandboxes per language in ``languages`` are kept ready, each
    with the interpreter started, ``preload`` imported (Python ``import``,
    Node ``require``), and waiting for the code. ``run_code`` takes one,
    hands it the code, returns its Result; the pool refills in the
    background. A call the warm interpreter cannot serve exactly as a cold
    run would (its own ``timeout``) runs cold; the record's ``pool`` says
    which and why. A context manager: leaving it (or ``close()``, or the
    owner's exit, even by SIGKILL) kills the ready sandboxes and leaves
    nothing behind. Thread-safe.
    """

    def __init__(self, sandbox: Sandbox, size: int = 2, *, languages: Tuple[str, ...] = ("python",),
                 preload: Iterable[str] = ()) -> None:
        if not isinstance(sandbox, Sandbox):
            raise TypeError("Pool takes an nsbox.Sandbox")
        if not 1 <= int(size) <= 64:
            raise ValueError("size must be between 1 and 64")
        if isinstance(preload, str):
            raise TypeError("preload takes a list of module names")
        keys = {k for k, _, _ in sandbox._settings}
        if keys & {"workspace.path", "workspace.session"}:
            # A workspace would be mounted when the sandbox is spawned, not
            # when the code runs: what the code sees would be stale.
            raise ValueError("a pooled sandbox cannot have a workspace or a session")
        self.sandbox = sandbox
        self.size = int(size)
        self.preload = tuple(preload)
        self._pools: Dict[str, Any] = {}
        self._closed = False
        try:
            for lang in languages:
                if lang not in WARM_LANGUAGES:
                    raise ValueError("no warm pool for %r (python, node)" % (lang,))
                self._pools[lang] = _call(_nsbox.Pool, sandbox.policy, sandbox._settings, lang, self.size,
                                          list(self.preload))
        except BaseException:
            self.close()
            raise

    def run_code(self, code: Union[str, bytes], language: str = "python", *,
                 timeout: Union[None, str, float] = None, on_stdout: Optional[OutputCallback] = None,
                 on_stderr: Optional[OutputCallback] = None) -> Result:
        """``Sandbox.run_code`` in a ready sandbox. A language without a
        warm pool runs cold in a fresh sandbox."""
        return self._run(code, language, timeout, on_stdout, on_stderr, None)

    async def arun_code(self, code: Union[str, bytes], language: str = "python", *,
                        timeout: Union[None, str, float] = None, on_stdout: Optional[OutputCallback] = None,
                        on_stderr: Optional[OutputCallback] = None) -> Result:
        """``run_code`` for asyncio; cancelling the task kills the run."""
        from .sandbox import _in_thread
        return await _in_thread(lambda h: self._run(code, language, timeout, on_stdout, on_stderr, h))

    def _run(self, code: Union[str, bytes], language: str, timeout: Any, on_stdout: Any, on_stderr: Any,
             handle: Any) -> Result:
        from .sandbox import _code_bytes, _interruptible, _result, _Stream, _timeout_ms
        data = _code_bytes(code, language)
        if self._closed:
            raise ValueError("the pool is closed")
        pool = self._pools.get(language)
        if pool is None:
            return self.sandbox.run_code(code, language, timeout=timeout, on_stdout=on_stdout,
                                         on_stderr=on_stderr)
        ms = _timeout_ms(timeout)
        out = _Stream(on_stdout, on_stderr) if (on_stdout or on_stderr) else None
        args = (data, ms, out.feed if out else None)
        if handle is None and threading.current_thread() is threading.main_thread():
            text = _interruptible(lambda h: _call(pool.run, *args, h))
        else:
            text = _call(pool.run, *args, handle)
        if out:
            out.flush()
        return _result(text)

    def cost(self) -> Dict[str, int]:
        """What the idle pool costs now: ready sandboxes, their processes
        (interpreters, inits, janitors) and memory (bytes, from their
        cgroups; 0 without), and how many were spawned and taken."""
        total = {"ready": 0, "processes": 0, "memory_bytes": 0, "spawned": 0, "taken": 0}
        for p in list(self._pools.values()):
            for k, v in p.cost().items():
                total[k] += v
        return total

    def close(self) -> None:
        """Kill the ready sandboxes and wait until nothing of them is left.
        Runs in progress finish first."""
        self._closed = True
        pools, self._pools = self._pools, {}
        for p in pools.values():
            p.close()

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "nsbox.Pool(%r, size=%d)" % (self.sandbox, self.size)

