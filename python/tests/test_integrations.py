"""The framework adapters (nsbox.integrations): each one's methods against
the interface as its framework defines it (names, parameters, defaults,
async-ness; written down here from the framework's own source, file and
commit cited), then a realistic sequence on real sandboxes of the default
image (create, execute, write, read, persist, hydrate, shutdown), and the
workspace tar treated as hostile. None of the frameworks is installable here
(they come from a Python package index, never from Debian): where one is
installed, its own base class is checked too."""
import asyncio
import importlib
import inspect
import io
import sys
import tarfile

import pytest

import nsbox
from nsbox.integrations import _common

P, K, V = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY,
           inspect.Parameter.VAR_POSITIONAL)
E = inspect.Parameter.empty

# name: (async, [(parameter, kind, default)]) -- self left out.
# openai/openai-agents-python @ 7f7a44f8dc0650296bd5ab6c745c9bcbaa6ac3b7:
# src/agents/sandbox/session/base_sandbox_session.py (BaseSandboxSession) and
# src/agents/sandbox/session/sandbox_client.py (BaseSandboxClient).
OPENAI_SESSION = {
    "_exec_internal": (True, [("command", V, E), ("timeout", K, None)]),
    "read": (True, [("path", P, E), ("user", K, None)]),
    "write": (True, [("path", P, E), ("data", P, E), ("user", K, None)]),
    "running": (True, []),
    "persist_workspace": (True, []),
    "hydrate_workspace": (True, [("data", P, E)]),
    "shutdown": (True, []),
}
OPENAI_CLIENT = {
    "create": (True, [("snapshot", K, None), ("manifest", K, None), ("options", K, E)]),
    "delete": (True, [("session", P, E)]),
    "resume": (True, [("state", P, E)]),
    "deserialize_session_state": (False, [("payload", P, E)]),
    "serialize_session_state": (False, [("state", P, E)]),
}
# langchain-ai/deepagents @ 23b83ad50f63d241d0069a3dc426d43b211adf2e:
# libs/deepagents/deepagents/backends/protocol.py (SandboxBackendProtocol,
# BackendProtocol) and backends/sandbox.py (BaseSandbox's abstract methods).
DEEPAGENTS = {
    "execute": (False, [("command", P, E), ("timeout", K, None)]),
    "aexecute": (True, [("command", P, E), ("timeout", K, None)]),
    "upload_files": (False, [("files", P, E)]),
    "download_files": (False, [("paths", P, E)]),
    "aupload_files": (True, [("files", P, E)]),
    "adownload_files": (True, [("paths", P, E)]),
}
# pydantic/pydantic-ai @ 0133c9098d1316a099a1d3ca7210508cd6e04537:
# pydantic_ai_slim/pydantic_ai/environments/_base.py (ExecutionEnvironment,
# ExecutionProcess).
PYDANTIC_AI = {
    "execute": (True, [("command", P, E), ("timeout", K, 120), ("env", K, None)]),
    "read_file": (True, [("path", P, E), ("offset", K, 0), ("limit", K, 2000)]),
    "read_file_bytes": (True, [("path", P, E)]),
    "write_file": (True, [("path", P, E), ("content", P, E)]),
    "edit_file": (True, [("path", P, E), ("old_string", P, E), ("new_string", P, E), ("replace_all", K, False)]),
    "ls": (True, [("path", P, ".")]),
    "glob": (True, [("pattern", P, E), ("path", K, ".")]),
    "grep": (True, [("pattern", P, E), ("path", K, None), ("glob_pattern", K, None),
                    ("output_mode", K, "content")]),
    "create_process": (True, [("command", P, E), ("env", K, None)]),
    "__aenter__": (True, []),
    "__aexit__": (True, [("args", V, E)]),
}
PYDANTIC_AI_PROCESS = {
    "send": (True, [("data", P, E)]),
    "recv": (True, [("timeout", P, None)]),
    "recv_stderr": (True, [("timeout", P, None)]),
    "wait": (True, [("timeout", P, None)]),
    "kill": (True, []),
}
# huggingface/smolagents @ e3a5b8994b301983b91c0325546e9dc82eab8cf0:
# src/smolagents/remote_executors.py (RemotePythonExecutor) and
# src/smolagents/local_python_executor.py (PythonExecutor, CodeOutput).
SMOLAGENTS = {
    "run_code_raise_errors": (False, [("code", P, E)]),
    "send_variables": (False, [("variables", P, E)]),
    "send_tools": (False, [("tools", P, E)]),
    "install_packages": (False, [("additional_imports", P, E)]),
    "cleanup": (False, []),
    "__call__": (False, [("code_action", P, E)]),
}
# microsoft/autogen @ 027ecf0a379bcc1d09956d46d12d44a3ad9cee14:
# python/packages/autogen-core/src/autogen_core/code_executor/_base.py.
AUTOGEN = {
    "execute_code_blocks": (True, [("code_blocks", P, E), ("cancellation_token", P, E)]),
    "start": (True, []),
    "stop": (True, []),
    "restart": (True, []),
}


