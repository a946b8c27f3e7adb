"""nsbox as a LangChain deepagents sandbox backend (``SandboxBackendProtocol``).

    from nsbox.integrations.deepagents import sandbox_backend
    backend = sandbox_backend(nsbox.Sandbox("default", memory="512m"))
    agent = create_deep_agent(model, backend=backend)
    ...
    backend.close()

One long-lived sandbox per backend: ``execute`` runs a shell command in it
(stdout and stderr combined, as the protocol wants), ``upload_files`` and
``download_files`` go through its files API (inside the sandbox, as its user;
a symlink there never reaches the host). With deepagents installed,
``sandbox_backend`` returns a subclass of its ``BaseSandbox``, which builds
``ls``, ``read``, ``write``, ``edit``, ``grep`` and ``glob`` on ``execute``;
without it, ``NsboxBackend`` has the same methods and return shapes.
Nothing of deepagents is imported until ``sandbox_backend`` is called.
"""
from __future__ import annotations

import asyncio
import errno as _errno
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

from ..errors import SandboxError
from ..sandbox import Sandbox
from . import _common

__all__ = ["NsboxBackend", "sandbox_backend", "ExecuteResponse", "FileUploadResponse", "FileDownloadResponse"]


# The protocol's result types (deepagents/backends/protocol.py), used when
# deepagents is not installed; with it, its own classes are returned.
@dataclass
class ExecuteResponse:
    output: str
    exit_code: Optional[int] = None
    truncated: bool = False


@dataclass
class FileUploadResponse:
    path: str
    error: Optional[str] = None


@dataclass
class FileDownloadResponse:
    path: str
    content: Optional[bytes] = None
    error: Optional[str] = None


def _types() -> Tuple[Any, Any, Any]:
    proto = _common.framework("deepagents.backends.protocol")
    if proto is None:
        return ExecuteResponse, FileUploadResponse, FileDownloadResponse
    return proto.ExecuteResponse, proto.FileUploadResponse, proto.FileDownloadResponse


def _file_error(e: SandboxError) -> str:
    # The protocol's FileOperationError literals where one fits.
    return {_errno.ENOENT: "file_not_found", _errno.EACCES: "permission_denied", _errno.EPERM: "permission_denied",
            _errno.EISDIR: "is_directory", _errno.EINVAL: "invalid_path",
            _errno.ENAMETOOLONG: "invalid_path"}.get(e.errno, str(e))


class NsboxBackend:
    """``SandboxBackendProtocol``'s sandbox part over one long-lived nsbox
    sandbox. ``root``: the working directory of commands (default: the
    workspace, ``/workspace`` when the Sandbox has one, else
    ``/tmp/workspace``)."""

    def __init__(self, sandbox: Optional[Sandbox] = None, *, root: Optional[str] = None) -> None:
        self._sandbox, self._live, self.root = _common.start(sandbox, root)
        self._types = _types()

    @property
    def id(self) -> str:
        return str(self._live.id)

    def execute(self, command: str, *, timeout: Optional[int] = None) -> Any:
        """Run ``command`` with /bin/sh in the workspace: combined output, the
        exit code (124 on timeout), and whether the output was cut to the
        sandbox's ``max_output``."""
        r = self._live.exec(_common.shell(command), timeout=_common.seconds(timeout), workdir=self.root)
        return self._types[0](output=r.stdout, exit_code=_common.exit_code(r), truncated=r.stdout_truncated)

    async def aexecute(self, command: str, *, timeout: Optional[int] = None) -> Any:
        """``execute`` for asyncio; cancelling the task kills the command."""
        r = await self._live.aexec(_common.shell(command), timeout=_common.seconds(timeout), workdir=self.root)
        return self._types[0](output=r.stdout, exit_code=_common.exit_code(r), truncated=r.stdout_truncated)

    def upload_files(self, files: List[Tuple[str, bytes]]) -> List[Any]:
        """Write each (path, bytes); one response per file, in order, with a
        ``FileOperationError`` where one failed."""
        out = []
        for path, data in files:
            p = _common.resolve(self.root, path)
            try:
                parent = p.rsplit("/", 1)[0] or "/"
                if not self._live.files.exists(parent):
                    self._live.files.make_dir(parent)
                self._live.files.write(p, bytes(data))
                out.append(self._types[1](path=path, error=None))
            except SandboxError as e:
                out.append(self._types[1](path=path, error=_file_error(e)))
        return out

    def download_files(self, paths: List[str]) -> List[Any]:
        out = []
        for path in paths:
            p = _common.resolve(self.root, path)
            try:
                info = self._live.files.stat(p)
                if info is not None and info.type == "dir":
                    out.append(self._types[2](path=path, content=None, error="is_directory"))
                    continue
                out.append(self._types[2](path=path, content=self._live.files.read(p), error=None))
            except SandboxError as e:
                out.append(self._types[2](path=path, content=None, error=_file_error(e)))
        return out

    async def aupload_files(self, files: List[Tuple[str, bytes]]) -> List[Any]:
        return await asyncio.to_thread(self.upload_files, files)

    async def adownload_files(self, paths: List[str]) -> List[Any]:
        return await asyncio.to_thread(self.download_files, paths)

    def close(self) -> None:
        """End the sandbox and everything in it."""
        self._live.close()

    def __enter__(self) -> "NsboxBackend":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_bound: Optional[type] = None


def sandbox_backend(sandbox: Optional[Sandbox] = None, *, root: Optional[str] = None) -> NsboxBackend:
    """An ``NsboxBackend``; a subclass of deepagents' ``BaseSandbox`` too when
    deepagents is installed (its file tools then run through ``execute``)."""
    global _bound
    base = _common.framework("deepagents.backends.sandbox")
    if base is None:
        return NsboxBackend(sandbox, root=root)
    if _bound is None:
        _bound = type("NsboxSandboxBackend", (NsboxBackend, base.BaseSandbox), {})
    return _bound(sandbox, root=root)
