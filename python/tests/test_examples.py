"""The examples run (on the busybox root filesystem, in bash mode)."""
import os
import subprocess
import sys

EX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")


def run(*args, **kw):
    return subprocess.run([sys.executable, os.path.join(EX, args[0]), *args[1:]], capture_output=True, text=True,
                          timeout=300, **kw)


def test_agent_loop(bashroot):
    p = run("agent_loop.py", "--rootfs", bashroot, "--language", "bash")
    assert p.returncode == 0, p.stderr
    assert "45\n[exited with code 0]" in p.stdout and "[Execution failed with exit code 3]" in p.stdout
    assert p.stdout.rstrip().endswith("model: The answer is 42.")


def test_async_many(bashroot):
    p = run("async_many.py", "--rootfs", bashroot, "--language", "bash")
    assert p.returncode == 0, p.stderr
    assert "['0', '1', '4', '9', '16', '25', '36', '49']" in p.stdout and "cancelled" in p.stdout


def test_workspace_review(bashroot, tmp_path):
    (tmp_path / "a.txt").write_text("old\n")
    p = run("workspace_review.py", str(tmp_path), "--rootfs", bashroot, "--yes",
            "--command", "echo new >a.txt; echo made >b.txt")
    assert p.returncode == 0, p.stderr
    assert "-old\n+new\n" in p.stdout and "applied" in p.stdout
    assert (tmp_path / "a.txt").read_text() == "new\n" and (tmp_path / "b.txt").read_text() == "made\n"