def conforms(cls, spec):
    for name, (is_async, params) in spec.items():
        fn = getattr(cls, name, None)
        assert fn is not None, "%s.%s is missing" % (cls.__name__, name)
        assert inspect.iscoroutinefunction(fn) == is_async, "%s.%s: async should be %s" % (cls.__name__, name,
                                                                                            is_async)
        got = [(p.name, p.kind, p.default) for p in list(inspect.signature(fn).parameters.values())[1:]]
        assert got == params, "%s.%s%s, the framework's: %s" % (cls.__name__, name, got, params)


def test_no_framework_is_imported_at_module_import():
    before = set(sys.modules)
    for m in ("openai_agents", "deepagents", "pydantic_ai", "smolagents", "autogen", "langchain"):
        importlib.import_module("nsbox.integrations." + m)
    new = {m.split(".")[0] for m in set(sys.modules) - before}
    assert not new & {"agents", "deepagents", "pydantic_ai", "smolagents", "autogen_core", "langchain_core",
                      "pydantic"}, new


def test_method_sets_match_the_frameworks():
    from nsbox.integrations import autogen, deepagents, openai_agents, pydantic_ai, smolagents
    conforms(openai_agents.NsboxSandboxSession, OPENAI_SESSION)
    conforms(openai_agents.NsboxSandboxClient, OPENAI_CLIENT)
    assert isinstance(inspect.getattr_static(deepagents.NsboxBackend, "id"), property)
    conforms(deepagents.NsboxBackend, DEEPAGENTS)
    conforms(pydantic_ai.NsboxEnvironment, PYDANTIC_AI)
    conforms(pydantic_ai.NsboxProcess, PYDANTIC_AI_PROCESS)
    assert isinstance(inspect.getattr_static(pydantic_ai.NsboxProcess, "returncode"), property)
    conforms(smolagents.NsboxPythonExecutor, SMOLAGENTS)
    conforms(autogen.NsboxCodeExecutor, AUTOGEN)


@pytest.mark.parametrize("module,base", [
    ("agents.sandbox.session.base_sandbox_session", "BaseSandboxSession"),
    ("deepagents.backends.protocol", "SandboxBackendProtocol"),
    ("pydantic_ai.environments", "ExecutionEnvironment"),
    ("smolagents.remote_executors", "RemotePythonExecutor"),
    ("autogen_core.code_executor", "CodeExecutor")])
def test_against_the_installed_framework(module, base):
    fw = _common.framework(module)
    if fw is None:
        pytest.skip("%s is not installed (frameworks come from a Python package index, not Debian)" % module)
    abstract = getattr(getattr(fw, base), "__abstractmethods__", frozenset())
    from nsbox.integrations import autogen, deepagents, openai_agents, pydantic_ai, smolagents
    ours = {"BaseSandboxSession": openai_agents.NsboxSandboxSession, "SandboxBackendProtocol": deepagents.NsboxBackend,
            "ExecutionEnvironment": pydantic_ai.NsboxEnvironment,
            "RemotePythonExecutor": smolagents.NsboxPythonExecutor, "CodeExecutor": autogen.NsboxCodeExecutor}[base]
    for name in abstract:
        assert hasattr(ours, name), name


