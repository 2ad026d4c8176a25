# The loopback servers spec/egress_spec.lua and bench/egress_bench.lua reach
# through the egress proxy: HTTP and HTTPS (a self-signed certificate) on
# 127.0.0.1 and ::1, each on a port of the kernel's choosing, printed on one
# line as "http4 http6 https4 https6". They serve ROOT (files, and a bare git
# repository for git's dumb HTTP), answer /echo with the request they got
# (line, headers, body length: what the proxy forwarded), and log each
# request as "METHOD PATH HOST" to LOG. They listen on loopback only, and
# exit when killed, when the process that started them ends (core.spawn's
# PDEATHSIG) or after an hour.
#
#   python3 egress_server.py ROOT CERT KEY LOG
import http.server
import socket
import ssl
import sys
import threading

ROOT, CERT, KEY, LOG = sys.argv[1:5]
LOCK = threading.Lock()


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=ROOT, **kwargs)

    def log_message(self, fmt, *args):
        with LOCK, open(LOG, "a") as f:
            f.write("%s %s %s\n" % (self.command, self.path, self.headers.get("Host")))

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def echo(self):
        data = self.body() if self.command == "POST" else b""
        out = ("%s\n%sbody-bytes: %d\n" % (self.requestline, str(self.headers), len(data))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_GET(self):
        if self.path.startswith("/echo"):
            return self.echo()
        return super().do_GET()

    def do_POST(self):
        return self.echo()


class Server4(http.server.ThreadingHTTPServer):
    daemon_threads = True


class Server6(Server4):
    address_family = socket.AF_INET6


def start(cls, host, tls):
    srv = cls((host, 0), Handler)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(CERT, KEY)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_address[1]


ports = [start(Server4, "127.0.0.1", False), start(Server6, "::1", False),
         start(Server4, "127.0.0.1", True), start(Server6, "::1", True)]
print(" ".join(str(p) for p in ports), flush=True)
threading.Event().wait(3600)
