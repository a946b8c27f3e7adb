"""Sessions end to end: a workspace run, review, apply, discard."""
import os
import shutil
import subprocess
import uuid

import pytest

import nsbox


def test_session_review_apply_discard(bashroot, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "keep.txt").write_text("one\ntwo\n")
    (ws / "gone.txt").write_text("bye\n")
    name = "pytest-" + uuid.uuid4().hex[:12]
    sb = nsbox.Sandbox(rootfs=bashroot, workspace=ws, session=name)
    r = sb.run("echo three >>keep.txt; echo new >added.txt; rm gone.txt; printf 'x\\033[2Jy\\n' >esc.txt",
               timeout=30)
    assert r.ok, str(r)
    assert (ws / "keep.txt").read_text() == "one\ntwo\n", "the host is untouched until apply"
    assert r.session == name
    assert {(c.path, c.kind) for c in r.changes} == {("keep.txt", "modified"), ("added.txt", "added"),
                                                     ("gone.txt", "deleted"), ("esc.txt", "added")}
    assert name in [s.name for s in nsbox.sessions()]

    s = nsbox.Session(name)
    ch = {c.path: c for c in s.changes()}
    assert set(ch) == {"keep.txt", "added.txt", "gone.txt", "esc.txt"}
    assert ch["keep.txt"].kind == "modified" and not ch["keep.txt"].denied and ch["keep.txt"].mode is not None
    assert ch["gone.txt"].kind == "deleted" and ch["gone.txt"].mode is None
    d = s.diff()
    assert "--- a/keep.txt\n+++ b/keep.txt\n" in d and "+three\n" in d
    assert "+new\n" in d and "-bye\n" in d
    assert "+x\033[2Jy\n" in d, "the diff is a patch: content as it is"
    e = s.diff(escape=True)
    assert "\033" not in e and "\\x1b[2J" in e, "escape=True shows terminal controls escaped"

    assert s.apply(paths=["keep.txt", "added.txt"], keep=True) == []
    assert (ws / "keep.txt").read_text() == "one\ntwo\nthree\n"
    assert (ws / "added.txt").read_text() == "new\n"
    assert (ws / "gone.txt").exists(), "only the paths given are applied"
    assert name in [x.name for x in nsbox.sessions()], "keep=True keeps the session"
    s.discard()
    assert name not in [x.name for x in nsbox.sessions()]
    with pytest.raises(nsbox.SandboxError):
        s.changes()


@pytest.mark.skipif(not shutil.which("patch"), reason="GNU patch is needed")
def test_diff_applies_with_patch_and_apply_keeps_times(bashroot, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "edit.txt").write_text("a\nb\nc\n")
    (ws / "gone.txt").write_text("bye\n")
    name = "pytest-" + uuid.uuid4().hex[:12]
    r = nsbox.run("printf 'a\\nB\\nc' >edit.txt; printf 'no final newline' >nonl.txt; rm gone.txt; "
                  "mkdir -p d/e; printf 'x\\n' >d/e/f; : >empty; touch -d '2001-02-03 04:05:06' d/e/f",
                  rootfs=bashroot, workspace=ws, session=name)
    assert r.ok, str(r)
    s = nsbox.Session(name)
    try:
        ch = {c.path: c for c in s.changes()}
        assert ch["d/e/f"].mtime == "2001-02-03T04:05:06.000000000Z" and ch["d/e/f"].rule == "apply"
        copy = tmp_path / "copy"
        shutil.copytree(ws, copy, symlinks=True)
        p = subprocess.run(["patch", "-s", "-p1"], cwd=copy, input=s.diff().encode("utf-8", "surrogateescape"),
                           capture_output=True)
        assert p.returncode == 0, p.stdout + p.stderr
        assert (copy / "edit.txt").read_bytes() == b"a\nB\nc", "no '\\ No newline' in the text"
        assert (copy / "nonl.txt").read_bytes() == b"no final newline"
        assert (copy / "d/e/f").read_bytes() == b"x\n" and (copy / "empty").read_bytes() == b""
        assert not (copy / "gone.txt").exists()
        assert s.apply() == []
        assert os.stat(ws / "d/e/f").st_mtime_ns == ch["d/e/f"].mtime_ns, "apply keeps the session's mtime"
        assert os.stat(ws / "edit.txt").st_mtime_ns == ch["edit.txt"].mtime_ns
        assert name not in [x.name for x in nsbox.sessions()], "apply removes the session"
    finally:
        if name in [x.name for x in nsbox.sessions()]:
            s.discard()


def test_denied_change_is_refused(bashroot, tmp_path):
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    name = "pytest-" + uuid.uuid4().hex[:12]
    r = nsbox.run("echo evil >.git/config", rootfs=bashroot, workspace=ws, session=name)
    assert r.ok
    s = nsbox.Session(name)
    try:
        assert [c.path for c in s.changes() if c.denied] == [".git/config"]
        with pytest.raises(nsbox.SandboxError):
            s.apply()
        assert (ws / ".git" / "config").read_text() == "[core]\n"
        assert s.apply(skip_denied=True, keep=True) == [(".git/config", "is modified, and workspace.deny_changes denies it")]
        assert (ws / ".git" / "config").read_text() == "[core]\n"
    finally:
        s.discard()
