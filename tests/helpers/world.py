#!/usr/bin/env python3
"""An "outside" host for the --network user tests, run in a network namespace
of the test's own: an HTTP server (/hello) on ADDR:8080 and a DNS server on
ADDR:53 (UDP) that answers A queries for world.test with ADDR and everything
else with NXDOMAIN, counting the queries it saw. Prints "ready" once both
listen; serves until killed.  Usage: world.py ADDR"""
import http.server, socket, struct, sys, threading

ADDR = sys.argv[1]
NAME = "world.test"

class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        body = b"hello-from-world\n" if self.path == "/hello" else b"not found\n"
        self.send_response(200 if self.path == "/hello" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

def qname(msg, off):
    labels = []
    while msg[off]:
        n = msg[off]
        labels.append(msg[off + 1:off + 1 + n].decode("ascii", "replace"))
        off += 1 + n
    return ".".join(labels).lower(), off + 1

def dns(sock):
    while True:
        msg, peer = sock.recvfrom(512)
        if len(msg) < 12:
            continue
        ident, _, qd = struct.unpack("!HHH", msg[:6])
        if qd != 1:
            continue
        name, end = qname(msg, 12)
        qtype, _ = struct.unpack("!HH", msg[end:end + 4])
        question = msg[12:end + 4]
        known = name == NAME
        answers = b""
        if known and qtype == 1:
            answers = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(ADDR)
        flags = 0x8180 if known else 0x8183       # response, RD+RA; rcode 0 or NXDOMAIN
        head = struct.pack("!HHHHHH", ident, flags, 1, 1 if answers else 0, 0, 0)
        sock.sendto(head + question + answers, peer)

udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind((ADDR, 53))
threading.Thread(target=dns, args=(udp,), daemon=True).start()
httpd = http.server.ThreadingHTTPServer((ADDR, 8080), Handler)
print("ready", flush=True)
httpd.serve_forever()
