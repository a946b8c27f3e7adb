"""nsbox for the OpenAI Agents SDK: a sandbox client and session for its
sandbox agents, and a function tool.

    from nsbox.integrations.openai_agents import sandbox_client
    client = sandbox_client(nsbox.Sandbox("default", memory="512m"))
    session = await client.create(options=None)
    await session.start()                 # framework-bound: the SDK's wrapper
    ...
    await client.delete(session)

A session is one long-lived sandbox: ``_exec_internal(*command, timeout)``
runs a command in its workspace (``/workspace`` when the Sandbox has one,
else ``/tmp/workspace``), ``read``/``write`` go through its files API,
``persist_workspace`` is a tar of the workspace (member names relative to
it) and ``hydrate_workspace`` unpacks one after checking every member
(refused whole on an absolute path, ``..``, a link out, a hard link or a
device). With the SDK installed, ``sandbox_client`` returns a subclass of its
``BaseSandboxClient`` whose sessions subclass ``BaseSandboxSession`` and
whose state is a ``SandboxSessionState``; nothing of the SDK is imported
before. ``nsbox_function_tool(sandbox)`` is a ``FunctionTool`` running the
model's code in a fresh sandbox per call.
"""
from __future__ import annotations

import asyncio
import errno as _errno
import io
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Union

from ..errors import SandboxError
from ..live import LiveSandbox
from ..sandbox import Sandbox
from ..tools import TOOL_DESCRIPTION, TOOL_NAME, _parse, tool_schema, tool_text
from . import _common

__all__ = ["NsboxSandboxSession", "NsboxSandboxClient", "NsboxSessionState", "sandbox_client",
           "nsbox_function_tool", "ExecResult"]

BACKEND_ID = "nsbox"


class ExecResult:
    """The SDK's ExecResult (agents/sandbox/types.py), used without it."""

    def __init__(self, *, stdout: bytes, stderr: bytes, exit_code: int) -> None:
        self.stdout, self.stderr, self.exit_code = stdout, stderr, exit_code

    def ok(self) -> bool:
        return self.exit_code == 0


def _exec_result_type() -> Any:
    t = _common.framework("agents.sandbox.types")
    return ExecResult if t is None else t.ExecResult


@dataclass
class NsboxSessionState:
    """What a session needs to be resumed: its id, the workspace root and,
    when the workspace was persisted, that tar (``snapshot``)."""
    session_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    root: Optional[str] = None
    snapshot: Optional[bytes] = None
    type: str = BACKEND_ID


