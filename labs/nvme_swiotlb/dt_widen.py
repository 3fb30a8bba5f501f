#!/usr/bin/env python3
"""dt_widen.py -- the original investigation's fix, applied to a device tree: widen the PCIe
host bridge's ``dma-ranges`` window so that it covers all of the machine's RAM.

The original board lost half its NVMe read throughput after an upgrade because RAM lay outside
the PCIe controller's DMA window (the ``dma-ranges`` property of its node in the device tree),
so the kernel bounced every read through swiotlb; the author "modified the dma-ranges property
of the pcie node in the device tree, enlarging its size", and the speed came back. This script
does that to a compiled tree (DTB): it decompiles it with ``dtc``, keeps every window's PCI and
CPU address, sets the size of each window on a node with ``device_type = "pci"`` so that it
reaches the end of the highest RAM range (the ``reg`` of the ``memory`` nodes), and compiles the
tree again. Nothing else in the tree changes.

Cells (Devicetree Specification v0.4, 2.3.9 "dma-ranges"; PCI bus binding): each window is
<PCI address (3 cells)> <CPU address (#address-cells of the parent node)> <size (#size-cells of
the PCI node)>; ``memory`` nodes' ``reg`` uses the root node's #address-cells and #size-cells.

Usage: dt_widen.py SRC.dtb DEST.dtb
Output: one JSON line on stdout ({"tool": "dt_widen", "node", "before": [windows], "after":
[windows], "ram": [ranges]}; addresses and sizes in bytes), a readable line per window on
stderr. Exit status: 0 written, 1 no PCI node with dma-ranges, no memory node, a window that
starts above the lowest RAM address (widening its size cannot cover RAM below it), or dtc
failed; 2 bad usage.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

_NODE = re.compile(r"^([ \t]*)(/|[\w,.+-]+(?:@[0-9a-fA-F,]+)?) \{\n", re.M)
_PROP = r"^[ \t]*{name} = <([^>]*)>;"


def _cells(text: str) -> list[int]:
    return [int(c, 16) if c.startswith("0x") else int(c) for c in text.split()]


def _num(cs: list[int]) -> int:
    v = 0
    for c in cs:
        v = (v << 32) | c
    return v


def _split(v: int, n: int) -> list[int]:
    return [(v >> (32 * (n - 1 - i))) & 0xFFFFFFFF for i in range(n)]


def _blocks(dts: str) -> list[tuple[str, str, int, int]]:
    """(indent, name, start of body, end of body) of every node of a ``dtc -O dts`` text."""
    out = []
    for m in _NODE.finditer(dts):
        end = dts.find(f"\n{m.group(1)}}};", m.end())
        out.append((m.group(1), m.group(2), m.end(), end))
    return out


def _own(dts: str, blocks, b) -> str:
    """The node's own lines: its body without its child nodes."""
    _, _, start, end = b
    body = dts[start:end]
    for c in blocks:
        if start < c[2] and c[3] <= end and c is not b:
            body = body.replace(dts[c[2]:c[3]], "")
    return body


def _prop(text: str, name: str) -> list[int] | None:
    m = re.search(_PROP.format(name=re.escape(name)), text, re.M)
    return _cells(m.group(1)) if m else None


def widen(dts: str) -> tuple[str, dict]:
    """The tree text ``dts`` with every PCI node's dma-ranges windows widened to the end of RAM,
    and what changed: {"node", "before", "after", "ram"} (windows as {"pci_addr", "cpu_addr",
    "size"}, RAM as {"base", "size"}; bytes).

    Raises:
        ValueError: no memory node, no PCI node with dma-ranges, or a window starting above the
        lowest RAM address.
    """
    blocks = _blocks(dts)
    root = next((b for b in blocks if b[1] == "/"), None)
    if root is None:
        raise ValueError("no root node in the tree")
    rtext = _own(dts, blocks, root)
    rac, rsc = (_prop(rtext, "#address-cells") or [2])[0], (_prop(rtext, "#size-cells") or [1])[0]
    ram = []
    for b in blocks:
        if b[1] == "memory" or b[1].startswith("memory@"):
            reg = _prop(_own(dts, blocks, b), "reg") or []
            for i in range(0, len(reg) - len(reg) % (rac + rsc), rac + rsc):
                ram.append({"base": _num(reg[i:i + rac]), "size": _num(reg[i + rac:i + rac + rsc])})
    if not ram:
        raise ValueError("no memory node with a reg property")
    ram_lo = min(r["base"] for r in ram)
    ram_hi = max(r["base"] + r["size"] for r in ram)
    for b in blocks:
        own = _own(dts, blocks, b)
        if 'device_type = "pci";' not in own:
            continue
        cells = _prop(own, "dma-ranges")
        if not cells:
            continue
        sc = (_prop(own, "#size-cells") or [2])[0]
        step = 3 + rac + sc
        before, after, new = [], [], []
        for i in range(0, len(cells) - len(cells) % step, step):
            w = cells[i:i + step]
            cpu, size = _num(w[3:3 + rac]), _num(w[3 + rac:])
            before.append({"pci_addr": _num(w[1:3]), "cpu_addr": cpu, "size": size})
            if cpu > ram_lo:
                raise ValueError(f"{b[1]}: a window starts at 0x{cpu:x}, above RAM at 0x{ram_lo:x}")
            size = max(size, ram_hi - cpu)
            after.append({"pci_addr": _num(w[1:3]), "cpu_addr": cpu, "size": size})
            new += w[:3 + rac] + _split(size, sc)
        text = "dma-ranges = <" + " ".join(f"0x{c:02x}" for c in new) + ">;"
        line = re.compile(_PROP.format(name="dma-ranges"), re.M)
        start, end = b[2], b[3]
        m = line.search(dts, start, end)
        indent = re.match(r"\s*", m.group(0)).group(0)
        dts = dts[:m.start()] + indent + text + dts[m.end():]
        return dts, {"node": b[1], "before": before, "after": after, "ram": ram}
    raise ValueError("no node with device_type \"pci\" has a dma-ranges property")


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0].startswith("-"):
        print("usage: dt_widen.py SRC.dtb DEST.dtb", file=sys.stderr)
        return 2
    src, dest = argv
    dec = subprocess.run(["dtc", "-q", "-I", "dtb", "-O", "dts", src], capture_output=True, text=True)
    if dec.returncode != 0:
        print(f"dt_widen.py: dtc could not read {src}: {dec.stderr.strip()}", file=sys.stderr)
        return 1
    try:
        dts, change = widen(dec.stdout)
    except ValueError as exc:
        print(f"dt_widen.py: {src}: {exc}", file=sys.stderr)
        return 1
    enc = subprocess.run(["dtc", "-q", "-I", "dts", "-O", "dtb", "-o", dest, "-"], input=dts,
                         capture_output=True, text=True)
    if enc.returncode != 0:
        print(f"dt_widen.py: dtc could not write {dest}: {enc.stderr.strip()}", file=sys.stderr)
        return 1
    print(json.dumps({"tool": "dt_widen", "src": src, "dest": dest, **change}))
    for w0, w1 in zip(change["before"], change["after"]):
        print(f"{change['node']}: bus 0x{w0['pci_addr']:x} -> cpu 0x{w0['cpu_addr']:x}, size 0x{w0['size']:x} "
              f"-> 0x{w1['size']:x}", file=sys.stderr)
    for r in change["ram"]:
        print(f"RAM 0x{r['base']:x}..0x{r['base'] + r['size'] - 1:x}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
