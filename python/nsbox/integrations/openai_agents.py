"""nsbox as an OpenAI Agents SDK tool (needs the `agents` package).

    from nsbox.integrations.openai_agents import nsbox_function_tool
    agent = Agent(name="coder", tools=[nsbox_function_tool(nsbox.Sandbox(timeout=30))])
"""
from __future__ import annotations

import json
from typing import Any, Optional

from agents import FunctionTool

from ..errors import SandboxError
from ..sandbox import Sandbox
from ..tools import TOOL_DESCRIPTION, TOOL_NAME, _parse, tool_schema, tool_text

__all__ = ["nsbox_function_tool"]


def nsbox_function_tool(sandbox: Optional[Sandbox] = None, name: str = TOOL_NAME,
                        description: str = TOOL_DESCRIPTION) -> Any:
    """A FunctionTool that runs the model's code in ``sandbox`` (cancellable)."""
    schema = tool_schema(name, description)["parameters"]

    async def invoke(_ctx: Any, args: str) -> str:
        try:
            a = _parse(args)
            sb = sandbox if sandbox is not None else Sandbox.from_env()
            return str(await sb.arun_code(a["code"], a["language"], stdin=a["stdin"]))
        except (SandboxError, ValueError) as e:
            return tool_text(e)

    return FunctionTool(name=name, description=description, params_json_schema=json.loads(json.dumps(schema)),
                        on_invoke_tool=invoke, strict_json_schema=False)
