"""Sessions end to end: a workspace run, review, apply, discard."""
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
    assert "\033" not in d and "\\x1b[2J" in d, "terminal controls in content are shown escaped"

    s.apply(paths=["keep.txt", "added.txt"])
    assert (ws / "keep.txt").read_text() == "one\ntwo\nthree\n"
    assert (ws / "added.txt").read_text() == "new\n"
    assert (ws / "gone.txt").exists(), "only the paths given are applied"
    s.discard()
    assert name not in [x.name for x in nsbox.sessions()]
    with pytest.raises(nsbox.SandboxError):
        s.changes()


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
    finally:
        s.discard()
