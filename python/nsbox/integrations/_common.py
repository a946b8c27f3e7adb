"""What the framework adapters share: a long-lived sandbox with a workspace
directory, shell commands with combined output, and the workspace as a tar
(built from, and unpacked through, the sandbox's files API).

Nothing here imports a framework. A tar handed to ``unpack_workspace`` is
hostile: every member is checked before anything is written, and the
archive is refused whole (``ValueError``) on an absolute path, a ``..``, a
hard link, a symlink that leads out of the workspace, a member below one of
the archive's own symlinks, a device, FIFO or other special file, or more
than ``max_bytes`` of content. Modes keep only the permission bits.
"""
from __future__ import annotations

import asyncio
import functools
import importlib
import io
import posixpath
import shlex
import tarfile
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ..live import LiveSandbox
from ..result import Result
from ..sandbox import Sandbox

# The workspace root inside the sandbox: the mounted workspace when the
# Sandbox has one, else a directory in the sandbox's writable /tmp.
WORKSPACE_MOUNT = "/workspace"
WORKSPACE_SCRATCH = "/tmp/workspace"
# Bound on the content of a tar given to hydrate (the sandbox's files API
# bounds each file by files.max_size as well).
MAX_TAR_BYTES = 1 << 30


def framework(module: str) -> Optional[Any]:
    """The framework's module when it is installed, else None: adapters
    import their framework only when asked for the framework-bound class."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def workspace_root(sandbox: Sandbox) -> str:
    return WORKSPACE_MOUNT if any(k == "workspace.path" for k, _, _ in sandbox._settings) else WORKSPACE_SCRATCH


def start(sandbox: Optional[Sandbox], root: Optional[str]) -> Tuple[Sandbox, LiveSandbox, str]:
    """A long-lived sandbox from ``sandbox`` (default: ``Sandbox.from_env()``)
    with its workspace directory made."""
    sb = sandbox if sandbox is not None else Sandbox.from_env()
    live = sb.start()
    try:
        r = root or workspace_root(sb)
        live.files.make_dir(r)
    except BaseException:
        live.close()
        raise
    return sb, live, r


def resolve(root: str, path: Union[str, Any]) -> str:
    """``path`` in the sandbox: absolute as given, relative to the workspace."""
    p = str(path)
    return posixpath.normpath(p if p.startswith("/") else posixpath.join(root, p))


def shell(command: str, env: Optional[Dict[str, str]] = None) -> List[str]:
    """argv running ``command`` with /bin/sh, stderr merged into stdout (one
    stream, in the order written), after exporting ``env``."""
    pre = ""
    for k, v in (env or {}).items():
        if not k or not (k[0].isalpha() or k[0] == "_") or not all(c.isalnum() or c == "_" for c in k):
            raise ValueError("env: invalid variable name %r" % (k,))
        pre += "export %s=%s\n" % (k, shlex.quote(v))
    return ["/bin/sh", "-c", "exec 2>&1\n" + pre + command]


def seconds(timeout: Optional[float]) -> Optional[float]:
    """A framework's timeout in seconds: None or 0 leave the sandbox's own."""
    return None if timeout is None or timeout <= 0 else float(timeout)


def exit_code(r: Result) -> int:
    """The command's exit code, or the CLI's status when it did not exit
    (124 on timeout, 128+N when killed by signal N)."""
    return r.exit_code if r.exit_code is not None else r.exit_status


async def in_thread(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args, **kw))


# ---- the workspace as a tar -------------------------------------------------

def pack_workspace(live: LiveSandbox, root: str) -> bytes:
    """A tar of the workspace, member names relative to it (directories,
    regular files, symlinks), read through the files API."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _pack_dir(live, tar, root, "")
    return buf.getvalue()


