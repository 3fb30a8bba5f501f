"""The nvme_swiotlb chapter's shell on the faulty board: ``labkit guest shell --dt`` takes the three
trees the lab compares (plain, the 1 GiB dma-ranges window, and the fix: that window widened to all
RAM) and refuses anything else in one line with exit 2 (fast); the fixed tree boots, its window
covers RAM and a direct read does not bounce (guest tier)."""

from __future__ import annotations

import re
import struct

import pytest

from labkit.guest import DEVICE_TREES, wide_window
from labkit.guest import __main__ as guest_main
from test_guest import _qemu_with, needs_qemu, shell_session


@pytest.mark.parametrize("dt", ["plain", "dma-ranges", "wide", "dma-ranges-wide"])
def test_shell_takes_the_three_trees_and_refuses_others(monkeypatch, tmp_path, capsys, dt):
    """Without a terminal a valid tree gets as far as the terminal check; any other is argparse's
    one-line refusal. Both exit 2 before anything is built."""
    monkeypatch.setenv("PCB_GUEST_CACHE", str(tmp_path / "cache"))
    try:
        rc = guest_main.main(["shell", "--dt", dt], prog="labkit guest")
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    if dt in DEVICE_TREES:
        assert "needs a terminal" in err, err
    else:
        assert f"invalid choice: '{dt}'" in err, err
    assert not (tmp_path / "cache").exists()


def test_the_wide_window_is_the_labs_fix():
    """The widened window keeps the 1 GiB window's PCI and CPU addresses and covers all of a 2 GiB
    virt machine's RAM (0x40000000..0xbfffffff): the cells labs/nvme_swiotlb/dt_widen.py writes."""
    assert DEVICE_TREES == ("plain", "dma-ranges", "wide")
    assert wide_window(2048) == "0x2000000 0x00 0x40000000 0x00 0x40000000 0x00 0x80000000"
    assert wide_window(8192).split()[-2:] == ["0x02", "0x00"]


@needs_qemu
@pytest.mark.guest
@pytest.mark.timeout(900)
def test_shell_boots_the_fixed_tree(tmp_path):
    """`labkit guest shell --dt wide`: the window the guest's kernel exported covers all RAM (its
    size cells read with od), and a direct read of the NVMe drive bounces nothing."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with shell_session(tmp, "wide", 800) as (term, prompt_s):
        term.type("od -An -tx1 -v /proc/device-tree/pcie@10000000/dma-ranges | tr -d ' \\n'; echo ' =dr'\r")
        assert term.expect(rb"([0-9a-f]{56}) =dr", 60), term.seen[-2000:].decode(errors="replace")
        cells = bytes.fromhex(term.seen.decode(errors="replace").split(" =dr")[-2].split()[-1][-56:])
        assert struct.unpack(">7I", cells) == (0x2000000, 0, 0x40000000, 0, 0x40000000, 0, 0x80000000)
        term.type("perf stat -x, -a -e swiotlb:swiotlb_bounced -- "
                  "dd if=/dev/nvme0n1 of=/dev/null bs=1M count=32 iflag=direct 2>&1 | grep swiotlb_bounced\r")
        counted = rb"(?<![\d,])(\d+),,swiotlb:swiotlb_bounced"   # perf stat -x, : count,unit,event,...
        assert term.expect(counted, 300), term.seen[-2000:].decode(errors="replace")
        assert re.search(counted, term.seen).group(1) == b"0", term.seen[-2000:].decode(errors="replace")
        term.type("exit\r")
        assert term.proc.wait(timeout=60) == 0
    assert sorted(tmp.iterdir()) == []
    assert not _qemu_with(str(tmp))
    print(f"shell --dt wide: prompt after {prompt_s:.1f} s")
