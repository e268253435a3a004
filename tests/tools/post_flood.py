#!/usr/bin/env python3
# post_flood: 200 unauthenticated 1 MiB POSTs to mtcd on 127.0.0.1:PORT from
# 127.0.0.3, 20 at a time; for the security test and the api_dos bench. Each
# sends its headers, then its body while reading what mtcd answers; prints one
# line: "answered 401: N, refused: N, other: N" (refused: the connection was
# closed or reset with no answer).
# Usage: post_flood.py PORT
import socket, sys, threading
port = int(sys.argv[1])
counts = {"401": 0, "refused": 0, "other": 0}
lock = threading.Lock()
def post():
    kind = "refused"
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=("127.0.0.3", 0))
        s.sendall(b"POST /v1beta1/projects/p/locations/l/modelDevelopmentClusters HTTP/1.1\r\n"
                  b"Host: x\r\nContent-Length: 1048576\r\n\r\n")
        try:
            s.sendall(b"a" * 1048576)  # mtcd may close before taking it all
        except OSError:
            pass
        reply = s.recv(64)
        kind = "401" if reply.startswith(b"HTTP/1.1 401") else "other" if reply else "refused"
        s.close()
    except OSError:
        pass
    with lock:
        counts[kind] += 1
for _ in range(10):
    ts = [threading.Thread(target=post) for _ in range(20)]
    [t.start() for t in ts]
    [t.join() for t in ts]
print("answered 401: %d, refused: %d, other: %d" % (counts["401"], counts["refused"], counts["other"]))
