"""The tool description and call path, and the framework integrations."""
import asyncio
import json

import pytest

import nsbox


def test_schema_is_json_schema():
    s = nsbox.tool_schema()
    assert s["name"] == "run_code" and s["parameters"]["required"] == ["code"]
    assert set(s["parameters"]["properties"]["language"]["enum"]) == {"python", "node", "bash"}
    json.dumps(s)


def test_call_tool(bashroot):
    sb = nsbox.Sandbox(rootfs=bashroot)
    r = nsbox.call_tool('{"code": "echo $((6*7))", "language": "bash"}', sandbox=sb)
    assert r.ok and str(r) == "42\n[exited with code 0]"
    r = nsbox.call_tool({"code": "read x; echo got $x", "language": "bash", "stdin": "7\n"}, sandbox=sb)
    assert r.stdout == "got 7\n"
    r = asyncio.run(nsbox.acall_tool({"code": "exit 2", "language": "bash"}, sandbox=sb))
    assert r.exit_code == 2 and "exit code 2" in str(r)


@pytest.mark.parametrize("bad", ["not json", "[]", {"code": 1}, {"code": "x", "language": "cobol"},
                                 {"code": "x", "rm": "-rf"}, {"language": "bash"}])
def test_call_tool_rejects_bad_arguments(bad, bashroot):
    with pytest.raises(ValueError):
        nsbox.call_tool(bad, sandbox=nsbox.Sandbox(rootfs=bashroot))


def test_langchain_tool(bashroot):
    pytest.importorskip("langchain_core")
    from nsbox.integrations.langchain import NsboxTool
    tool = NsboxTool(sandbox=nsbox.Sandbox(rootfs=bashroot))
    msg = tool.invoke({"type": "tool_call", "id": "1", "name": "run_code",
                       "args": {"code": "echo hi", "language": "bash"}})
    assert msg.content == "hi\n[exited with code 0]" and msg.artifact.ok
    msg = asyncio.run(tool.ainvoke({"type": "tool_call", "id": "2", "name": "run_code",
                                    "args": {"code": "echo a", "language": "bash"}}))
    assert msg.artifact.stdout == "a\n"


def test_openai_agents_tool(bashroot):
    pytest.importorskip("agents")
    from nsbox.integrations.openai_agents import nsbox_function_tool
    tool = nsbox_function_tool(nsbox.Sandbox(rootfs=bashroot))
    out = asyncio.run(tool.on_invoke_tool(None, json.dumps({"code": "echo hi", "language": "bash"})))
    assert out == "hi\n[exited with code 0]"


def test_integrations_need_their_framework():
    # Importing an adapter module imports nothing of its framework; what is
    # built on the framework's own classes raises ImportError without it.
    import nsbox.integrations.langchain as lc
    import nsbox.integrations.openai_agents as oa
    for dep, use in (("langchain_core", lambda: lc.NsboxTool), ("agents", lambda: oa.nsbox_function_tool())):
        try:
            __import__(dep)
        except ImportError:
            with pytest.raises(ImportError):
                use()
