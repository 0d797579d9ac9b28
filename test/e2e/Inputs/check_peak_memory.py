#!/usr/bin/env python3
"""Runs a program with --report-memory (CPU backend, one process) and holds
its reported peak to the kernel's count of the same process: the resident
set high-water mark os.wait4 returns for the child. Prints `ok: ...` or
fails.

    check_peak_memory.py -- PROGRAM ARGS...
"""
import os
import re
import subprocess
import sys

command = sys.argv[sys.argv.index("--") + 1:]
child = subprocess.Popen(command + ["--report-memory"], stdout=subprocess.PIPE, text=True)
out = child.stdout.read()
_, status, usage = os.wait4(child.pid, 0)
if os.waitstatus_to_exitcode(status) != 0:
    sys.exit(f"check_peak_memory.py: the program failed:\n{out}")
found = re.search(r"peak memory \(host resident set\): rank 0 (\d+) bytes", out)
if not found:
    sys.exit(f"check_peak_memory.py: no peak memory line in:\n{out}")
reported, kernel = int(found.group(1)), usage.ru_maxrss * 1024
# The report is taken before MPI_Finalize and the exit, which may add a
# little; never less than the kernel's count minus that, never more.
if not (0.9 * kernel <= reported <= kernel):
    sys.exit(f"check_peak_memory.py: reported {reported} bytes, the kernel counted {kernel}")
print(f"ok: reported {reported} bytes, the kernel counted {kernel}")