class NsboxSandboxSession:
    """A sandbox agent's session over one long-lived nsbox sandbox: the
    methods ``BaseSandboxSession`` leaves to a backend."""

    def __init__(self, *, state: Any, sandbox: Sandbox) -> None:
        self.state = state
        self._config = sandbox
        self._live: Optional[LiveSandbox] = None
        self._root = getattr(state, "root", None) or _common.workspace_root(sandbox)

    # ---- the sandbox --------------------------------------------------------

    def _ensure(self) -> LiveSandbox:
        if self._live is None:
            _, self._live, self._root = _common.start(self._config, self._root)
        return self._live

    async def _ensure_started(self) -> LiveSandbox:
        return await asyncio.to_thread(self._ensure)

    @property
    def workspace_root(self) -> str:
        return self._root

    async def running(self) -> bool:
        return self._live is not None

    async def shutdown(self) -> None:
        """End the sandbox and everything in it (idempotent)."""
        live, self._live = self._live, None
        if live is not None:
            await asyncio.to_thread(live.close)

    # ---- commands -----------------------------------------------------------

    async def _exec_internal(self, *command: Union[str, Path], timeout: Optional[float] = None) -> Any:
        """Run ``command`` (argv) in the workspace; stdout and stderr as bytes
        and the exit code (124 on timeout, 128+N when killed by signal N)."""
        live = await self._ensure_started()
        argv = [str(c) for c in command]
        r = await live.aexec(argv, timeout=_common.seconds(timeout), workdir=self._root)
        return _exec_result_type()(stdout=r.stdout.encode(), stderr=r.stderr.encode(),
                                   exit_code=_common.exit_code(r))

    async def exec(self, *command: Union[str, Path], timeout: Optional[float] = None, shell: bool = True) -> Any:
        """A command as the SDK's ``exec`` gives it: one string runs with
        ``sh -c`` (``shell=True``), several words are the argv."""
        if shell and len(command) == 1:
            return await self._exec_internal("/bin/sh", "-c", str(command[0]), timeout=timeout)
        return await self._exec_internal(*command, timeout=timeout)

    # ---- files --------------------------------------------------------------

    def _path(self, path: Union[str, Path]) -> str:
        return _common.resolve(self._root, path)

    async def read(self, path: Path, *, user: Any = None) -> io.IOBase:
        """The file's bytes as a readable stream; FileNotFoundError if none."""
        live = await self._ensure_started()
        try:
            data = await live.files.aread(self._path(path))
        except SandboxError as e:
            if e.errno == _errno.ENOENT:
                raise FileNotFoundError(_errno.ENOENT, "no such file in the sandbox", str(path)) from None
            raise
        return io.BytesIO(data)

    async def write(self, path: Path, data: io.IOBase, *, user: Any = None) -> None:
        """Write the stream (from its current position to its end) as the
        file, making its directory first."""
        live = await self._ensure_started()
        p = self._path(path)
        raw = data.read()
        payload = raw.encode() if isinstance(raw, str) else bytes(raw)
        parent = p.rsplit("/", 1)[0] or "/"
        await asyncio.to_thread(live.files.make_dir, parent)
        await live.files.awrite(p, payload)

    # ---- the workspace ------------------------------------------------------

    async def persist_workspace(self) -> io.IOBase:
        """The workspace as a tar stream, member names relative to it."""
        live = await self._ensure_started()
        return io.BytesIO(await asyncio.to_thread(_common.pack_workspace, live, self._root))

    async def hydrate_workspace(self, data: io.IOBase) -> None:
        """Unpack a tar (as ``persist_workspace`` makes) into the workspace,
        after checking every member; ValueError and nothing written when a
        member is refused."""
        live = await self._ensure_started()
        raw = data.read()
        await asyncio.to_thread(_common.unpack_workspace, live, self._root, bytes(raw))


class NsboxSandboxClient:
    """``BaseSandboxClient``'s methods: sessions over nsbox sandboxes made
    from ``sandbox`` (default: ``Sandbox.from_env()``)."""

    backend_id = BACKEND_ID
    supports_default_options = True

    def __init__(self, sandbox: Optional[Sandbox] = None) -> None:
        self._config = sandbox if sandbox is not None else Sandbox.from_env()
        self._sessions: Dict[str, NsboxSandboxSession] = {}

    async def create(self, *, snapshot: Any = None, manifest: Any = None, options: Any) -> Any:
        """A new session (its sandbox is set up when first used); ``options``
        is required as in the SDK (None: the defaults)."""
        state = NsboxSessionState(root=getattr(manifest, "root", None))
        return self._new(state)

    def _new(self, state: Any) -> Any:
        s = NsboxSandboxSession(state=state, sandbox=self._config)
        self._sessions[str(state.session_id)] = s
        return s

    async def delete(self, session: Any) -> Any:
        """End the session's sandbox."""
        inner = getattr(session, "_inner", session)
        await inner.shutdown()
        self._sessions.pop(str(inner.state.session_id), None)
        return session

    async def resume(self, state: Any) -> Any:
        """The session of ``state`` if its sandbox is still up here; else a
        new sandbox, its workspace hydrated from the state's snapshot."""
        s = self._sessions.get(str(state.session_id))
        if s is not None and await s.running():
            return s
        s = self._new(state)
        snap = getattr(state, "snapshot", None)
        if isinstance(snap, (bytes, bytearray)):
            await s.hydrate_workspace(io.BytesIO(bytes(snap)))
        return s

    def serialize_session_state(self, state: Any) -> Dict[str, object]:
        import base64
        return {"type": BACKEND_ID, "session_id": str(state.session_id), "root": state.root,
                "snapshot": base64.b64encode(state.snapshot).decode() if state.snapshot else None}

    def deserialize_session_state(self, payload: Dict[str, object]) -> Any:
        import base64
        if payload.get("type") != BACKEND_ID:
            raise ValueError("not an nsbox session state: type %r" % (payload.get("type"),))
        snap = payload.get("snapshot")
        root = payload.get("root")
        return NsboxSessionState(session_id=str(payload["session_id"]), root=str(root) if root else None,
                                 snapshot=base64.b64decode(str(snap)) if snap else None)


