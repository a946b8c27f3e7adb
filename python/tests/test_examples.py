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

