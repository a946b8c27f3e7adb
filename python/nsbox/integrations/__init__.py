"""Adapters for agent frameworks. None imports its framework when imported;
each binds to it (subclasses its base class, returns its result types) when
the framework is installed, and works with the same method names,
signatures and return shapes without it:

- ``openai_agents``: ``sandbox_client()`` (OpenAI Agents SDK sandbox agents:
  BaseSandboxClient / BaseSandboxSession), ``nsbox_function_tool()``.
- ``deepagents``: ``sandbox_backend()`` (LangChain deepagents
  SandboxBackendProtocol).
- ``pydantic_ai``: ``execution_environment()`` (Pydantic AI
  ExecutionEnvironment).
- ``smolagents``: ``python_executor()`` (smolagents RemotePythonExecutor).
- ``autogen``: ``code_executor()`` (AutoGen CodeExecutor).
- ``langchain``: ``NsboxTool`` (a langchain_core BaseTool).

``nsbox.tool_schema()`` / ``nsbox.call_tool()`` need no framework.
"""
