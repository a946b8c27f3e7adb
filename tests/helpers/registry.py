#!/usr/bin/env python3
"""A package registry for the network tests: a PEP 503 simple index with one
wheel, and an npm registry with one package, both built here in memory, plus
/hello. Listens on 127.0.0.1, or the address given (port 0: any), prints the
port, serves until killed.  Usage: registry.py [ADDR]"""
import hashlib, http.server, io, json, socketserver, sys, tarfile, zipfile

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
        for p, text in {"package/package.json": json.dumps({"name": NAME, "version": VERSION}),
                        "package/index.js": "module.exports = 42;\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(p)
            info.size, info.mode = len(data), 0o644
            t.addfile(info, io.BytesIO(data))
    return b.getvalue()

WHEEL, TGZ = wheel(), npm_tarball()
WHEEL_NAME = f"{NAME}-{VERSION}-py3-none-any.whl"

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
        if p == "/hello":
            return self.send(b"hello-from-registry\n", "text/plain")
        if p in ("/simple/", "/simple"):
            return self.send(f'<a href="{NAME}/">{NAME}</a>'.encode(), "text/html")
        if p.rstrip("/") == f"/simple/{NAME}":
            sha = hashlib.sha256(WHEEL).hexdigest()
            return self.send(f'<a href="/files/{WHEEL_NAME}#sha256={sha}">{WHEEL_NAME}</a>'.encode(), "text/html")
        if p == f"/files/{WHEEL_NAME}":
            return self.send(WHEEL, "application/octet-stream")
        if p == f"/{NAME}":
            tarball = f"http://{host}/{NAME}/-/{NAME}-{VERSION}.tgz"
            doc = {"name": NAME, "dist-tags": {"latest": VERSION},
                   "versions": {VERSION: {"name": NAME, "version": VERSION,
                                          "dist": {"tarball": tarball,
                                                   "shasum": hashlib.sha1(TGZ).hexdigest()}}}}
            return self.send(json.dumps(doc).encode(), "application/json")
        if p == f"/{NAME}/-/{NAME}-{VERSION}.tgz":
            return self.send(TGZ, "application/octet-stream")
        self.send_error(404)

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

srv = Server((sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1", 0), Handler)
print(srv.server_address[1], flush=True)
srv.serve_forever()
