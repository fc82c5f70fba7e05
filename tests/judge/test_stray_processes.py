"""judge/isolation.stray_processes: a runner's processes that freezing its process group would miss."""
import os
import signal
import subprocess
import sys
import time

import pytest

from kernelsearch.judge.isolation import stray_processes

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")

# a stand-in runner: a subreaper (as judge/runner.serve_fd makes itself) with one child in its own group and
# one double-forked daemon in a session of its own; it prints both pids and waits
RUNNER = r"""
import os, sys, time
from kernelsearch.judge.isolation import become_subreaper
become_subreaper()
inside = os.fork()
if inside == 0:
    time.sleep(60); os._exit(0)
r, w = os.pipe()
mid = os.fork()
if mid == 0:
    os.setsid()
    daemon = os.fork()
    if daemon:
        os.write(w, str(daemon).encode()); os._exit(0)
    time.sleep(60); os._exit(0)
os.waitpid(mid, 0)
daemon = int(os.read(r, 32))
print(inside, daemon, flush=True)
time.sleep(60)
"""


def test_a_double_forked_daemon_is_found_and_a_child_in_the_group_is_not():
    proc = subprocess.Popen([sys.executable, "-c", RUNNER], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        inside, daemon = map(int, proc.stdout.readline().split())
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and daemon not in stray_processes(proc.pid, None):
            time.sleep(0.05)   # the daemon's reparenting to the subreaper is asynchronous
        found = stray_processes(proc.pid, None)
        assert daemon in found and inside not in found and proc.pid not in found
        # by user: every process of the uid outside the group; this test's own processes share its uid
        assert daemon in stray_processes(proc.pid, os.getuid())
        assert inside not in stray_processes(proc.pid, os.getuid())
    finally:
        for pid in (locals().get("daemon"), locals().get("inside")):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_runner_without_strays_has_none():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        assert stray_processes(proc.pid, None) == []
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_orphans_reaped_kills_only_the_orphans_of_what_started_inside_and_restores_the_flag():
    """judge/isolation.orphans_reaped (the sm_90 compile child's orphans): a daemon double-forked in a session of its
    own by a child started inside is found and killed; a child this process had before is left alone; and the
    subreaper flag is put back as it was."""
    import ctypes
    import subprocess
    import sys

    from kernelsearch.judge.isolation import orphans_reaped

    def flag() -> int:
        v = ctypes.c_int(0)
        ctypes.CDLL(None, use_errno=True).prctl(37, ctypes.byref(v))   # PR_GET_CHILD_SUBREAPER
        return v.value

    was = flag()
    older = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    daemon = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(30)\n"
              "    os._exit(0)\n")
    found: list[str] = []
    try:
        with orphans_reaped(found):
            subprocess.run([sys.executable, "-c", daemon], check=True)
            import time as _t

            _t.sleep(0.5)   # the middle process has exited: its child is an orphan, re-parented here
        assert len(found) == 1, found
        assert older.poll() is None   # the child from before is alive
        assert flag() == was
    finally:
        older.kill()
        older.wait()