# ---- the workspace tar as hostile input ---------------------------------------

def _tar(*members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, kind, extra in members:
            ti = tarfile.TarInfo(name)
            if kind == "file":
                ti.size = len(extra)
                t.addfile(ti, io.BytesIO(extra))
                continue
            ti.type = kind
            if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                ti.linkname = extra
            t.addfile(ti)
    return buf.getvalue()


HOSTILE = {
    "absolute path": _tar(("/etc/evil", "file", b"x")),
    "dot-dot": _tar(("a/../../evil", "file", b"x")),
    "absolute symlink": _tar(("link", tarfile.SYMTYPE, "/etc")),
    "symlink out": _tar(("d/link", tarfile.SYMTYPE, "../../..")),
    "hard link": _tar(("hl", tarfile.LNKTYPE, "etc/passwd")),
    "device": _tar(("dev", tarfile.CHRTYPE, "")),
    "fifo": _tar(("fifo", tarfile.FIFOTYPE, "")),
    "below its own symlink": _tar(("ok", tarfile.SYMTYPE, "sub"), ("ok/f", "file", b"x")),
    "not a tar": b"hello, not a tar" * 64,
}


@pytest.mark.parametrize("what", sorted(HOSTILE))
def test_a_hostile_tar_is_refused_whole(what):
    with pytest.raises(ValueError):
        _common.check_tar(HOSTILE[what])


def test_hydrate_refuses_before_writing_anything(bashroot):
    with nsbox.Sandbox(rootfs=bashroot).start() as live:
        live.files.make_dir("/tmp/ws")
        evil = _tar(("first", "file", b"written?"), ("/etc/evil", "file", b"x"))
        with pytest.raises(ValueError):
            _common.unpack_workspace(live, "/tmp/ws", evil)
        assert live.files.list("/tmp/ws") == []
        with pytest.raises(ValueError):
            _common.unpack_workspace(live, "/tmp/ws", _tar(("big", "file", b"x" * 100)), max_bytes=10)
        # a harmless tar: modes keep only the permission bits
        ok = io.BytesIO()
        with tarfile.open(fileobj=ok, mode="w") as t:
            ti = tarfile.TarInfo("d/s")
            ti.size, ti.mode = 2, 0o6755
            t.addfile(ti, io.BytesIO(b"hi"))
        _common.unpack_workspace(live, "/tmp/ws", ok.getvalue())
        info = live.files.stat("/tmp/ws/d/s")
        assert (info.type, info.size, info.mode) == ("file", 2, 0o755)


# ---- sequences on real sandboxes ----------------------------------------------

@pytest.fixture
def sandbox(default_image):
    return nsbox.Sandbox(default_image, memory="512m", timeout=60, settings={"limits.fallback": "rlimit"})


def _members(data):
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        return {m.name: (m.type, t.extractfile(m).read() if m.isreg() else m.linkname) for m in t.getmembers()}


def test_openai_agents_session_sequence(sandbox):
    from nsbox.integrations.openai_agents import NsboxSandboxClient, sandbox_client

    async def main():
        client = sandbox_client(sandbox)
        assert type(client) is NsboxSandboxClient   # the SDK is not installed here
        s = await client.create(options=None)
        assert not await s.running()
        r = await s._exec_internal("sh", "-c", "echo out; echo err >&2; pwd; exit 3", timeout=30)
        assert (r.stdout, r.stderr, r.exit_code, r.ok()) == (b"out\n/tmp/workspace\n", b"err\n", 3, False)
        assert await s.running()
        await s.write("notes/a.txt", io.BytesIO(b"hello"))
        assert (await s.read("notes/a.txt")).read() == b"hello"
        assert (await s.read("/tmp/workspace/notes/a.txt")).read() == b"hello"
        with pytest.raises(FileNotFoundError):
            await s.read("missing")
        assert (await s._exec_internal("cat", "notes/a.txt")).stdout == b"hello"
        await s._exec_internal("ln", "-s", "notes/a.txt", "link")
        snap = (await s.persist_workspace()).read()
        assert _members(snap) == {"notes": (tarfile.DIRTYPE, ""), "notes/a.txt": (tarfile.REGTYPE, b"hello"),
                                  "link": (tarfile.SYMTYPE, "notes/a.txt")}
        # the state round-trips; resume while it runs is the same session
        state = client.deserialize_session_state(client.serialize_session_state(s.state))
        assert await client.resume(state) is s
        # after delete, resume hydrates a new sandbox from the snapshot
        await client.delete(s)
        assert not await s.running()
        state.snapshot = snap
        s2 = await client.resume(state)
        assert s2 is not s
        assert (await s2._exec_internal("cat", "link")).stdout == b"hello"
        with pytest.raises(ValueError):
            await s2.hydrate_workspace(io.BytesIO(HOSTILE["symlink out"]))
        r = await s2._exec_internal("sleep", "10", timeout=0.5)
        assert r.exit_code == 124
        await s2.shutdown()
        await s2.shutdown()   # idempotent
        assert not await s2.running()
    asyncio.run(main())


def test_deepagents_backend_sequence(sandbox):
    from nsbox.integrations.deepagents import NsboxBackend, sandbox_backend
    with sandbox_backend(sandbox) as b:
        assert type(b) is NsboxBackend and b.id
        r = b.execute("echo out; echo err >&2; exit 4")
        assert (r.output, r.exit_code, r.truncated) == ("out\nerr\n", 4, False)
        up = b.upload_files([("/tmp/workspace/a.txt", b"A"), ("rel/b.bin", b"\0\1"), ("/proc/1/nope", b"x")])
        assert [(u.path, u.error) for u in up][:2] == [("/tmp/workspace/a.txt", None), ("rel/b.bin", None)]
        assert up[2].error is not None
        down = b.download_files(["a.txt", "rel/b.bin", "missing", "rel"])
        assert [(d.content, d.error) for d in down] == [(b"A", None), (b"\0\1", None), (None, "file_not_found"),
                                                        (None, "is_directory")]
        assert b.execute("cat a.txt").output == "A"
        assert b.execute("sleep 10", timeout=1).exit_code == 124
        r = asyncio.run(b.aexecute("ls rel"))
        assert (r.output, r.exit_code) == ("b.bin\n", 0)
        assert [u.error for u in asyncio.run(b.aupload_files([("c", b"c")]))] == [None]
        assert [d.content for d in asyncio.run(b.adownload_files(["c"]))] == [b"c"]


def test_pydantic_ai_environment_sequence(sandbox):
    from nsbox.integrations.pydantic_ai import NsboxEnvironment, execution_environment

    async def main():
        env = execution_environment(sandbox)
        assert type(env) is NsboxEnvironment
        async with env:
            r = await env.execute("echo $GREETING; exit 2", env={"GREETING": "hi there"})
            assert (r.output, r.exit_code, r.truncated) == ("hi there\n", 2, False)
            await env.write_file("src/m.py", "a = 1\nb = 2\na = 3\n")
            await env.write_file("img.bin", b"\x89PNG\0")
            assert await env.read_file_bytes("img.bin") == b"\x89PNG\0"
            assert await env.read_file("src/m.py", offset=1, limit=1) == \
                "     2\tb = 2\n... (1 more lines. Use offset=2 to continue reading.)\n"
            with pytest.raises(ValueError):
                await env.edit_file("src/m.py", "a = ", "c = ")
            assert await env.edit_file("src/m.py", "a = ", "c = ", replace_all=True) == 2
            assert (await env.read_file_bytes("src/m.py")).decode() == "c = 1\nb = 2\nc = 3\n"
            with pytest.raises(FileNotFoundError):
                await env.read_file_bytes("nope")
            names = [(f.name, f.is_dir) for f in await env.ls()]
            assert names == [("img.bin", False), ("src", True)]
            assert await env.glob("**/*.py") == ["src/m.py"]
            assert await env.grep("c = ", path="src") == "m.py:1:c = 1\nm.py:3:c = 3"
            assert await env.grep("b", output_mode="count") == "src/m.py:1"
            async with await env.create_process("read line; echo got:$line; echo e >&2") as p:
                await p.send(b"ping\n")
                assert await p.wait(timeout=30) == 0
                assert await p.recv() == b"got:ping\n"
                assert await p.recv_stderr() == b"e\n"
                assert p.returncode == 0
        assert env._live is None
    asyncio.run(main())


def test_smolagents_executor_sequence(sandbox):
    from nsbox.integrations.smolagents import ExecutionError, NsboxPythonExecutor, python_executor
    ex = python_executor(sandbox=sandbox)
    try:
        assert type(ex) is NsboxPythonExecutor
        out = ex.run_code_raise_errors("x = 20\nprint('step 1')\nx + 1")
        assert (out.output, out.logs, out.is_final_answer) == ("21", "step 1\n", False)
        ex.send_variables({"y": [1, 2], "name": "nsbox"})
        assert ex("x + sum(y)").output == "23"
        assert ex("name.upper()").output == "'NSBOX'"
        with pytest.raises(ExecutionError) as e:
            ex("1 / 0")
        assert "ZeroDivisionError" in str(e.value)
        assert ex("x").output == "20"   # the state survived the error
        # a final answer of any size, read back whole (smolagents' safe format)
        out = ex("class FinalAnswerException(BaseException):\n    pass\n"
                 "import json\nraise FinalAnswerException('safe:' + json.dumps({'k': 'v' * 10000}))")
        assert out.is_final_answer and out.output == {"k": "v" * 10000}
        ex.restart()
        with pytest.raises(ExecutionError):
            ex("x")
    finally:
        ex.cleanup()
    ex.cleanup()


def test_autogen_executor_sequence(sandbox):
    from nsbox.integrations.autogen import NsboxCodeExecutor, code_executor

    class Block:
        def __init__(self, code, language):
            self.code, self.language = code, language

    class Token:
        def __init__(self):
            self.linked = []

        def link_future(self, fut):
            self.linked.append(fut)
            return fut

    async def main():
        ex = code_executor(sandbox, timeout=30)
        assert type(ex) is NsboxCodeExecutor
        async with ex:
            tok = Token()
            r = await ex.execute_code_blocks([Block("open('f.txt', 'w').write('py')\nprint('one')", "python"),
                                              Block("cat f.txt; echo; echo two >&2", "bash")], tok)
            assert (r.exit_code, r.output) == (0, "one\npy\ntwo\n") and len(tok.linked) == 2
            r = await ex.execute_code_blocks([Block("exit 5", "sh"), Block("print('never')", "python")], tok)
            assert (r.exit_code, r.output) == (5, "")
            r = await ex.execute_code_blocks([Block("console.log(6*7)", "javascript")], tok)
            assert (r.exit_code, r.output) == (0, "42\n")
            r = await ex.execute_code_blocks([Block("x", "cobol")], tok)
            assert r.exit_code == 1 and "unsupported language" in r.output
            await ex.restart()
            r = await ex.execute_code_blocks([Block("ls", "bash")], tok)
            assert (r.exit_code, r.output) == (0, "")   # a fresh sandbox
            # cancelling through the token kills the block
            t = asyncio.ensure_future(ex.execute_code_blocks([Block("sleep 30", "bash")], tok))
            await asyncio.sleep(0.5)
            tok.linked[-1].cancel()
            with pytest.raises(asyncio.CancelledError):
                await t
        assert ex._live is None
    asyncio.run(main())
