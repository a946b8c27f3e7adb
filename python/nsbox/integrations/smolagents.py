"""nsbox as a smolagents remote Python executor (``RemotePythonExecutor``).

    from nsbox.integrations.smolagents import python_executor
    executor = python_executor(sandbox=nsbox.Sandbox("default"))
    agent = CodeAgent(tools=[], model=model, executor=executor)
    ...
    executor.cleanup()

The agent's code runs in a code context of one long-lived sandbox: variables,
imports and functions persist from one step to the next (the smolagents
state), a step's last expression is its output, and a step that raises is an
error with its traceback. With smolagents installed, ``python_executor``
returns a subclass of its ``RemotePythonExecutor`` (its ``send_tools``,
``send_variables`` and final-answer handling, its ``CodeOutput`` and
``AgentError``); without it, ``NsboxPythonExecutor`` sends variables as JSON
and takes no tools. Nothing of smolagents is imported before the call.
"""
from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ..sandbox import Sandbox
from . import _common

__all__ = ["NsboxPythonExecutor", "python_executor", "CodeOutput", "ExecutionError"]

FINAL_ANSWER_EXCEPTION = "FinalAnswerException"


@dataclass
class CodeOutput:
    """smolagents' CodeOutput (local_python_executor.py), used without it."""
    output: Any
    logs: str
    is_final_answer: bool


class ExecutionError(Exception):
    """A step that raised (smolagents' AgentError when it is installed)."""


class _Logger:
    def log(self, *args: Any, **kw: Any) -> None:
        pass

    def log_error(self, *args: Any, **kw: Any) -> None:
        pass


# Run in the context once: keeps the last exception (the agent shows it
# through sys.excepthook when a step sets one) so that a final answer of any
# size is read back whole, and the text of the step's last expression.
_SETUP = r"""
import sys as _nsbox_sys, traceback as _nsbox_tb
def _nsbox_hook(t, e, tb, _keep=globals()):
    _keep["_nsbox_last_exc"] = e
    _nsbox_tb.print_exception(t, e, tb)
_nsbox_sys.excepthook = _nsbox_hook
del _nsbox_hook
"""


class _Core:
    """What runs the code: one context in one long-lived sandbox."""

    def _nsbox_start(self, sandbox: Optional[Sandbox], timeout: Optional[float]) -> None:
        self._sandbox, self._live, self.root = _common.start(sandbox, None)
        self._timeout = timeout
        self._ctx = self._live.context("python")
        self._ctx.run(_SETUP)

    def _output(self, r: Any) -> Any:
        for res in r.results:
            if "application/json" in res:
                return res["application/json"]
            if "text/plain" in res:
                return res["text/plain"]
        return None

    def _final_value(self) -> str:
        tmp = "/tmp/.nsbox-final-%s" % uuid.uuid4().hex
        self._ctx.run("open(%r, 'w').write(str(_nsbox_last_exc.args[0]) if _nsbox_last_exc.args else '')" % tmp)
        try:
            return self._live.files.read_text(tmp)
        finally:
            self._live.files.remove(tmp)

    def _nsbox_run(self, code: str, error: type, decode_final: Any) -> Any:
        r = self._ctx.run(code, timeout=self._timeout)
        logs = r.stdout
        if r.ok:
            out = self._output(r)
            # The context shows the last expression on stdout too: it is the
            # output, not a log line.
            if isinstance(out, str) and logs.endswith(out + "\n"):
                logs = logs[:len(logs) - len(out) - 1]
            return self._code_output(output=out, logs=logs, is_final_answer=False)
        msg = r.error.message if r.error else ""
        m = re.match(r"(?:Execution failed: )?([\w.]+)(?::|$)", msg)
        if m and m.group(1).rsplit(".", 1)[-1] == FINAL_ANSWER_EXCEPTION:
            return self._code_output(output=decode_final(self._final_value()), logs=logs, is_final_answer=True)
        raise error("%s\nExecuting code yielded an error:\n%s\n%s" % (logs, msg, r.stderr))

    def run_code_raise_errors(self, code: str) -> Any:
        raise NotImplementedError

    def cleanup(self) -> None:
        """End the sandbox (and with it the state)."""
        live = getattr(self, "_live", None)
        if live is not None:
            live.close()
            self._live = None

    def install_packages(self, additional_imports: List[str]) -> List[str]:
        """pip install them in the sandbox (its policy must allow the index)."""
        if additional_imports:
            r = self._live.exec(["python3", "-m", "pip", "install", "--user", *additional_imports])
            self.logger.log(r.stdout + r.stderr)
            if not r.ok:
                raise RuntimeError("pip install %s failed:\n%s" % (" ".join(additional_imports), r.stderr))
        return list(additional_imports)

    def restart(self) -> None:
        """A fresh interpreter: every variable is gone."""
        self._ctx.restart()
        self._ctx.run(_SETUP)


