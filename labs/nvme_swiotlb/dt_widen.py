#!/usr/bin/env python3
"""dt_widen.py -- the original investigation's fix, applied to a device tree: widen the PCIe
host bridge's ``dma-ranges`` window so that it covers all of the machine's RAM.

The original board lost half its NVMe read throughput after an upgrade because RAM lay outside
the PCIe controller's DMA window (the ``dma-ranges`` property of its node in the device tree),
so the kernel bounced every read through swiotlb; the author "modified the dma-ranges property
of the pcie node in the device tree, enlarging its size", and the speed came back. This script
does that to a compiled tree (DTB), with the device-tree compiler's own tools: it reads the tree
with ``fdtget`` (the root's cell counts, the ``reg`` of the ``memory`` nodes, every node's
``device_type`` and ``dma-ranges``), keeps every window's PCI and CPU address, sets the size of
each window of the first node with ``device_type = "pci"`` so that it reaches the end of the
highest RAM range, recompiles the tree with ``dtc`` (a QEMU ``dumpdtb`` is padded to 1 MiB) and
writes the new window over the old with ``fdtput``. Nothing else in the tree changes.

Cells (Devicetree Specification v0.4, 2.3.9 "dma-ranges"; PCI bus binding): each window is
<PCI address (3 cells)> <CPU address (#address-cells of the parent node)> <size (#size-cells of
the PCI node)>; ``memory`` nodes' ``reg`` uses the root node's #address-cells and #size-cells.

Usage: dt_widen.py SRC.dtb DEST.dtb
Output: one JSON line on stdout ({"tool": "dt_widen", "node", "before": [windows], "after":
[windows], "ram": [ranges]}; addresses and sizes in bytes), a readable line per window on
stderr. Exit status: 0 written, 1 no PCI node with dma-ranges, no memory node, a window that
starts above the lowest RAM address (widening its size cannot cover RAM below it), or
dtc/fdtget/fdtput failed; 2 bad usage.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from labkit.guest import GuestBuildError
from labkit.guest.images import fdtget, fdtput, property_cells, recompile_dtb


def _num(cs: list[int]) -> int:
    v = 0
    for c in cs:
        v = (v << 32) | c
    return v


def _split(v: int, n: int) -> list[int]:
    return [(v >> (32 * (n - 1 - i))) & 0xFFFFFFFF for i in range(n)]


def ram_ranges(reg: list[int], address_cells: int, size_cells: int) -> list[dict]:
    """RAM ranges [{"base", "size"}] (bytes) from the cells of a ``memory`` node's ``reg``, read
    with the root's ``#address-cells`` and ``#size-cells``; a trailing partial entry is ignored."""
    step = address_cells + size_cells
    return [{"base": _num(reg[i:i + address_cells]), "size": _num(reg[i + address_cells:i + step])}
            for i in range(0, len(reg) - len(reg) % step, step)]


def widen(cells: list[int], address_cells: int, size_cells: int, ram: list[dict]) -> tuple[list[int], dict]:
    """The ``dma-ranges`` cells of a PCI node with every window's size widened to reach the end
    of ``ram`` ([{"base", "size"}], bytes), and what changed: {"before", "after"} (windows as
    {"pci_addr", "cpu_addr", "size"}, bytes). ``address_cells``: the parent's #address-cells (the
    CPU address); ``size_cells``: the PCI node's #size-cells.

    Raises:
        ValueError: no RAM, no window, a window starting above the lowest RAM address, or a
            widened size that does not fit in ``size_cells``.
    """
    if not ram:
        raise ValueError("no memory node with a reg property")
    ram_lo = min(r["base"] for r in ram)
    ram_hi = max(r["base"] + r["size"] for r in ram)
    step = 3 + address_cells + size_cells
    before, after, new = [], [], []
    for i in range(0, len(cells) - len(cells) % step, step):
        w = cells[i:i + step]
        cpu, size = _num(w[3:3 + address_cells]), _num(w[3 + address_cells:])
        if cpu > ram_lo:
            raise ValueError(f"a window starts at 0x{cpu:x}, above RAM at 0x{ram_lo:x}")
        before.append({"pci_addr": _num(w[1:3]), "cpu_addr": cpu, "size": size})
        size = max(size, ram_hi - cpu)
        if size >> (32 * size_cells):
            raise ValueError(f"a window of 0x{size:x} bytes does not fit in {size_cells} size cell(s)")
        after.append({"pci_addr": _num(w[1:3]), "cpu_addr": cpu, "size": size})
        new += w[:3 + address_cells] + _split(size, size_cells)
    if not new:
        raise ValueError("the dma-ranges property holds no whole window")
    return new, {"before": before, "after": after}


def _cells(dtb: Path, node: str, prop: str) -> list[int] | None:
    text = property_cells(dtb, node, prop)
    return None if text is None else [int(c, 16) for c in text.split()]


def _nodes(dtb: Path, node: str = "/") -> list[str]:
    """Paths of ``node`` and every node under it, parents first (``fdtget -l``)."""
    out = [node]
    for child in (fdtget(dtb, "-l", node) or "").split():
        out += _nodes(dtb, node.rstrip("/") + "/" + child)
    return out


def widen_dtb(src: Path, dest: Path) -> dict:
    """Write to ``dest`` the tree ``src`` with the first PCI node's dma-ranges widened (:func:`widen`);
    return {"node", "before", "after", "ram"}.

    Raises:
        ValueError: see :func:`widen`; also no PCI node with dma-ranges.
        GuestBuildError: dtc, fdtget or fdtput failed or is missing.
    """
    rac = (_cells(src, "/", "#address-cells") or [2])[0]
    rsc = (_cells(src, "/", "#size-cells") or [1])[0]
    nodes = _nodes(src)
    ram = []
    for node in nodes:
        name = node.rsplit("/", 1)[-1]
        if node.count("/") == 1 and (name == "memory" or name.startswith("memory@")):
            ram += ram_ranges(_cells(src, node, "reg") or [], rac, rsc)
    for node in nodes:
        if (fdtget(src, "-t", "s", node, "device_type") or "").strip() != "pci":
            continue
        cells = _cells(src, node, "dma-ranges")
        if not cells:
            continue
        parent = node.rsplit("/", 1)[0] or "/"
        pac = (_cells(src, parent, "#address-cells") or [2])[0]
        sc = (_cells(src, node, "#size-cells") or [2])[0]
        new, change = widen(cells, pac, sc, ram)
        recompile_dtb(src, dest)
        fdtput(dest, node, "dma-ranges", new)
        return {"node": node.rsplit("/", 1)[-1], **change, "ram": ram}
    raise ValueError("no node with device_type \"pci\" has a dma-ranges property")


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0].startswith("-"):
        print("usage: dt_widen.py SRC.dtb DEST.dtb", file=sys.stderr)
        return 2
    src, dest = Path(argv[0]), Path(argv[1])
    try:
        change = widen_dtb(src, dest)
    except (ValueError, GuestBuildError) as exc:
        print(f"dt_widen.py: {src}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"tool": "dt_widen", "src": str(src), "dest": str(dest), **change}))
    for w0, w1 in zip(change["before"], change["after"]):
        print(f"{change['node']}: bus 0x{w0['pci_addr']:x} -> cpu 0x{w0['cpu_addr']:x}, size 0x{w0['size']:x} "
              f"-> 0x{w1['size']:x}", file=sys.stderr)
    for r in change["ram"]:
        print(f"RAM 0x{r['base']:x}..0x{r['base'] + r['size'] - 1:x}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
