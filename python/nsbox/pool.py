"""Pool: sandboxes started ahead of demand, the interpreter already waiting.

    sb = nsbox.Sandbox(image="default", memory="256m", timeout=10)
    with nsbox.Pool(sb, size=4) as pool:
        r = pool.run_code("print(1)")          # a few ms instead of a cold start

Each pooled sandbox serves one run_code and is then destroyed, never reused;
the pool spawns its replacement in the background. To the code a pooled run
looks like `Sandbox.run_code`'s cold one (docs/python.md, "Warm pool").
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional, Tuple, Union

from . import _nsbox
from .errors import SandboxError
from .result import Result
from .sandbox import LANGUAGES, Sandbox, _call

__all__ = ["Pool"]

WARM_BASE = "/dev/shm/.nsbox-warm"
# Python versions whose user site directory gets the hook's .pth line: only
# the one the image runs reads it.
_PY_VERSIONS = tuple("3.%d" % v for v in range(8, 16))
WARM_LANGUAGES = ("python", "node")


def _script(name: str) -> str:
    with open(os.path.join(os.path.dirname(__file__), "warm", name), encoding="utf-8") as f:
        return f.read()


def _warm_files(language: str, target: str) -> Tuple[list, list]:
    """The files placed in a pooled sandbox and the variables that make
    the interpreter run the hook before the main script."""
    if language == "python":
        hook = _script("python.py").replace("warm(TARGET)", "warm(%r)" % target)
        path = WARM_BASE + "/hook.py"
        # exec of the text, not of compile()'s code: compile() makes the
        # ast module's types, which a cold run would not have.
        line = ("import sys; exec(open(%r).read(), {'__name__': '__nsbox_warm__'})\n" % (path,))
        files = [(path, hook.encode(), 0o444)]
        for v in _PY_VERSIONS:
            files.append(("%s/lib/python%s/site-packages/nsbox-warm.pth" % (WARM_BASE, v), line.encode(), 0o444))
        return files, ["PYTHONUSERBASE=" + WARM_BASE]
    hook = _script("node.js").replace("})(TARGET);", "})(%s);" % json.dumps(target))
    path = WARM_BASE + "/hook.js"
    return [(path, hook.encode(), 0o444)], ["NODE_OPTIONS=--require " + path]


class Pool:
    """A warm pool for ``sandbox`` (its options: image, limits, network...).

    ``size`` sandboxes per language in ``languages`` are kept ready, each
    with the interpreter started and waiting for the code. ``run_code``
    takes one, hands it the code, returns its Result; the pool refills in
    the background. A context manager: leaving it (or ``close()``, or the
    owner's exit, even by SIGKILL) kills the ready sandboxes and leaves
    nothing behind. Thread-safe.
    """

    def __init__(self, sandbox: Sandbox, size: int = 2, *, languages: Tuple[str, ...] = ("python",)) -> None:
        if not isinstance(sandbox, Sandbox):
            raise TypeError("Pool takes an nsbox.Sandbox")
        if not 1 <= int(size) <= 64:
            raise ValueError("size must be between 1 and 64")
        keys = {k for k, _, _ in sandbox._settings}
        if keys & {"workspace.path", "workspace.session"}:
            # A workspace would be mounted when the sandbox is spawned, not
            # when the code runs: what the code sees would be stale.
            raise ValueError("a pooled sandbox cannot have a workspace or a session")
        self.sandbox = sandbox
        self.size = int(size)
        self._pools: Dict[str, Any] = {}
        self._closed = False
        try:
            for lang in languages:
                if lang not in WARM_LANGUAGES:
                    raise ValueError("no warm pool for %r (python, node)" % (lang,))
                path, interp, env = LANGUAGES[lang]
                files, warm_env = _warm_files(lang, path)
                # run-code's settings, as Sandbox.run_code adds them; then the hook's
                extra = [("environment.set", e, "run-code") for e in env]
                if not sandbox._workdir:
                    extra.insert(0, ("workdir", "/tmp", "run-code"))
                extra += [("environment.set", e, "pool") for e in warm_env]
                self._pools[lang] = _call(_nsbox.Pool, sandbox.policy, sandbox._settings + tuple(extra),
                                          [interp, path], files, self.size)
        except BaseException:
            self.close()
            raise

    def run_code(self, code: Union[str, bytes], language: str = "python", *,
                 timeout: Union[None, str, float] = None) -> Result:
        """``Sandbox.run_code`` in a ready sandbox. A language without a
        warm pool, or a ``timeout`` other than the sandbox's, runs cold."""
        if language not in LANGUAGES:
            raise ValueError("unknown language %r (python, node, bash)" % (language,))
        if self._closed:
            raise ValueError("the pool is closed")
        pool = self._pools.get(language)
        if pool is None or timeout is not None:
            return self.sandbox.run_code(code, language, timeout=timeout)
        data = code.encode() if isinstance(code, str) else bytes(code)
        record = json.loads(_call(pool.run, data, language))
        if record["status"] == "setup_failed":
            e = record.get("error") or {}
            raise SandboxError._from(e.get("step") or "setup", int(e.get("errno") or 0),
                                     e.get("message") or "set up the sandbox", record)
        return Result(record)

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