class NsboxPythonExecutor(_Core):
    """``RemotePythonExecutor``'s methods over an nsbox code context, for use
    without smolagents (``python_executor`` gives the framework-bound class
    when smolagents is installed)."""

    def __init__(self, additional_imports: List[str] = (), logger: Any = None, allow_pickle: bool = False, *,
                 sandbox: Optional[Sandbox] = None, timeout: Optional[float] = None) -> None:
        if allow_pickle:
            raise ValueError("allow_pickle: final answers and variables are exchanged as JSON only")
        self.additional_imports = list(additional_imports)
        self.logger = logger if logger is not None else _Logger()
        self.allow_pickle = False
        self.installed_packages: List[str] = []
        self._nsbox_start(sandbox, timeout)
        if self.additional_imports:
            self.installed_packages += self.install_packages(self.additional_imports)

    _code_output = staticmethod(CodeOutput)

    def run_code_raise_errors(self, code: str) -> CodeOutput:
        """Run a step; its last expression is ``output``, what it printed is
        ``logs``; an exception raises ExecutionError with the traceback."""
        return self._nsbox_run(code, ExecutionError, _decode_final)

    def __call__(self, code_action: str) -> CodeOutput:
        return self.run_code_raise_errors(code_action)

    def send_variables(self, variables: Dict[str, Any]) -> None:
        """Set these variables in the state (JSON values)."""
        if not variables:
            return
        for k in variables:
            if not isinstance(k, str) or not k.isidentifier():
                raise ValueError("variable name %r is not an identifier" % (k,))
        blob = json.dumps(variables)
        self.run_code_raise_errors("import json as _nsbox_json\nglobals().update(_nsbox_json.loads(%r))\n"
                                   "del _nsbox_json" % blob)

    def send_tools(self, tools: Dict[str, Any]) -> None:
        if tools:
            raise RuntimeError("sending tools needs smolagents installed: use python_executor()")

def _decode_final(value: str) -> Any:
    # smolagents' safe format ("safe:" + JSON); anything else as text.
    if value.startswith("safe:"):
        try:
            return json.loads(value[5:])
        except ValueError:
            pass
    return value


_bound: Optional[type] = None


def python_executor(additional_imports: List[str] = (), logger: Any = None, *, sandbox: Optional[Sandbox] = None,
                    timeout: Optional[float] = None) -> Any:
    """An executor for ``CodeAgent(executor=...)``: a subclass of smolagents'
    ``RemotePythonExecutor`` when smolagents is installed, else
    ``NsboxPythonExecutor``."""
    global _bound
    remote = _common.framework("smolagents.remote_executors")
    if remote is None:
        return NsboxPythonExecutor(additional_imports, logger, sandbox=sandbox, timeout=timeout)
    if _bound is None:
        from smolagents.local_python_executor import CodeOutput as FwCodeOutput
        from smolagents.utils import AgentError

        def __init__(self: Any, additional_imports: List[str], logger: Any, allow_pickle: bool = False, *,
                     sandbox: Optional[Sandbox] = None, timeout: Optional[float] = None) -> None:
            remote.RemotePythonExecutor.__init__(self, list(additional_imports), logger, allow_pickle)
            self._nsbox_start(sandbox, timeout)
            self.installed_packages = self.install_packages(list(additional_imports))

        def run_code_raise_errors(self: Any, code: str) -> Any:
            return self._nsbox_run(code, lambda m: AgentError(m, self.logger),
                                   lambda v: self._deserialize_final_answer(v, self.allow_pickle))

        _bound = type("NsboxExecutor", (_Core, remote.RemotePythonExecutor),
                      {"__init__": __init__, "run_code_raise_errors": run_code_raise_errors,
                       "_code_output": staticmethod(FwCodeOutput)})
    if logger is None:
        from smolagents.monitoring import AgentLogger, LogLevel
        logger = AgentLogger(LogLevel.INFO)
    return _bound(additional_imports, logger, sandbox=sandbox, timeout=timeout)
