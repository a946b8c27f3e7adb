#!/usr/bin/env python3
"""Origins for the allowlist proxy's attack tests (tests/func/proxy.test),
in the test's own network namespace. On every address (dual-stack "::"):
  HTTP on PORT: answers every request with "vhost=<Host header>", and keeps
    the connection open whatever the request says (a sloppy origin that
    serves pipelined requests, as some CDNs do);
  raw TCP on PORT+1: a stand-in TLS origin, answers "tunnel-got-bytes" to
    whatever arrives (so a test sees whether the proxy let a ClientHello
    through).
Prints PORT once both listen; serves until killed.
Usage: fronting.py            (runs the servers)
       fronting.py hello NAME (writes a TLS ClientHello with SNI NAME to stdout)"""
import http.server, socket, socketserver, ssl, sys, threading

if len(sys.argv) == 3 and sys.argv[1] == "hello":
    ctx = ssl.create_default_context()
    obj = ctx.wrap_bio(ssl.MemoryBIO(), out := ssl.MemoryBIO(), server_hostname=sys.argv[2])
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    sys.stdout.buffer.write(out.read())
    sys.exit(0)

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def handle_one_request(self):
        super().handle_one_request()
        if self.raw_requestline:
            self.close_connection = False   # ignore "Connection: close"

    def answer(self):
        body = ("vhost=%s\n" % self.headers.get("Host", "-")).encode()
        n = int(self.headers.get("Content-Length", "0") or 0)
        if n:
            self.rfile.read(n)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    do_GET = do_POST = answer

class HTTP(socketserver.ThreadingMixIn, http.server.HTTPServer):
    address_family = socket.AF_INET6
    daemon_threads = True
    allow_reuse_address = True

class Raw(socketserver.BaseRequestHandler):
    def handle(self):
        if self.request.recv(65536):
            self.request.sendall(b"tunnel-got-bytes\n")

class RawServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    address_family = socket.AF_INET6
    daemon_threads = True
    allow_reuse_address = True

for port in range(20080, 20980, 2):
    try:
        httpd = HTTP(("::", port), Handler)
    except OSError:
        continue
    try:
        raw = RawServer(("::", port + 1), Raw)
    except OSError:
        httpd.server_close()
        continue
    break
threading.Thread(target=raw.serve_forever, daemon=True).start()
print(port, flush=True)
httpd.serve_forever()
