"""The record carries output losslessly: a stream that is not UTF-8 is in
the record as its bytes too (stdout_base64), and Result.stdout_raw gives
them back exactly."""
import nsbox


def test_output_that_is_not_utf8_comes_back_exactly(rootfs):
    r = nsbox.run(["printf", "ok\\377\\376\\n"], rootfs=rootfs)
    assert r.ok, str(r)
    assert r.stdout_raw == b"ok\xff\xfe\n"
    assert r.record["stdout_invalid_utf8"] and "\ufffd" in r.stdout
    assert r.stderr_raw == b"" and r.record["stderr_base64"] is None


def test_utf8_output_has_no_base64(rootfs):
    r = nsbox.run(["echo", "plain é"], rootfs=rootfs)
    assert r.stdout_raw == "plain é\n".encode() and r.record["stdout_base64"] is None
