#!/usr/bin/env python3
"""dt_dma_ranges.py -- which memory can the PCIe host bridges reach by DMA? (device tree)

On a device-tree machine (most arm64 boards) the PCIe host bridge node says which
CPU physical addresses its devices can reach by DMA in its ``dma-ranges`` property
(Devicetree Specification v0.4, 2.3.9 "dma-ranges"; PCI bus binding: each entry is
<PCI address (3 cells)> <parent/CPU address (#address-cells of the parent)>
<size (#size-cells of the node)>, big-endian 32-bit cells). RAM outside every
window cannot be a DMA target for those devices: the kernel's DMA API then bounces
I/O through swiotlb (a copy per I/O). An empty ``dma-ranges`` means 1:1 over the
whole parent address space; no ``dma-ranges`` at all means no DMA translation is
described (the device sees CPU addresses as they are).

This script reads the tree the kernel exported (``/proc/device-tree``, a directory
of nodes whose files are the raw property values), lists every node that has a
``dma-ranges`` property (PCI host bridges and other buses), decodes the windows,
reads the ``reg`` of the ``memory`` nodes, and prints how much RAM lies outside
the PCI windows.

Usage: dt_dma_ranges.py [--root DIR] [--fail-if-outside]    (default /proc/device-tree)
Output: one JSON line on stdout ({"tool": "dt_dma_ranges", ...}), a readable
summary on stderr. Exit status: 0 ok, 1 no device tree at DIR, 2 bad usage,
3 with --fail-if-outside: some RAM lies outside the PCI DMA windows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def cells(data: bytes) -> list[int]:
    """Big-endian 32-bit cells of a property value (trailing partial cell ignored)."""
    return [int.from_bytes(data[i:i + 4], "big") for i in range(0, len(data) - len(data) % 4, 4)]


def num(cs: list[int]) -> int:
    """Join cells (most significant first) into one number."""
    v = 0
    for c in cs:
        v = (v << 32) | c
    return v


def read_prop(node: str, name: str) -> bytes | None:
    try:
        with open(os.path.join(node, name), "rb") as f:
            return f.read()
    except OSError:
        return None


def ncells(node: str, name: str, default: int) -> int:
    data = read_prop(node, name)
    return cells(data)[0] if data and len(data) >= 4 else default


def text(data: bytes | None) -> str:
    if not data:
        return ""
    return ", ".join(p.decode(errors="replace") for p in data.rstrip(b"\0").split(b"\0"))


PCI_SPACE = {0: "config", 1: "io", 2: "mem32", 3: "mem64"}


def decode_dma_ranges(node: str) -> dict:
    """The ``dma-ranges`` windows of one node: list of {child_addr, cpu_addr, size[, space, prefetchable]}."""
    parent = os.path.dirname(node)
    data = read_prop(node, "dma-ranges") or b""
    is_pci = text(read_prop(node, "device_type")) == "pci"
    child_ac = 3 if is_pci else ncells(node, "#address-cells", 2)
    parent_ac = ncells(parent, "#address-cells", 2)
    size_c = ncells(node, "#size-cells", 1)
    cs = cells(data)
    step = child_ac + parent_ac + size_c
    windows = []
    for i in range(0, len(cs) - len(cs) % step if step else 0, step):
        child = cs[i:i + child_ac]
        w = {
            "child_addr": num(child[1:] if is_pci else child),
            "cpu_addr": num(cs[i + child_ac:i + child_ac + parent_ac]),
            "size": num(cs[i + child_ac + parent_ac:i + step]),
        }
        if is_pci:
            w["space"] = PCI_SPACE[(child[0] >> 24) & 3]
            w["prefetchable"] = bool(child[0] & 0x40000000)
        windows.append(w)
    return {"path": "/" + os.path.relpath(node, ROOT).replace(os.sep, "/").lstrip("."),
            "device_type": text(read_prop(node, "device_type")) or None,
            "compatible": text(read_prop(node, "compatible")) or None,
            "status": text(read_prop(node, "status")) or "okay",
            "empty": len(data) == 0, "windows": windows}


def memory_ranges(root: str) -> list[dict]:
    """RAM from the ``memory`` nodes' ``reg`` (root #address-cells/#size-cells)."""
    ac, sc = ncells(root, "#address-cells", 2), ncells(root, "#size-cells", 1)
    out = []
    for name in sorted(os.listdir(root)):
        node = os.path.join(root, name)
        if not os.path.isdir(node) or not (name == "memory" or name.startswith("memory@")):
            continue
        if text(read_prop(node, "device_type")) not in ("memory", ""):
            continue
        cs = cells(read_prop(node, "reg") or b"")
        for i in range(0, len(cs) - len(cs) % (ac + sc), ac + sc):
            out.append({"base": num(cs[i:i + ac]), "size": num(cs[i + ac:i + ac + sc])})
    return out


