"""nsbox as a LangChain tool (needs langchain_core when used).

    from nsbox.integrations.langchain import NsboxTool
    tool = NsboxTool(sandbox=nsbox.Sandbox(memory="256m", timeout=30))
    llm.bind_tools([tool])

The model gets compact text (output, then how the run ended); the full
``nsbox.Result`` is the tool message's artifact. ``NsboxTool`` is a
langchain_core ``BaseTool``, built the first time it is named: importing this
module imports nothing of LangChain. For deepagents' sandbox backend, see
``nsbox.integrations.deepagents``.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

from ..errors import SandboxError
from ..result import Result
from ..sandbox import Sandbox
from ..tools import TOOL_DESCRIPTION, TOOL_NAME, tool_text

__all__ = ["NsboxTool", "RunCodeInput"]

_built: dict = {}


def _build() -> dict:
    if _built:
        return _built
    from langchain_core.tools import BaseTool
    from pydantic import BaseModel, Field

    class RunCodeInput(BaseModel):
        code: str = Field(description="The program to run.")
        language: str = Field(default="python", description="python, node or bash.")
        stdin: Optional[str] = Field(default=None, description="Text on standard input.")

    class NsboxTool(BaseTool):
        name: str = TOOL_NAME
        description: str = TOOL_DESCRIPTION
        args_schema: Any = RunCodeInput
        response_format: str = "content_and_artifact"
        sandbox: Any = None   # an nsbox.Sandbox; None: Sandbox.from_env() per call

        def _sandbox(self) -> Sandbox:
            return self.sandbox if self.sandbox is not None else Sandbox.from_env()

        def _run(self, code: str, language: str = "python", stdin: Optional[str] = None,
                 **_: Any) -> Tuple[str, Optional[Result]]:
            try:
                r = self._sandbox().run_code(code, language, stdin=stdin)
            except (SandboxError, ValueError) as e:
                return tool_text(e), None
            return str(r), r

        async def _arun(self, code: str, language: str = "python", stdin: Optional[str] = None,
                        **_: Any) -> Tuple[str, Optional[Result]]:
            try:
                r = await self._sandbox().arun_code(code, language, stdin=stdin)
            except (SandboxError, ValueError) as e:
                return tool_text(e), None
            return str(r), r

    _built.update(NsboxTool=NsboxTool, RunCodeInput=RunCodeInput)
    return _built


def __getattr__(name: str) -> Any:
    if name in ("NsboxTool", "RunCodeInput"):
        return _build()[name]
    raise AttributeError(name)
