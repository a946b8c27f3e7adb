#!/usr/bin/env python3
"""A package registry for the network tests: a PEP 503 simple index with one
wheel, and an npm registry with one package, both built here in memory, plus
/hello. Listens on 127.0.0.1, or the address given (port 0: any), prints the
port, serves until killed.

With --tls CERT KEY [PORT] it serves HTTPS (port 443 by default) as the real
indexes are laid out, for tests that name them (pypi.org,
files.pythonhosted.org, registry.npmjs.org) in a private /etc/hosts: the
simple index links the wheel at https://files.pythonhosted.org/packages/...,
the npm document points at https://<Host>/nsboxdemo/-/... With REGISTRY_DUMP
set to a directory, the wheel and the tarball are also written there (a test
computes a lockfile's integrity from them).

Usage: registry.py [ADDR] [--tls CERT KEY [PORT]]"""
import base64, hashlib, http.server, io, json, os, socketserver, ssl, sys, tarfile, zipfile

NAME, VERSION = "nsboxdemo", "1.0.0"

def wheel():
    b = io.BytesIO()
    dist = f"{NAME}-{VERSION}.dist-info"
    files = {
        f"{NAME}/__init__.py": "ANSWER = 42\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: nsbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{p},,\n" for p in files) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(b, "w") as z:
        for p, text in files.items():
            z.writestr(p, text)
        z.writestr(f"{dist}/RECORD", record)
    return b.getvalue()

def npm_tarball():
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w:gz") as t:
        for p, text in {"package/package.json": json.dumps({"name": NAME, "version": VERSION, "main": "index.js"}),
                        "package/index.js": "module.exports = 42;\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(p)
            info.size, info.mode = len(data), 0o644
            t.addfile(info, io.BytesIO(data))
    return b.getvalue()

WHEEL, TGZ = wheel(), npm_tarball()
WHEEL_NAME = f"{NAME}-{VERSION}-py3-none-any.whl"
INTEGRITY = "sha512-" + base64.b64encode(hashlib.sha512(TGZ).digest()).decode()
args = sys.argv[1:]
addr = args.pop(0) if args and not args[0].startswith("--") else "127.0.0.1"
TLS = args[:3] if args and args[0] == "--tls" else None
dump = os.environ.get("REGISTRY_DUMP")
if dump:
    with open(os.path.join(dump, WHEEL_NAME), "wb") as f:
        f.write(WHEEL)
    with open(os.path.join(dump, f"{NAME}-{VERSION}.tgz"), "wb") as f:
        f.write(TGZ)

class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def send(self, body, ctype):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        host = self.headers.get("Host", "")
        p = self.path.split("?")[0]
        sha = hashlib.sha256(WHEEL).hexdigest()
        if p == "/hello":
            return self.send(b"hello-from-registry\n", "text/plain")
        if p in ("/simple/", "/simple"):
            return self.send(f'<a href="{NAME}/">{NAME}</a>'.encode(), "text/html")
        if p.rstrip("/") == f"/simple/{NAME}":
            url = (f"https://files.pythonhosted.org/packages/{sha[:2]}/{WHEEL_NAME}" if TLS
                   else f"/files/{WHEEL_NAME}")
            return self.send(f'<a href="{url}#sha256={sha}">{WHEEL_NAME}</a>'.encode(), "text/html")
        if p in (f"/files/{WHEEL_NAME}", f"/packages/{sha[:2]}/{WHEEL_NAME}"):
            return self.send(WHEEL, "application/octet-stream")
        if p == f"/{NAME}":
            tarball = f"{'https' if TLS else 'http'}://{host}/{NAME}/-/{NAME}-{VERSION}.tgz"
            doc = {"name": NAME, "dist-tags": {"latest": VERSION},
                   "versions": {VERSION: {"name": NAME, "version": VERSION,
                                          "dist": {"tarball": tarball, "integrity": INTEGRITY,
                                                   "shasum": hashlib.sha1(TGZ).hexdigest()}}}}
            return self.send(json.dumps(doc).encode(), "application/json")
        if p == f"/{NAME}/-/{NAME}-{VERSION}.tgz":
            return self.send(TGZ, "application/octet-stream")
        self.send_error(404)

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

srv = Server((addr, int(args[3]) if TLS and len(args) > 3 else 443 if TLS else 0), Handler)
if TLS:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(TLS[1], TLS[2])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.serve_forever()
