"""labkit/run/supervisor.py: which processes belong to a run. A process carrying the run's tag
(``PCB_LAB_RUN=<tag>`` in its environment) belongs to it, and so does every live process of a
process group such a process is in, with or without the tag (a step's group holds processes
started with another environment). Real processes, started here and ended by the test."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

from labkit.run import supervisor


def _wait_for(pred, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end and not pred():
        time.sleep(0.05)


def test_an_untagged_process_of_a_tagged_group_is_a_member():
    tag = f"test-{uuid.uuid4().hex}"
    # the leader carries the tag; its child drops the environment (env -i) but stays in the group
    proc = subprocess.Popen(["sh", "-c", "env -i sleep 30 & wait"], env=dict(os.environ, PCB_LAB_RUN=tag),
                            start_new_session=True)
    try:
        # until the child runs sleep itself: before that exec it still carries the tag
        def sleeping_child() -> bool:
            for p in (p for p in os.listdir("/proc") if p.isdigit() and int(p) != proc.pid):
                try:
                    if (supervisor.journals.proc_stat(p) or [None, None, None])[2] == str(proc.pid) and \
                            Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"sleep\0"):
                        return True
                except OSError:
                    pass
            return False
        _wait_for(sleeping_child)
        groups: set[int] = set()
        members = supervisor.members(tag, groups)
        child = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != proc.pid
                 and (supervisor.journals.proc_stat(p) or [None, None, None])[2] == str(proc.pid)]
        assert supervisor.tagged(tag) == [proc.pid]
        assert groups == {proc.pid}
        assert child and set(child) <= set(members) and proc.pid in members, (members, child)
        assert os.getpid() not in members
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert supervisor.members(tag, set()) == []
