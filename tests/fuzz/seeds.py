#!/usr/bin/env python3
"""Write the seed corpora of the fuzz harnesses (tests/fuzz/corpus/NAME/seed-*).

Run from the source tree: python3 tests/fuzz/seeds.py [DOCKER_JSON]
Deterministic (fixed times and owners), so that regenerating changes nothing.
Inputs that crashed a harness are kept beside the seeds as crash-* files; this
script never touches them.
"""
import gzip
import io
import json
import os
import ssl
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")


def put(harness, name, data):
    d = os.path.join(CORPUS, harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# ---- values -----------------------------------------------------------------
for i, v in enumerate(["512m", "1g", "1.5g", "100k", "4096", "30", "30s", "2m", "1h", "250ms",
                       "1.5s", "0.5", "true", "off", "1024", "512mb", "1KiB", "0", ".5t",
                       "18446744073709551615", "16383.999999999t", "0.0004", "yes"]):
    put("units", "%02d" % i, v)

# ---- policies ----------------------------------------------------------------
for name in ("standard", "deps"):
    with open(os.path.join(TOP, "policies", name + ".yaml"), "rb") as f:
        put("policy", name, f.read())
put("policy", "all-keys", """image: default
hostname: box-1.example
workdir: /home/sandbox
limits: { memory: 256m, cpus: 0.5, pids: 32, timeout: 1.5s, tmpfs: 64m, output: 4k,
          nofile: 256, fsize: 10m, fallback: rlimit, cgroup_parent: /sys/fs/cgroup/x }
network: { mode: user, allow: ["*.example.com:8443", "[::1]:80", "10.0.0.1"],
           allow_host_loopback: true, helper: pasta }
filesystem:
  read_only_root: false
  sysfs: true
  mounts:
    - /srv/data:/data:ro
    - { source: rel/dir, target: /mnt/x, read_only: true }
  forbidden: [~/.ssh, /etc]
  allowed_roots: [~/src]
workspace: { deny_changes: ["**/.git/**", "*.pem"], mode: overlay, max_size: 2g, session: s1 }
environment:
  set: { A: "1", B_2: "x y" }
  pass: [TERM, HOME]
security: { user: "1000:100", seccomp: strict, seccomp_log: true }
""")
put("policy", "anchors", "limits: &l { memory: 1g }\nnetwork: { allow: &a [a.com, b.com] }\n"
    "filesystem: { forbidden: [/x, /y] }\n")
put("policy", "empty", "")
put("policy", "require", "limits: { require_cgroup: true, timeout: none, output: unlimited }\n")

# ---- seccomp ----------------------------------------------------------------
for name in ("default", "strict"):
    with open(os.path.join(TOP, "seccomp", name + ".yaml"), "rb") as f:
        put("seccomp_yaml", name, f.read())
put("seccomp_yaml", "small", """name: small
default: { action: errno, errno: EPERM }
architectures: [x86_64, x32]
allow:
  - syscalls: [read, write, exit_group]
  - { syscalls: [personality], args: [ { index: 0, op: eq, value: 0xffffffff } ] }
deny:
  - { syscalls: [socket], action: errno, errno: 13, args: [ { index: 0, op: ge, value: 16 }, { index: 1, op: masked_eq, mask: 0xf, value: 3 } ] }
  - { syscalls: [ptrace], action: kill }
  - { syscalls: [kcmp], action: log }
""")
docker = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data/docker-default-seccomp.json"
if os.path.exists(docker):
    with open(docker, "rb") as f:
        put("seccomp_json", "docker-default", f.read())
put("seccomp_json", "small", json.dumps({
    "defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
    "archMap": [{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]}],
    "syscalls": [
        {"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
        {"names": ["personality"], "action": "SCMP_ACT_ALLOW",
         "args": [{"index": 0, "value": 8, "op": "SCMP_CMP_EQ"}]},
        {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
         "args": [{"index": 0, "value": 2114060288, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}],
         "excludes": {"caps": ["CAP_SYS_ADMIN"], "arches": ["s390x"]}},
        {"names": ["ptrace"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "4.8"}},
        {"names": ["bpf"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38, "includes": {"caps": ["CAP_SYS_ADMIN"]}},
    ]}, indent=1))
put("seccomp_json", "arches", json.dumps({"defaultAction": "SCMP_ACT_KILL_PROCESS",
                                          "architectures": ["SCMP_ARCH_X86_64"],
                                          "syscalls": [{"name": "exit", "action": "SCMP_ACT_LOG"}]}))

# ---- the command line --------------------------------------------------------
for i, argv in enumerate([
        ["--memory", "256m", "--cpus", "0.5", "--timeout", "10s", "--", "sh", "-c", "echo hi"],
        ["-m", "1g", "-v", "/srv:/srv:ro", "-e", "A=1", "-u", "1000:1000", "-w", "/tmp", "true"],
        ["--network", "user", "--allow-host", "*.example.com:443", "--allow-host-loopback", "curl"],
        ["--workspace", "/tmp/ws", "--session", "s", "--workspace-mode", "overlay",
         "--workspace-max-size", "10m", "make"],
        ["--ulimit", "nofile=64", "--ulimit", "fsize=1m", "--seccomp", "strict", "--seccomp-log",
         "--require-cgroup", "--json", "--result-file", "/tmp/r", "x"],
        ["NSBOX_MEMORY=64m", "NSBOX_TIMEOUT=1m", "NSBOX_POLICY=deps", "--stats-interval", "1s", "ls"],
        ["--json=1", "x"], ["-q"], ["--memory"], ["--help"], ["--image", "default", "--hostname", "h-1", "id"],
        ["--env-pass", "TERM", "--sysfs", "--tmpfs-size", "4k", "--max-output", "1k", "--pids-limit", "7", "-i", "x"],
]):
    put("cli", "%02d" % i, "\0".join(argv))

# ---- the proxy ---------------------------------------------------------------
heads = {
    "get": "GET http://example.com/path?q=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: x\r\n"
           "Connection: keep-alive\r\nContent-Length: 3\r\n\r\nabc\nexample.com\n*.example.com:8080\n",
    "connect": "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\nexample.com\n",
    "v6": "GET http://[::1]:8080/ HTTP/1.0\r\n\r\n[::1]:8080\n[0:0::1]\n",
    "http10": "POST http://Example.COM./a HTTP/1.0\r\nX-Forwarded-Host: evil\r\nTransfer-Encoding: chunked\r\n\r\n",
    "smuggle": "GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
    "hostmismatch": "GET http://a.com/ HTTP/1.1\r\nHost: b.com\r\n\r\n",
    "underscore": "GET http://a.com/ HTTP/1.1\r\nHost:a.com\r\nx_forwarded_host: b\r\nProxy-Authorization: x\r\n\r\n",
}
for k, v in heads.items():
    put("proxy_http", k, v)


def client_hello(name):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    s = ctx.wrap_bio(inc, out, server_hostname=name)
    try:
        s.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


try:
    put("proxy_tls", "hello", client_hello("example.com"))
    put("proxy_tls", "hello-ip", client_hello("127.0.0.1"))
except Exception as e:  # an ssl module without MemoryBIO: keep the others
    print("seeds: no ClientHello: %s" % e, file=sys.stderr)
put("proxy_tls", "http", "GET / HTTP/1.1\r\n\r\n")
put("proxy_tls", "blank", "\r\n\r\nPOST /")

import ipaddress  # noqa: E402
for i, (a, allow) in enumerate([("93.184.216.34", ""), ("127.0.0.1", "127.0.0.1\n"),
                                ("::ffff:10.0.0.1", "[::ffff:10.0.0.1]:80\n"), ("64:ff9b::a00:1", ""),
                                ("2002:c0a8:101::1", ""), ("fe80::1", "[fe80::1]\n"), ("2001:db8::1", "")]):
    ip = ipaddress.ip_address(a)
    fam = b"\x01" if ip.version == 6 else b"\x00"
    put("proxy_addr", "%02d" % i, fam + ip.packed.ljust(16, b"\0") + allow.encode())

# ---- image archives -----------------------------------------------------------


def tar_bytes(members, fmt=tarfile.PAX_FORMAT):
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w", format=fmt) as t:
        for m in members:
            kind, name = m[0], m[1]
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            ti.uid = ti.gid = 0
            data = b""
            if kind == "f":
                data = m[2] if len(m) > 2 else b"x\n"
                ti.size = len(data)
                ti.mode = m[3] if len(m) > 3 else 0o644
            elif kind == "d":
                ti.type = tarfile.DIRTYPE
                ti.mode = 0o755
            elif kind == "l":
                ti.type = tarfile.SYMTYPE
                ti.linkname = m[2]
            elif kind == "h":
                ti.type = tarfile.LNKTYPE
                ti.linkname = m[2]
            elif kind == "c":
                ti.type = tarfile.CHRTYPE
                ti.devmajor, ti.devminor = 1, 3
            elif kind == "p":
                ti.type = tarfile.FIFOTYPE
            t.addfile(ti, io.BytesIO(data) if kind == "f" else None)
    return bio.getvalue()


base = [("d", "bin"), ("f", "bin/busybox", b"\x7fELF", 0o755), ("l", "bin/sh", "busybox"),
        ("d", "etc"), ("f", "etc/passwd", b"root:x:0:0::/root:/bin/sh\n")]
put("import", "flat", tar_bytes(base))
put("import", "flat-gz", gzip.compress(tar_bytes(base), mtime=0))
put("import", "hostile", tar_bytes(base + [
    ("f", "bin/su", b"su", 0o4755), ("c", "dev/null"), ("p", "run/fifo"), ("h", "etc/hard", "etc/passwd"),
    ("l", "evil", "/etc"), ("f", "evil/shadow", b"x"), ("f", "../escape", b"x"), ("f", "/abs", b"x"),
    ("h", "outside", "../../etc/passwd")]))
put("import", "whiteouts", tar_bytes([("d", "etc"), ("f", "etc/.wh.passwd"), ("d", "var"),
                                      ("f", "var/.wh..wh..opq"), ("f", "var/new", b"n")]))
put("import", "gnu", tar_bytes(base + [("f", "x" * 200, b"long name")], fmt=tarfile.GNU_FORMAT))
layer = tar_bytes(base)
put("import", "docker-save", tar_bytes([
    ("f", "manifest.json", json.dumps([{"Config": "c.json", "RepoTags": ["x:1"],
                                        "Layers": ["abc/layer.tar", "def/layer.tar"]}]).encode()),
    ("f", "c.json", b"{}"), ("f", "abc/layer.tar", layer),
    ("f", "def/layer.tar", tar_bytes([("f", "etc/.wh.passwd"), ("f", "etc/motd", b"hi")]))]))
manifest = json.dumps({"schemaVersion": 2, "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                                       "digest": "sha256:l1"}]}).encode()
index = json.dumps({"schemaVersion": 2, "manifests": [{
    "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:m1",
    "platform": {"architecture": "amd64", "os": "linux"}}]}).encode()
put("import", "oci", tar_bytes([("f", "oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                                ("f", "index.json", index), ("d", "blobs"), ("d", "blobs/sha256"),
                                ("f", "blobs/sha256/m1", manifest),
                                ("f", "blobs/sha256/l1", gzip.compress(layer, mtime=0))]))

# ---- manifests (fuzz_manifest.c names the files it lays out) -------------------
put("manifest", "docker", b"d" + json.dumps([{"Config": "c.json", "Layers": ["layer.tar", "sub/layer.tar"]}]).encode())
put("manifest", "docker-hostile", b"d" + json.dumps([{"Layers": ["sym.tar", "fifo.tar", "dir.tar", "../x",
                                                                 "/etc/passwd"]}]).encode())
put("manifest", "oci", b"o" + index + b"\0" + json.dumps({"layers": [{"digest": "sha256:l1"},
                                                                      {"digest": "sha256:l4"}]}).encode())
nested = json.dumps({"manifests": [
    {"digest": "sha256:m1", "platform": {"architecture": "arm64", "os": "linux"}},
    {"digest": "sha256:m1", "mediaType": "application/vnd.oci.image.index.v1+json"}]}).encode()
put("manifest", "oci-nested", b"o" + nested + b"\0" + json.dumps({"manifests": [
    {"digest": "sha256:m2", "mediaType": "application/vnd.oci.image.manifest.v1+json"}]}).encode()
    + b"\0" + json.dumps({"layers": [{"digest": "sha256:l1"}, {"digest": "sha256:l2"}]}).encode())
put("manifest", "oci-bad", b"o" + json.dumps({"manifests": [{"digest": "sha256:../../etc"}]}).encode())

# ---- the changes scan ------------------------------------------------------------
put("changes", "basic", "deny **/.git/**\ndeny **/.env\nbf a.txt\tsame\nuf a.txt\tchanged\nbf b.txt\tx\n"
    "ud new\nuf new/file\thello\nlf gone\tx\nuw gone\nbd .git\nlf .git/config\tx\nus .git/config\t/etc\n")
put("changes", "opaque", "bd dir\nlf dir/old\tx\nld dir/sub\nlf dir/sub/f\ty\nuo dir\nuf dir/kept\tz\n"
    "lf x\t1\nud x\nlf y/z\t1\nus y\t/etc\nup fifo\nuf m\tx\nlf m\tx\num m\t4755\n")
put("changes", "deep", "deny **/d/d/**\nun deep\t140\nln low\t5\nuw low\n")
put("changes", "names", "uf caf\xc3\xa9\tx\nuf tab\x1bname\tx\nuf \xe2\x80\xaeevil\tx\nuf back\\slash\tx\n"
    "uf q\"uote\tx\nuh link\tq\"uote\n")
