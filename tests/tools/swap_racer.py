#!/usr/bin/env python3
"""swap_racer A B STOPFILE COUNTFILE: exchange the names A and B (a directory
and a symbolic link, in one directory the caller owns) with renameat2's
RENAME_EXCHANGE as fast as it can, until STOPFILE exists (a deadline of 600 s
only ends a hang); the number of swaps goes to COUNTFILE. Run as the user who
attacks mtcd: between mtcd's check and its use of A, A becomes the link."""
import ctypes, os, sys, time

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
a, b, stop, countfile = (os.fsencode(x) for x in sys.argv[1:5])
n, end = 0, time.monotonic() + 600
while time.monotonic() < end:
    for _ in range(200):
        if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
            sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
        n += 1
    if os.path.exists(stop):
        break
if n % 2: # leave A where it started
    libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
with open(countfile, "w") as f:
    f.write("%d\n" % n)
