"""Framework integrations. Each submodule imports its framework and fails
with ImportError when it is not installed:

- ``nsbox.integrations.langchain``: ``NsboxTool``, a langchain_core BaseTool.
- ``nsbox.integrations.openai_agents``: ``nsbox_function_tool()`` for the
  OpenAI Agents SDK.

``nsbox.tool_schema()`` / ``nsbox.call_tool()`` need no framework.
"""
