#!/usr/bin/env python3
"""latency_proxy.py - a loopback TCP proxy that adds latency and injects faults.

This kernel has no netem, so tests and benchmarks put this proxy between
PostgreSQL and a local object-store server (Azurite, moto, RGW) to get
realistic round trips and failures:

    latency_proxy.py --listen 127.0.0.1:11000 --target 127.0.0.1:10000 \\
        --delay-ms 20 [--control 127.0.0.1:11001] [--port-file FILE]

Every chunk of bytes is delivered DELAY ms after it arrived, in each direction
(so a request/response exchange costs 2 x DELAY more), preserving order.

The client-to-server stream is read as HTTP/1.1 requests (Content-Length
bodies; a chunked request switches that connection to plain relaying), which
lets the proxy count requests and inject faults per request.  --raw relays
bytes only (no counting, no faults).

Control: with --control, a line protocol on that loopback port, one command
per connection or several, each answered by one line starting "ok" or "error":

    delay MS          set the delay (each direction) in milliseconds
    fail K [STATUS] [METHOD] [PATH-PART]
                      answer the next K requests (only those of METHOD:
                      GET, PUT, HEAD, DELETE..., and whose request target
                      contains PATH-PART, if given) with HTTP STATUS
                      (default 500) without forwarding them to the server
    hang K [METHOD] [PATH-PART]
                      forward the next K such requests to the server but never
                      relay their responses (the client times out although
                      the request was carried out); the connection is closed
                      when the client closes it
    drop K            close the client connection on the next K requests
                      without forwarding them (a connection reset)
    vanish K [METHOD] [PATH-PART]
                      forward the next K such requests, and once the server
                      answers, close the client connection without relaying
                      a byte of it: the request was carried out, and a client
                      that reused the connection may resend it on its own
                      (libcurl does, once)
    reset             clear pending faults
    peaks             "ok METHOD=N ...": for each method, the most requests
                      of it that were in flight at once (forwarded, their
                      answer not yet begun) since the last "peaks"; then
                      starts counting again from those in flight now
    status            "ok requests=N failed=N hung=N dropped=N vanished=N
                      delay=MS pending_fail=K pending_hang=K pending_drop=K
                      pending_vanish=K"

TLS: with --tls-cert CERT --tls-key KEY the proxy terminates TLS on the
listening side (PEM files; the target is still plain HTTP), so tests can
check certificate verification (a self-signed or mismatched certificate must
be refused by the client) against the real servers behind it.  Delays and
faults apply to the decrypted stream as usual.

With --listen or --control port 0 the kernel picks a port; --port-file then
receives "LISTEN_PORT CONTROL_PORT" once both are listening.  Only loopback
addresses are accepted, for listening and as the target.  SIGTERM or SIGINT
stops the proxy.  Python 3 standard library only.
"""

import argparse
import ipaddress
import os
import queue
import select
import signal
import socket
import ssl
import sys
import threading
import time

CHUNK = 65536