def outside(mem: list[dict], windows: list[tuple[int, int]]) -> int:
    """Bytes of ``mem`` not covered by any (start, size) window."""
    total = 0
    for m in mem:
        pieces = [(m["base"], m["base"] + m["size"])]
        for ws, wsz in windows:
            we = ws + wsz
            nxt = []
            for a, b in pieces:
                if we <= a or ws >= b:
                    nxt.append((a, b))
                    continue
                if a < ws:
                    nxt.append((a, ws))
                if we < b:
                    nxt.append((we, b))
            pieces = nxt
        total += sum(b - a for a, b in pieces)
    return total


ROOT = "/proc/device-tree"


def main(argv: list[str]) -> int:
    global ROOT
    ap = argparse.ArgumentParser(prog="dt_dma_ranges.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default="/proc/device-tree", help="exported device tree (default /proc/device-tree)")
    ap.add_argument("--fail-if-outside", action="store_true",
                    help="exit 3 when some RAM lies outside the PCI DMA windows (a check that a window covers RAM)")
    a = ap.parse_args(argv)
    ROOT = os.path.realpath(a.root)
    if not os.path.isdir(ROOT):
        print(f"dt_dma_ranges.py: no device tree at {a.root} (ACPI machines, e.g. most x86_64, have none)",
              file=sys.stderr)
        return 1
    nodes = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames.sort()
        if "dma-ranges" in filenames:
            nodes.append(decode_dma_ranges(dirpath))
    mem = memory_ranges(ROOT)
    pci_windows = [(w["cpu_addr"], w["size"]) for n in nodes if n["device_type"] == "pci" and n["status"] == "okay"
                   for w in n["windows"]]
    pci_nodes = [n for n in nodes if n["device_type"] == "pci" and n["status"] == "okay"]
    unrestricted = any(n["empty"] for n in pci_nodes)
    result = {
        "tool": "dt_dma_ranges", "root": a.root, "nodes": nodes, "memory": mem,
        "ram_bytes": sum(m["size"] for m in mem),
        "pci_nodes_with_dma_ranges": len(pci_nodes),
        "ram_outside_pci_windows": (0 if unrestricted else outside(mem, pci_windows)) if pci_nodes else None,
    }
    print(json.dumps(result))
    for n in nodes:
        print(f"{n['path']} ({n['device_type'] or 'bus'}, {n['compatible'] or '?'}, {n['status']}): "
              + ("empty dma-ranges (1:1, whole address space)" if n["empty"] else
                 "; ".join(f"bus 0x{w['child_addr']:x} -> cpu 0x{w['cpu_addr']:x}, size 0x{w['size']:x}" for w in n["windows"])),
              file=sys.stderr)
    for m in mem:
        print(f"RAM 0x{m['base']:x}..0x{m['base'] + m['size'] - 1:x} ({m['size'] / 2**30:.2f} GiB)", file=sys.stderr)
    if result["ram_outside_pci_windows"] is None:
        print("no PCI host bridge node with dma-ranges", file=sys.stderr)
    else:
        print(f"RAM outside the PCI DMA windows: {result['ram_outside_pci_windows'] / 2**30:.2f} GiB "
              "(buffers there are bounced through swiotlb)", file=sys.stderr)
    if a.fail_if_outside and result["ram_outside_pci_windows"]:
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
