"""run_code: each language's failures are classified as `nsbox run-code` does."""
import pytest

import nsbox


def test_bash(bashroot, cli):
    sb = nsbox.Sandbox(rootfs=bashroot)
    r = sb.run_code("echo $((6*7))", "bash")
    assert r.ok and r.stdout == "42\n"
    r = sb.run_code("echo before; exit 4", "bash")
    assert r.exit_code == 4 and r.error.kind == "runtime_error"
    rec, _ = cli("run-code", "--lang", "bash", "--json", "--rootfs", bashroot, "-c", "echo before; exit 4")
    assert r.record["error"] == rec["error"]
    r = sb.run_code("if then fi", "bash")
    assert r.error.kind == "syntax_error" and r.error.message.startswith("Shell syntax error")
    r = sb.run_code("sleep 100", "bash", timeout=0.5)
    assert r.error.kind == "timeout" and r.error.message.startswith("Code execution timed out")
    # The code lands in /tmp, the working directory.
    assert sb.run_code("pwd; cat /tmp/main.sh", "bash").stdout == "/tmp\npwd; cat /tmp/main.sh"


def test_interpreter_missing(rootfs):
    r = nsbox.Sandbox(rootfs=rootfs).run_code("print(1)")
    assert r.error.kind == "interpreter_missing"


def test_unknown_language():
    with pytest.raises(ValueError):
        nsbox.Sandbox().run_code("x", "cobol")


def test_python(default_image):
    sb = nsbox.Sandbox(default_image, timeout=30)
    assert nsbox.run_code("print(6*7)", image=default_image).stdout == "42\n"
    r = sb.run_code("print(")
    assert r.error.kind == "syntax_error" and r.error.message.startswith("Python syntax error")
    r = sb.run_code("raise ValueError('bad input')")
    assert r.error.kind == "runtime_error" and "ValueError: bad input" in r.error.message
    assert "ValueError: bad input" in str(r)
    r = sb.run_code("while True: pass", timeout="1s")
    assert r.error.kind == "timeout" and r.timed_out
    r = sb.run_code("import sys; print(sys.stdin.read().upper())", stdin="abc")
    assert r.stdout == "ABC\n"


def test_node(default_image):
    sb = nsbox.Sandbox(default_image, timeout=30)
    assert sb.run_code("console.log(6*7)", "node").stdout == "42\n"
    r = sb.run_code("console.log(", "node")
    assert r.error.kind == "syntax_error" and r.error.message.startswith("JavaScript syntax error")
    r = sb.run_code("throw new Error('nope')", "node")
    assert r.error.kind == "runtime_error" and "nope" in r.error.message


def test_oom_code(default_image):
    r = nsbox.run_code("x = bytearray(512 << 20)", image=default_image, memory="64m", timeout=30)
    if r.limits["enforced_by"].startswith("cgroup"):
        assert r.error.kind == "oom" and r.oom_killed
    else:
        assert r.error.kind == "runtime_error" and "MemoryError" in r.error.message
