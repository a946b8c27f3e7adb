"""nsbox: run untrusted code in Linux-namespace sandboxes, from Python.

    import nsbox
    print(nsbox.run_code("print(6*7)").stdout)          # 42

    sb = nsbox.Sandbox(memory="256m", timeout=30, network="none")
    r = sb.run(["ls", "-l", "/"])
    r.ok, r.exit_code, r.stdout, r.record               # the --json record

Bindings over libnsbox (no `nsbox` process is started); the GIL is released
while a sandbox runs. See docs/python.md.
"""
from .errors import IsolationUnavailable, SandboxError
from .host import Image, check, images, version
from .live import (Context, FileInfo, Files, LiveSandbox, Process, connect, remove_snapshot, sandboxes,
                   snapshots)
from .pool import Pool
from .result import Change, Result, RunError
from .sandbox import LANGUAGES, Sandbox, arun, arun_code, run, run_code
from .session import Session, sessions
from .tools import acall_tool, call_tool, tool_schema

__all__ = [
    "Sandbox", "run", "run_code", "arun", "arun_code", "Result", "RunError", "Change",
    "SandboxError", "IsolationUnavailable", "Session", "sessions", "Image", "images", "check",
    "version", "tool_schema", "call_tool", "acall_tool", "LANGUAGES", "Pool", "LiveSandbox", "Context", "Files", "FileInfo",
    "Process", "connect", "sandboxes", "snapshots", "remove_snapshot",
]
__version__ = "0.1.0"
