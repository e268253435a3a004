#!/usr/bin/env python3
# post_flood: 200 unauthenticated 1 MiB POSTs to mtcd on 127.0.0.1:PORT from
# 127.0.0.3, 20 at a time; for the security test and the api_dos bench.
# Usage: post_flood.py PORT
import socket, sys, threading
port = int(sys.argv[1])
def post():
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=("127.0.0.3", 0))
        s.sendall(b"POST /v1beta1/projects/p/locations/l/modelDevelopmentClusters HTTP/1.1\r\n"
                  b"Host: x\r\nContent-Length: 1048576\r\n\r\n" + b"a" * 1048576)
        s.close()
    except OSError:
        pass
for _ in range(10):
    ts = [threading.Thread(target=post) for _ in range(20)]
    [t.start() for t in ts]
    [t.join() for t in ts]
