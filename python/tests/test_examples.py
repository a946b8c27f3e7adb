"""The examples run (on the busybox root filesystem, in bash mode)."""
import os
import subprocess
import sys

import pytest

import nsbox

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


# The notebook agent's data gives these totals (cities in the order they
# first appear), whichever way they are computed.
TOTALS_CSV = b"city,units\nLisbon,565\nOslo,355\nQuito,780\n"
SUMMARY = "summary: 12 rows, 3 cities; total units 1700; best city Quito (780 units)"


def _png_size(data):
    """(width, height) of a PNG after checking its signature, its chunks'
    CRCs and that its image data inflates; AssertionError otherwise."""
    import struct
    import zlib
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:16]
    pos, kinds, idat, size = 8, [], b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        assert struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0] == zlib.crc32(kind + body), kind
        kinds.append(kind)
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and zlib.decompress(idat), kinds
    return size


def test_notebook_agent(default_image, tmp_path):
    p = run("notebook_agent.py", "--image", default_image, "--out", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    has = dict(kv.split("=") for kv in out.split("the image has: ")[1].splitlines()[0].split(", "))
    # the cells kept their state: the totals cell used the load cell's rows,
    # and a last cell still sees them
    assert '{"rows": 12, "totals": {"Lisbon": 565, "Oslo": 355, "Quito": 780}}' in out
    assert "state kept: a new cell sees rows_n = 12" in out and SUMMARY in out
    # the file the cells wrote inside, downloaded byte for byte
    assert (tmp_path / "totals.csv").read_bytes() == TOTALS_CSV
    assert "in /tmp/work: " in out and "totals.csv (41 bytes)" in out and "sales.csv (158 bytes)" in out
    # the chart came back as image/png in the cell's results
    png = (tmp_path / "chart.png").read_bytes()
    w, h = _png_size(png)
    assert "(image/png: %d bytes" % len(png) in out
    if has["pandas"] == "yes":
        assert "(rich result: text/html, text/plain)" in out   # the DataFrame's HTML
    else:
        assert "skipped: pandas (not in the image): the cells use the csv module" in out
    if has["matplotlib"] == "no":
        assert "skipped: matplotlib (not in the image): the chart is drawn in plain Python" in out
        assert (w, h) == (320, 200)
    else:
        assert "skipped: matplotlib" not in out and (w, h) == (400, 250)   # figsize (4, 2.5) at 100 dpi


def test_notebook_agent_without_python(bashroot, tmp_path):
    """A root filesystem without python3: said, and the totals still come
    from inside the sandbox (a shell command), uploaded and downloaded."""
    p = run("notebook_agent.py", "--rootfs", bashroot, "--out", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "no python3 in this root filesystem" in p.stdout
    assert "skipped: the code cells and the chart (no python3): totals by a shell command" in p.stdout
    assert SUMMARY in p.stdout
    assert (tmp_path / "totals.csv").read_bytes() == TOTALS_CSV
    assert not (tmp_path / "chart.png").exists()


# ---- the documentation's examples ------------------------------------------------
# The ```python blocks of docs/python.md's section on stateful sandboxes and of
# the README's run as written, each with `live` a started sandbox of the
# default image; a line `expr  # -> value` (or a `# -> value` line under
# `expr`) asserts that expr equals value, and every such line must be reached.
# A block whose first line is `# needs matplotlib ...` or `# needs a cgroup
# ...` runs where the image or the host has that, and is skipped otherwise.
TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DOC_SECTIONS = (("docs/python.md", "## Stateful sandboxes"), ("README.md", "## Stateful sandboxes"))


def _doc_blocks():
    found = []
    for rel, heading in DOC_SECTIONS:
        try:
            with open(os.path.join(TOP, rel), encoding="utf-8") as f:
                text = f.read()
        except OSError:
            continue
        start = text.find("\n" + heading)
        assert start >= 0, "%s has no section '%s'" % (rel, heading)
        end = text.find("\n## ", start + 1)
        end = end if end > 0 else len(text)
        pos, n = start, 0
        while True:
            a = text.find("\n```python\n", pos, end)
            if a < 0:
                break
            b = text.find("\n```\n", a + 1)
            n += 1
            first = text[:a + 11].count("\n") + 1   # the line number of the block's first line
            found.append(pytest.param(rel, first, text[a + 11:b + 1], id="%s-%d" % (rel.replace("/", "_"), n)))
            pos = b
    return found or [pytest.param(None, 0, "", id="no-docs")]


def _checked(code, first_line):
    """The block with its `# -> value` lines turned into _check_ calls; the
    line numbers of the checks."""
    out, checks = [], []
    for i, line in enumerate(code.splitlines()):
        lineno = first_line + i
        expr, sep, value = line.partition("# -> ")
        if not sep:
            out.append(line)
            continue
        if not expr.strip():   # a `# -> value` line checks the line above it
            expr = out.pop()
            lineno -= 1
        indent = expr[:len(expr) - len(expr.lstrip())]
        out.append("%s_check_((%s), (%s), %d)" % (indent, expr.strip(), value.strip(), lineno))
        checks.append(lineno)
    return "\n".join(out) + "\n", checks


def _live_names(ns):
    """The sandbox names a block's variables hold (its handles, and strings)."""
    names = set()
    for v in ns.values():
        if isinstance(v, nsbox.LiveSandbox) and v.name:
            names.add(v.name)
        elif isinstance(v, str) and 0 < len(v) < 64:
            names.add(v)
    return names


@pytest.mark.parametrize("doc,line,code", _doc_blocks())
def test_doc_examples(default_image, doc, line, code):
    if doc is None:
        pytest.skip("docs/python.md and README.md are not beside python/ (run through make check)")
    src, checks = _checked(code, line)
    reached = set()
    sources = dict(zip(checks, (ln.split("# -> ")[0].strip() or prev.strip()
                                for prev, ln in _pairs(code) if "# -> " in ln)))

    def check(value, expected, lineno):
        assert value == expected, "%s:%d: `%s`: %r, not %r" % (doc, lineno, sources.get(lineno), value, expected)
        reached.add(lineno)

    before = {s["name"] for s in nsbox.sandboxes()}
    with nsbox.Sandbox(default_image).start() as live:
        first = code.lstrip().splitlines()[0]
        if first.startswith("# needs matplotlib") and not live.exec(["python3", "-c", "import matplotlib"]).ok:
            pytest.skip("%s:%d: the image has no matplotlib" % (doc, line))
        if first.startswith("# needs a cgroup") and \
                not str(live.exec(["true"]).limits.get("enforced_by")).startswith("cgroup"):
            pytest.skip("%s:%d: no cgroup here (limits enforced by rlimits): pause needs the freezer" % (doc, line))
        ns = {"nsbox": nsbox, "live": live, "_check_": check, "__name__": "__doc_example__"}
        filename = "%s:%d" % (doc, line)
        try:
            exec(compile(src, filename, "exec"), ns)
        finally:
            # Whatever the block started and left running (by the names it
            # holds: another user's sandboxes of the same uid are not ours).
            left = ({s["name"] for s in nsbox.sandboxes()} - before) & _live_names(ns)
            for name in left - {live.name}:
                try:
                    nsbox.live.stop(name)
                except nsbox.SandboxError:
                    pass
    assert sorted(reached) == checks, "%s: checks not reached: %s" % (doc, sorted(set(checks) - reached))


def _pairs(code):
    """(previous line, line) for each line of code."""
    lines = code.splitlines()
    return zip([""] + lines, lines)