class Faults:
    """Pending faults and counters, shared by every connection."""

    def __init__(self, delay_ms):
        self.lock = threading.Lock()
        self.delay = delay_ms / 1000.0
        self.fail = 0
        self.fail_status = 500
        self.fail_method = None
        self.fail_path = None
        self.hang = 0
        self.hang_method = None
        self.hang_path = None
        self.drop = 0
        self.vanish = 0
        self.vanish_method = None
        self.vanish_path = None
        self.requests = 0
        self.in_flight = {}
        self.peak = {}
        self.failed = 0
        self.hung = 0
        self.dropped = 0
        self.vanished = 0

    def next_request(self, method, target):
        """Count a request and say what to do with it."""
        with self.lock:
            self.requests += 1
            if self.drop > 0:
                self.drop -= 1
                self.dropped += 1
                return ("drop", None)
            if (self.fail > 0 and self.fail_method in (None, method) and
                    (self.fail_path is None or self.fail_path in target)):
                self.fail -= 1
                self.failed += 1
                return ("fail", self.fail_status)
            if (self.hang > 0 and self.hang_method in (None, method) and
                    (self.hang_path is None or self.hang_path in target)):
                self.hang -= 1
                self.hung += 1
                return ("hang", None)
            if (self.vanish > 0 and self.vanish_method in (None, method) and
                    (self.vanish_path is None or self.vanish_path in target)):
                self.vanish -= 1
                self.vanished += 1
                return ("vanish", None)
            return ("forward", None)

    def began(self, method):
        """A request of method was forwarded."""
        with self.lock:
            self.in_flight[method] = self.in_flight.get(method, 0) + 1
            self.peak[method] = max(self.peak.get(method, 0), self.in_flight[method])

    def answered(self, method):
        """The answer to a request of method began (or its connection closed)."""
        with self.lock:
            self.in_flight[method] -= 1

    def peaks(self):
        """The peaks since the last call; then count from what is in flight."""
        with self.lock:
            reply = " ".join("%s=%d" % (m, n) for m, n in sorted(self.peak.items()))
            self.peak = {m: n for m, n in self.in_flight.items() if n > 0}
            return ("ok " + reply).strip()

    def status(self):
        with self.lock:
            return ("ok requests=%d failed=%d hung=%d dropped=%d vanished=%d "
                    "delay=%d pending_fail=%d pending_hang=%d pending_drop=%d "
                    "pending_vanish=%d" %
                    (self.requests, self.failed, self.hung, self.dropped,
                     self.vanished, int(self.delay * 1000), self.fail,
                     self.hang, self.drop, self.vanish))


