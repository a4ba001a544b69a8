#!/usr/bin/env python3
"""Round-trip time of 64-byte messages over TCP between two processes (a ping-pong).

The figure to record next to every cluster figure (issue 18): it shows how slow this
machine's wake-ups and network path are on the day, so figures from different days can be
compared. `ping` needs ICMP and may be missing; this needs only Python.

  rtt.py serve ADDRESS PORT      # echoes one connection's messages, then exits
  rtt.py ping ADDRESS PORT [N]   # N round trips (default 2000), prints one line:
                                 # rtt_us n=N min=.. p50=.. p99=.. max=..

The server exits after its one client leaves, or after 30 s with no client or no message,
so a run that fails halfway leaves nothing behind.
"""

import socket
import sys
import time

kMessageBytes = 64  # the size issue 18's figures use
kDefaultCount = 2000
kIdleTimeoutS = 30.0
kConnectTimeoutS = 5.0


def recv_exactly(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def serve(address, port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((address, port))
        listener.listen(1)
        listener.settimeout(kIdleTimeoutS)
        print("LISTEN %s:%d" % listener.getsockname(), flush=True)
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            return 1
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.settimeout(kIdleTimeoutS)
            while True:
                msg = recv_exactly(conn, kMessageBytes)
                if msg is None:
                    return 0
                conn.sendall(msg)


def ping(address, port, count):
    deadline = time.monotonic() + kConnectTimeoutS
    while True:
        try:
            sock = socket.create_connection((address, port), timeout=kConnectTimeoutS)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # the server may not listen yet
    with sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        msg = b"x" * kMessageBytes
        samples = []
        for _ in range(count):
            start = time.perf_counter_ns()
            sock.sendall(msg)
            if recv_exactly(sock, kMessageBytes) is None:
                print("rtt.py: the server closed the connection", file=sys.stderr)
                return 1
            samples.append((time.perf_counter_ns() - start) / 1000.0)
    samples.sort()

    def pct(p):
        return samples[min(len(samples) - 1, int(p / 100.0 * len(samples)))]

    print("rtt_us n=%d min=%.0f p50=%.0f p99=%.0f max=%.0f"
          % (len(samples), samples[0], pct(50), pct(99), samples[-1]))
    return 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "serve":
        return serve(argv[2], int(argv[3]))
    if len(argv) in (4, 5) and argv[1] == "ping":
        count = int(argv[4]) if len(argv) == 5 else kDefaultCount
        if count < 1:
            print("rtt.py: N must be at least 1", file=sys.stderr)
            return 2
        return ping(argv[2], int(argv[3]), count)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