def _pack_dir(live: LiveSandbox, tar: tarfile.TarFile, root: str, rel: str) -> None:
    for f in sorted(live.files.list(posixpath.join(root, rel) if rel else root), key=lambda f: f.name):
        name = posixpath.join(rel, f.name) if rel else f.name
        ti = tarfile.TarInfo(name)
        ti.mode, ti.mtime = f.mode & 0o777, int(f.mtime)
        if f.type == "dir":
            ti.type = tarfile.DIRTYPE
            tar.addfile(ti)
            _pack_dir(live, tar, root, name)
        elif f.type == "file":
            data = live.files.read(f.path)
            ti.size = len(data)
            tar.addfile(ti, io.BytesIO(data))
        elif f.type == "symlink":
            r = live.exec(["readlink", f.path])
            if not r.ok:
                raise OSError("read the symlink %s in the sandbox: %s" % (f.path, r.stderr.strip()))
            ti.type, ti.linkname = tarfile.SYMTYPE, r.stdout.rstrip("\n")
            tar.addfile(ti)
        # sockets and FIFOs made in the sandbox are not workspace content


def _member_path(name: str) -> str:
    """A member's workspace-relative path, or ValueError when it is not one."""
    if name.startswith("/"):
        raise ValueError("tar member %r: an absolute path" % name)
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError("tar member %r: '..' leaves the workspace" % name)
    if any("\0" in p for p in parts):
        raise ValueError("tar member %r: a NUL in the name" % name)
    return "/".join(parts)


def check_tar(data: bytes, max_bytes: int = MAX_TAR_BYTES) -> List[Tuple[tarfile.TarInfo, str]]:
    """The members of a hostile tar with their checked relative paths, or
    ValueError naming the first member that is refused."""
    try:
        tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    except tarfile.TarError as e:
        raise ValueError("not a tar archive: %s" % e) from None
    out: List[Tuple[tarfile.TarInfo, str]] = []
    links: set = set()
    total = 0
    with tar:
        try:
            members = tar.getmembers()
        except tarfile.TarError as e:
            raise ValueError("a damaged tar archive: %s" % e) from None
    for m in members:
        rel = _member_path(m.name)
        if not rel:
            if m.isdir():
                continue   # "." itself
            raise ValueError("tar member %r: no name" % m.name)
        # Nothing below one of the archive's own symlinks: it would be
        # written wherever the link points.
        for i in range(1, rel.count("/") + 1):
            if "/".join(rel.split("/")[:i]) in links:
                raise ValueError("tar member %r: below the archive's symlink %r" % (m.name, "/".join(rel.split("/")[:i])))
        if m.isreg():
            total += m.size
            if total > max_bytes:
                raise ValueError("tar archive: more than %d bytes of content" % max_bytes)
        elif m.issym():
            t = m.linkname
            if not t or t.startswith("/"):
                raise ValueError("tar member %r: a symlink to the absolute path %r" % (m.name, t))
            if "\0" in t or posixpath.normpath(posixpath.join(posixpath.dirname(rel), t)).split("/")[0] == "..":
                raise ValueError("tar member %r: a symlink that leads out of the workspace (%r)" % (m.name, t))
            links.add(rel)
        elif m.islnk():
            raise ValueError("tar member %r: a hard link (refused)" % m.name)
        elif not m.isdir():
            raise ValueError("tar member %r: a device, FIFO or other special file (refused)" % m.name)
        out.append((m, rel))
    return out


def unpack_workspace(live: LiveSandbox, root: str, data: bytes, max_bytes: int = MAX_TAR_BYTES) -> None:
    """Write a checked tar into the workspace: directories, then files, then
    symlinks (so that no file is written through a link the archive made)."""
    members = check_tar(data, max_bytes)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        for m, rel in members:
            if m.isdir():
                live.files.make_dir(posixpath.join(root, rel), mode=m.mode & 0o777 | 0o700)
        for m, rel in members:
            if m.isreg():
                path = posixpath.join(root, rel)
                parent = posixpath.dirname(path)
                if parent != root:
                    live.files.make_dir(parent)
                f = tar.extractfile(m)
                live.files.write(path, f.read() if f is not None else b"", mode=m.mode & 0o777)
        for m, rel in members:
            if m.issym():
                path = posixpath.join(root, rel)
                if live.files.exists(path):
                    live.files.remove(path)
                r = live.exec(["ln", "-s", m.linkname, path])
                if not r.ok:
                    raise OSError("make the symlink %s in the sandbox: %s" % (path, r.stderr.strip()))
