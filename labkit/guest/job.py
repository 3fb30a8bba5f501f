"""The job script a lab's ``--guest ARCH`` run gives its guest (labkit.run.supervisor).

The guest boots with a copy of the checkout in ``/job/repo`` and runs ``/job/run`` as root
with ``sh`` (labkit.guest's init). The script brings up what no init system brings up there
(loopback, /run, /dev/shm, /dev/pts, the modules labs use), formats the guest's own scratch
disk (``$PCB_SCRATCH_DEV``: a block device with a scheduler under the lab's files, as on a
host) and runs the lab through ``.github/ci-labs.sh``, so that the run is recorded with
asciinema as on a CI runner; the result lands in ``/out/results/<host>/``.
"""

from __future__ import annotations

import shlex

MODULES = ("loop", "kyber-iosched", "xfs", "veth")
"""Modules a lab may need in the guest (loaded where the guest kernel has them)."""


def job_script(lab: str, host: str, commit: str, dirty: bool, quick: bool, only: str = "") -> str:
    """The text of ``/job/run`` for a run of ``lab`` labelled ``host``.

    ``commit``/``dirty``: the checkout's commit and whether the measuring code differs from it
    (labkit.record.git_commit), passed as ``PCB_GIT_COMMIT``/``PCB_GIT_DIRTY`` because the copy
    has no git directory. ``only``: the ``--only`` groups, comma-separated ("" for all)."""
    q = shlex.quote
    inner = ["--labs", lab, "--host", host, "--out", "/out/results"]
    if not quick:
        inner.append("--full")
    if only:
        inner += ["--only", only]
    return f"""# /job/run: a --guest run of {lab}, run in the guest as root (labkit.guest).
export PCB_GIT_COMMIT={q(commit)} PCB_GIT_DIRTY={1 if dirty else 0}
busybox hostname {q(host)}
ip link set lo up
for m in {' '.join(MODULES)}; do modprobe $m 2>/dev/null; done
busybox mount -t tmpfs tmpfs /run
mkdir -p /dev/shm /dev/pts && busybox mount -t tmpfs tmpfs /dev/shm && busybox mount -t devpts devpts /dev/pts
mkdir -p /out/results /scratch && cd /job/repo
mkfs.ext4 -q -F "$PCB_SCRATCH_DEV" && busybox mount -t ext4 "$PCB_SCRATCH_DEV" /scratch && export TMPDIR=/scratch
bash .github/ci-labs.sh {' '.join(q(w) for w in inner)}
"""
