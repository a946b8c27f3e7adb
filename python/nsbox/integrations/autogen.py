"""nsbox as an AutoGen code executor (``autogen_core.code_executor.CodeExecutor``).

    from nsbox.integrations.autogen import code_executor
    async with code_executor(nsbox.Sandbox("default", timeout=60)) as executor:
        agent = CodeExecutorAgent("runner", code_executor=executor)
        ...

``start()`` sets up one long-lived sandbox, ``execute_code_blocks`` runs the
blocks one after another in its workspace (python, bash/sh, javascript/node;
files persist between blocks and calls) and stops at the first that fails,
``restart()`` gives a fresh sandbox, ``stop()`` ends it. Cancelling through
the ``CancellationToken`` kills the running block. With autogen_core
installed, ``code_executor`` returns a subclass of its ``CodeExecutor`` and
its ``CodeResult``; nothing of it is imported before.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, List, Optional

from ..live import LiveSandbox
from ..sandbox import Sandbox
from . import _common

__all__ = ["NsboxCodeExecutor", "code_executor", "CodeResult", "LANGUAGES"]

# A block's language as models write it, and how nsbox runs it.
LANGUAGES = {"python": "python", "py": "python", "python3": "python", "bash": "bash", "sh": "bash",
             "shell": "bash", "javascript": "node", "js": "node", "node": "node"}


@dataclass
class CodeResult:
    """autogen_core's CodeResult, used without it."""
    exit_code: int
    output: str


def _result_type() -> Any:
    ce = _common.framework("autogen_core.code_executor")
    return CodeResult if ce is None else ce.CodeResult


class NsboxCodeExecutor:
    """``CodeExecutor`` over a long-lived nsbox sandbox."""

    component_type = "code_executor"

    def __init__(self, sandbox: Optional[Sandbox] = None, *, root: Optional[str] = None,
                 timeout: Optional[float] = None) -> None:
        self._config = sandbox
        self._root_arg = root
        self._timeout = timeout
        self._live: Optional[LiveSandbox] = None
        self.root = root or _common.WORKSPACE_SCRATCH
        self._result = _result_type()

    async def start(self) -> None:
        if self._live is None:
            _, self._live, self.root = await asyncio.to_thread(_common.start, self._config, self._root_arg)

    async def stop(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            await asyncio.to_thread(live.close)

    async def restart(self) -> None:
        """A fresh sandbox: files and processes of the old one are gone."""
        await self.stop()
        await self.start()

    async def execute_code_blocks(self, code_blocks: List[Any], cancellation_token: Any) -> Any:
        """Run each block (``.code``, ``.language``); the output of all of
        them, and the exit code of the last one run. An unknown language is
        exit code 1 with the reason as output."""
        if self._live is None:
            await self.start()
        assert self._live is not None
        out: List[str] = []
        code = 0
        for block in code_blocks:
            lang = LANGUAGES.get((block.language or "").strip().lower())
            if lang is None:
                out.append("unsupported language %r (%s)\n" % (block.language, ", ".join(sorted(LANGUAGES))))
                code = 1
                break
            # Through a shell, so stderr joins stdout in the order written.
            argv = _common.shell({"python": "exec python3 -u -", "bash": "exec bash -s",
                                  "node": "exec node -"}[lang])
            task = asyncio.ensure_future(self._live.aexec(argv, stdin=block.code, timeout=self._timeout,
                                                          workdir=self.root))
            if cancellation_token is not None and hasattr(cancellation_token, "link_future"):
                cancellation_token.link_future(task)
            r = await task
            out.append(r.stdout)
            if r.timed_out:
                out.append("\n[timed out]\n")
            code = _common.exit_code(r)
            if code != 0:
                break
        return self._result(exit_code=code, output="".join(out))

    async def __aenter__(self) -> "NsboxCodeExecutor":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> Optional[bool]:
        await self.stop()
        return None


_bound: Optional[type] = None


def code_executor(sandbox: Optional[Sandbox] = None, *, root: Optional[str] = None,
                  timeout: Optional[float] = None) -> NsboxCodeExecutor:
    """An ``NsboxCodeExecutor``; a subclass of autogen_core's ``CodeExecutor``
    too when autogen_core is installed."""
    global _bound
    ce = _common.framework("autogen_core.code_executor")
    if ce is None:
        return NsboxCodeExecutor(sandbox, root=root, timeout=timeout)
    if _bound is None:
        _bound = type("NsboxAutogenExecutor", (NsboxCodeExecutor, ce.CodeExecutor), {})
    return _bound(sandbox, root=root, timeout=timeout)
