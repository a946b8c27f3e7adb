"""A framework-neutral tool: a JSON-schema description and a call function.

Any agent framework that takes function/tool descriptions can offer nsbox to
a model with these two; the LangChain and OpenAI Agents integrations are
built on them."""
from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional, Union

from .errors import SandboxError
from .result import Result
from .sandbox import LANGUAGES, Sandbox

__all__ = ["TOOL_NAME", "TOOL_DESCRIPTION", "tool_schema", "call_tool", "acall_tool"]

TOOL_NAME = "run_code"
TOOL_DESCRIPTION = (
    "Run a code snippet in a fresh, isolated sandbox (no network, limited memory and time) and "
    "return its output and how it ended. Nothing persists between calls; print what you need.")


def tool_schema(name: str = TOOL_NAME, description: str = TOOL_DESCRIPTION) -> Dict[str, Any]:
    """The tool as a JSON-schema function description:
    ``{"name", "description", "parameters": {JSON schema}}`` (the shape
    OpenAI, Anthropic and most frameworks accept; wrap it as they want)."""
    return {
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The program to run."},
                "language": {"type": "string", "enum": sorted(LANGUAGES), "default": "python",
                             "description": "The language of the code."},
                "stdin": {"type": "string", "description": "Text given to the program on standard input."},
            },
            "required": ["code"],
            "additionalProperties": False,
        },
    }


def _parse(args: Union[str, Mapping[str, Any]]) -> Dict[str, Any]:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError as e:
            raise ValueError("tool arguments are not JSON: %s" % e) from None
    if not isinstance(args, Mapping):
        raise ValueError("tool arguments must be an object")
    unknown = set(args) - {"code", "language", "stdin"}
    if unknown:
        raise ValueError("unknown tool argument(s): %s" % ", ".join(sorted(unknown)))
    code, lang, stdin = args.get("code"), args.get("language", "python"), args.get("stdin")
    if not isinstance(code, str):
        raise ValueError("'code' must be a string")
    if lang not in LANGUAGES:
        raise ValueError("'language' must be one of %s" % ", ".join(sorted(LANGUAGES)))
    if stdin is not None and not isinstance(stdin, str):
        raise ValueError("'stdin' must be a string")
    return {"code": code, "language": lang, "stdin": stdin}


def call_tool(args: Union[str, Mapping[str, Any]], sandbox: Optional[Sandbox] = None) -> Result:
    """Run a model's tool call (``args`` as a dict or the JSON text the model
    produced) in ``sandbox`` (default: ``Sandbox.from_env()``). Give the model
    ``str(result)``. Bad arguments raise ValueError (tell the model);
    SandboxError means nsbox itself failed (tell the operator)."""
    a = _parse(args)
    sb = sandbox if sandbox is not None else Sandbox.from_env()
    return sb.run_code(a["code"], a["language"], stdin=a["stdin"])


async def acall_tool(args: Union[str, Mapping[str, Any]], sandbox: Optional[Sandbox] = None) -> Result:
    """``call_tool`` for asyncio (cancellable)."""
    a = _parse(args)
    sb = sandbox if sandbox is not None else Sandbox.from_env()
    return await sb.arun_code(a["code"], a["language"], stdin=a["stdin"])


def tool_text(result_or_error: Union[Result, BaseException]) -> str:
    """What to hand back to the model for a result or a failure."""
    if isinstance(result_or_error, Result):
        return str(result_or_error)
    if isinstance(result_or_error, SandboxError):
        return "[the sandbox could not run the code: %s]" % result_or_error.message
    return "[invalid tool call: %s]" % result_or_error