_bound: Optional[type] = None


def _bind() -> Optional[type]:
    """The client subclassing the SDK's BaseSandboxClient, with its session
    subclassing BaseSandboxSession and its state SandboxSessionState; None
    without the SDK."""
    global _bound
    if _bound is not None:
        return _bound
    sc = _common.framework("agents.sandbox.session.sandbox_client")
    if sc is None:
        return None
    from agents.sandbox.manifest import Manifest
    from agents.sandbox.session.base_sandbox_session import BaseSandboxSession
    from agents.sandbox.session.sandbox_session_state import SandboxSessionState
    from agents.sandbox.snapshot import resolve_snapshot
    from typing import Literal

    class NsboxAgentsSessionState(SandboxSessionState):   # type: ignore[misc,valid-type]
        type: Literal["nsbox"] = "nsbox"   # type: ignore[assignment]

    class NsboxAgentsSession(NsboxSandboxSession, BaseSandboxSession):   # type: ignore[misc,valid-type]
        def __init__(self, *, state: Any, sandbox: Sandbox) -> None:
            NsboxSandboxSession.__init__(self, state=state, sandbox=sandbox)
            self._root = str(state.manifest.root)

        async def _shutdown_backend(self) -> None:
            await NsboxSandboxSession.shutdown(self)

        shutdown = BaseSandboxSession.shutdown   # the SDK's hooks around _shutdown_backend
        exec = BaseSandboxSession.exec

    class NsboxAgentsClient(NsboxSandboxClient, sc.BaseSandboxClient):   # type: ignore[misc,valid-type]
        async def create(self, *, snapshot: Any = None, manifest: Any = None, options: Any) -> Any:
            manifest = self._validate_manifest_for_create(manifest if manifest is not None else Manifest())
            sid = uuid.uuid4()
            state = NsboxAgentsSessionState(session_id=sid, manifest=manifest,
                                            snapshot=resolve_snapshot(snapshot, str(sid)))
            inner = NsboxAgentsSession(state=state, sandbox=self._config)
            self._sessions[str(sid)] = inner
            return self._wrap_session(inner)

        async def resume(self, state: Any) -> Any:
            inner = self._sessions.get(str(state.session_id))
            if inner is None or not await inner.running():
                inner = NsboxAgentsSession(state=state, sandbox=self._config)
                self._sessions[str(state.session_id)] = inner
            return self._wrap_session(inner)   # start() hydrates from state.snapshot

        serialize_session_state = sc.BaseSandboxClient.serialize_session_state

        def deserialize_session_state(self, payload: Dict[str, object]) -> Any:
            return self._deserialize_session_state_payload(payload, NsboxAgentsSessionState)

    _bound = NsboxAgentsClient
    return _bound


def sandbox_client(sandbox: Optional[Sandbox] = None) -> NsboxSandboxClient:
    """A client for sandbox agents: the SDK-bound subclass when the OpenAI
    Agents SDK is installed, else ``NsboxSandboxClient``."""
    cls = _bind()
    return (cls or NsboxSandboxClient)(sandbox)


def nsbox_function_tool(sandbox: Optional[Sandbox] = None, name: str = TOOL_NAME,
                        description: str = TOOL_DESCRIPTION) -> Any:
    """A FunctionTool that runs the model's code in ``sandbox`` (cancellable);
    needs the SDK (``agents``)."""
    from agents import FunctionTool
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
