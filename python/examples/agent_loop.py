#!/usr/bin/env python3
"""An agent loop: a (fake) model asks for code to be run through the
run_code tool; each call runs in a fresh sandbox and the model sees the
compact result text. Swap FakeModel for your LLM client: tool_schema() is the
tool description it takes, call_tool() runs what it asks for.

    python3 examples/agent_loop.py            # the 'default' image
    python3 examples/agent_loop.py --rootfs DIR --language bash
"""
import argparse
import json

import nsbox


class FakeModel:
    """Answers with tool calls from a script, then a final message."""

    def __init__(self, language):
        if language == "python":
            self.script = ["print(sum(range(10)))", "print(1/0)", "print(6*7)"]
        else:
            self.script = ["echo $((1+2+3+4+5+6+7+8+9))", "exit 3", "echo $((6*7))"]
        self.language = language

    def respond(self, messages, tools):
        assert tools[0]["name"] == "run_code"
        if not self.script:
            last = messages[-1]["content"]
            return {"role": "assistant", "content": "The answer is %s." % last.splitlines()[0]}
        code = self.script.pop(0)
        return {"role": "assistant", "tool_call": {"name": "run_code",
                                                   "arguments": json.dumps({"code": code,
                                                                            "language": self.language})}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rootfs")
    ap.add_argument("--language", default="python", choices=sorted(nsbox.LANGUAGES))
    a = ap.parse_args()
    sandbox = nsbox.Sandbox(rootfs=a.rootfs, memory="256m", timeout=10, network="none") if a.rootfs \
        else nsbox.Sandbox(memory="256m", timeout=10, network="none")
    model = FakeModel(a.language)
    tools = [nsbox.tool_schema()]
    messages = [{"role": "user", "content": "What is 6*7? Use the tool."}]
    while True:
        reply = model.respond(messages, tools)
        messages.append(reply)
        call = reply.get("tool_call")
        if not call:
            print("model:", reply["content"])
            return
        try:
            text = str(nsbox.call_tool(call["arguments"], sandbox=sandbox))
        except ValueError as e:          # a bad call: tell the model
            text = "[invalid tool call: %s]" % e
        except nsbox.SandboxError as e:  # nsbox itself failed: stop, tell the operator
            raise SystemExit("sandbox failed: %s" % e)
        print("tool> %s\n%s\n" % (json.loads(call["arguments"])["code"], text))
        messages.append({"role": "tool", "content": text})


if __name__ == "__main__":
    main()