def loopback(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def parse_address(text, what):
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        sys.exit("latency_proxy: %s must be HOST:PORT, not %r" % (what, text))
    host = host.strip("[]")
    if not loopback(host):
        sys.exit("latency_proxy: %s must be a loopback address, not %r" % (what, host))
    return host, int(port)


def listen_socket(address):
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(address)
    s.listen(128)
    return s


class DelayedWriter(threading.Thread):
    """Sends queued chunks to a socket, each DELAY after it was queued."""

    def __init__(self, sock, faults, on_close):
        super().__init__(daemon=True)
        self.sock = sock
        self.faults = faults
        self.queue = queue.Queue()
        self.on_close = on_close
        self.discard = False

    def put(self, data):
        self.queue.put((time.monotonic() + self.faults.delay, data))

    def close_after_queue(self):
        self.queue.put((time.monotonic() + self.faults.delay, None))

    def run(self):
        try:
            while True:
                due, data = self.queue.get()
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if data is None:
                    break
                if not self.discard:
                    self.sock.sendall(data)
        except OSError:
            pass
        self.on_close()


class Connection:
    """One client connection and its connection to the target."""

    def __init__(self, client, target, faults, raw):
        self.client = client
        self.faults = faults
        self.raw = raw
        self.closed = threading.Event()
        self.lock = threading.Lock()
        self.vanish_on_answer = False
        self.awaiting = None    # the method of a forwarded request not yet answered
        self.server = socket.create_connection(target)
        for s in (self.client, self.server):
            if s.family in (socket.AF_INET, socket.AF_INET6):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.to_server = DelayedWriter(self.server, faults, self.close)
        self.to_client = DelayedWriter(self.client, faults, self.close)

    def request_forwarded(self, method):
        with self.lock:
            self.awaiting = method
        self.faults.began(method)

    def answer_begun(self):
        with self.lock:
            method, self.awaiting = self.awaiting, None
        if method is not None:
            self.faults.answered(method)

    def close(self):
        with self.lock:
            if self.closed.is_set():
                return
            self.closed.set()
        self.answer_begun()
        for s in (self.client, self.server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        # end both writer threads (the one that called close ends anyway)
        self.to_server.close_after_queue()
        self.to_client.close_after_queue()

    def start(self):
        self.to_server.start()
        self.to_client.start()
        threading.Thread(target=self.pump_server, daemon=True).start()
        threading.Thread(target=self.pump_client, daemon=True).start()

    def pump_server(self):
        """Server to client: relay (or discard, once a response is withheld)."""
        try:
            while True:
                data = self.server.recv(CHUNK)
                if not data:
                    break
                self.answer_begun()
                if self.vanish_on_answer:
                    # the server answered a request to vanish: close both
                    # sides, the client having seen none of the answer
                    self.close()
                    return
                self.to_client.put(data)
        except OSError:
            pass
        if self.to_client.discard:
            # A withheld answer: the server may close once it has answered
            # (moto does at times), but the client must go on waiting on an
            # open connection until it gives up and closes it (pump_client).
            return
        self.to_client.close_after_queue()

    def pump_client(self):
        """Client to server: frame HTTP requests and apply faults."""
        buffer = b""
        relay_only = self.raw
        try:
            while True:
                if relay_only:
                    data = self.client.recv(CHUNK)
                    if not data:
                        break
                    self.to_server.put(data)
                    continue
                # the head of the next request
                while b"\r\n\r\n" not in buffer:
                    data = self.client.recv(CHUNK)
                    if not data:
                        raise EOFError
                    buffer += data
                head_end = buffer.index(b"\r\n\r\n") + 4
                head = buffer[:head_end]
                length = 0
                chunked = False
                expect_continue = False
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    name = name.strip().lower()
                    if name == b"content-length":
                        length = int(value.strip())
                    elif name == b"transfer-encoding" and b"chunked" in value.lower():
                        chunked = True
                    elif name == b"expect" and b"100-continue" in value.lower():
                        expect_continue = True
                request_line = head.split(b"\r\n", 1)[0].decode("ascii", "replace").split(" ")
                method = request_line[0].upper()
                request_target = request_line[1] if len(request_line) > 1 else ""
                action, status = self.faults.next_request(method, request_target)
                if action == "drop":
                    break
                if chunked:
                    # cannot frame: relay the rest of the connection as is
                    self.to_server.put(buffer)
                    buffer = b""
                    relay_only = True
                    continue
                if expect_continue and action == "forward" and len(buffer) < head_end + length:
                    # The client sends the body only after the server's
                    # "100 Continue": pass the head on now, then the body.
                    self.request_forwarded(method)
                    self.to_server.put(buffer[:head_end])
                    buffer = buffer[head_end:]
                    head_end = 0
                # the body
                while len(buffer) < head_end + length:
                    data = self.client.recv(CHUNK)
                    if not data:
                        raise EOFError
                    buffer += data
                request = buffer[:head_end + length]
                buffer = buffer[head_end + length:]
                if action == "fail":
                    body = (b"<?xml version=\"1.0\" encoding=\"utf-8\"?><Error>"
                            b"<Code>InjectedFault</Code><Message>latency_proxy"
                            b"</Message></Error>")
                    self.to_client.put(
                        b"HTTP/1.1 %d Injected Fault\r\nContent-Type: application/xml\r\n"
                        b"x-ms-error-code: InjectedFault\r\n"
                        b"Content-Length: %d\r\n\r\n" % (status, len(body)) + body)
                    continue
                if action == "hang":
                    # the server carries the request out; its answer is lost
                    self.to_client.discard = True
                if action == "vanish":
                    self.vanish_on_answer = True
                if head_end > 0:
                    self.request_forwarded(method)
                self.to_server.put(request)
        except (OSError, EOFError, ValueError):
            pass
        self.to_server.close_after_queue()


def tls_bridge(raw_client, context):
    """Terminate TLS on an accepted connection.

    Returns a plain socket that carries the decrypted stream, so the rest of
    the proxy (delays, HTTP framing, faults) works unchanged.  One thread
    does the handshake and then relays both directions with select(): an
    SSL socket must not be read and written from two threads at once.
    A client that refuses the certificate ends the handshake; the bridge
    then closes, and so does the connection to the target.
    """
    inner, outer = socket.socketpair()

    def relay():
        tls = None
        try:
            raw_client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = context.wrap_socket(raw_client, server_side=True)
            while True:
                ready = [tls] if tls.pending() else []
                if not ready:
                    ready, _, _ = select.select([tls, outer], [], [])
                if tls in ready:
                    data = tls.recv(CHUNK)
                    if not data:
                        break
                    outer.sendall(data)
                if outer in ready:
                    data = outer.recv(CHUNK)
                    if not data:
                        break
                    tls.sendall(data)
        except (ssl.SSLError, OSError):
            pass
        finally:
            for s in (tls or raw_client, outer):
                try:
                    s.close()
                except OSError:
                    pass

    threading.Thread(target=relay, daemon=True).start()
    return inner


def serve_control(sock, faults):
    def handle(conn):
        with conn:
            reader = conn.makefile("rb")
            for line in reader:
                words = line.decode("ascii", "replace").split()
                reply = "error unknown command"
                try:
                    if not words:
                        continue
                    cmd = words[0].lower()
                    with faults.lock:
                        if cmd == "delay" and len(words) == 2:
                            faults.delay = max(0, int(words[1])) / 1000.0
                            reply = "ok"
                        elif cmd == "fail" and 2 <= len(words) <= 5:
                            faults.fail = int(words[1])
                            faults.fail_status = int(words[2]) if len(words) >= 3 else 500
                            faults.fail_method = words[3].upper() if len(words) >= 4 else None
                            faults.fail_path = words[4] if len(words) == 5 else None
                            reply = "ok"
                        elif cmd == "hang" and 2 <= len(words) <= 4:
                            faults.hang = int(words[1])
                            faults.hang_method = words[2].upper() if len(words) >= 3 else None
                            faults.hang_path = words[3] if len(words) == 4 else None
                            reply = "ok"
                        elif cmd == "drop" and len(words) == 2:
                            faults.drop = int(words[1])
                            reply = "ok"
                        elif cmd == "vanish" and 2 <= len(words) <= 4:
                            faults.vanish = int(words[1])
                            faults.vanish_method = words[2].upper() if len(words) >= 3 else None
                            faults.vanish_path = words[3] if len(words) == 4 else None
                            reply = "ok"
                        elif cmd == "reset":
                            faults.fail = faults.hang = faults.drop = faults.vanish = 0
                            reply = "ok"
                    if cmd == "status":
                        reply = faults.status()
                    elif cmd == "peaks":
                        reply = faults.peaks()
                except ValueError:
                    reply = "error bad number"
                conn.sendall((reply + "\n").encode())

    while True:
        conn, _ = sock.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def main():
    parser = argparse.ArgumentParser(
        description="Loopback TCP proxy adding latency and injecting HTTP faults.")
    parser.add_argument("--listen", required=True, help="HOST:PORT to accept on (loopback)")
    parser.add_argument("--target", required=True, help="HOST:PORT to forward to (loopback)")
    parser.add_argument("--delay-ms", type=int, default=0, help="delay per direction")
    parser.add_argument("--control", help="HOST:PORT of the control port (loopback)")
    parser.add_argument("--port-file", help="write 'LISTEN_PORT CONTROL_PORT' here")
    parser.add_argument("--raw", action="store_true", help="relay bytes only, no HTTP framing")
    parser.add_argument("--tls-cert", help="PEM certificate: terminate TLS on the listening side")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    args = parser.parse_args()

    tls_context = None
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            sys.exit("latency_proxy: --tls-cert and --tls-key go together")
        tls_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls_context.load_cert_chain(args.tls_cert, args.tls_key)

    listen_address = parse_address(args.listen, "--listen")
    target = parse_address(args.target, "--target")
    faults = Faults(max(0, args.delay_ms))

    listener = listen_socket(listen_address)
    control_port = 0
    if args.control:
        control = listen_socket(parse_address(args.control, "--control"))
        control_port = control.getsockname()[1]
        threading.Thread(target=serve_control, args=(control, faults), daemon=True).start()
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d %d\n" % (listener.getsockname()[1], control_port))
        os.rename(tmp, args.port_file)

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, lambda *_: os._exit(0))

    while True:
        client, _ = listener.accept()
        if tls_context is not None:
            client = tls_bridge(client, tls_context)
        try:
            Connection(client, target, faults, args.raw).start()
        except OSError:
            client.close()


if __name__ == "__main__":
    main()
