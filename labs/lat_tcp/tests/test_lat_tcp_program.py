"""Tests for labs/lat_tcp/lat_tcp.c, our lmbench-3-style TCP latency program.

The program is compiled once per module with the guide's strict flags; every
test that needs a server starts its own on a free port and always stops it.
"""
import json
import os
import re
import socket
import statistics
import struct
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SRC = REPO / "labs" / "lat_tcp" / "lat_tcp.c"
CFLAGS = ["-O2", "-g", "-Wall", "-Wextra", "-Werror", "-std=c11", "-D_GNU_SOURCE"]
LMBENCH_LINE = re.compile(
    r"^TCP latency using (\S+): (\d+\.\d{4}) microseconds$", re.M)
QUICK = ["-t", "0.02", "-N", "5"]


@pytest.fixture(scope="module")
def lat_tcp(tmp_path_factory):
    exe = tmp_path_factory.mktemp("lat_tcp") / "lat_tcp"
    proc = subprocess.run(["gcc", *CFLAGS, "-o", str(exe), str(SRC)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", "warnings from gcc:\n" + proc.stderr
    return str(exe)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(exe, *args, timeout=15):
    return subprocess.run([exe, *args], capture_output=True, text=True,
                          timeout=timeout)


def children_of(pid):
    """(pid, state) of every process whose parent is pid, from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            out.append((int(entry), fields[0]))
    return out


@contextmanager
def server(exe, tmp_path, port):
    log = tmp_path / f"server-{port}.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([exe, "-s", "-p", str(port)],
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 5
        while "listening" not in log.read_text():
            assert proc.poll() is None, "server died: " + log.read_text()
            assert time.monotonic() < deadline, "server never listened"
            time.sleep(0.01)
        assert log.read_text().startswith(
            f"lat_tcp: server listening on 127.0.0.1:{port}\n")
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for child, _ in children_of(proc.pid):
            try:
                os.kill(child, 9)
            except ProcessLookupError:
                pass


def check_result(proc, port, msize, nodelay, n=5):
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    data = json.loads(lines[0])
    assert data["tool"] == "lat_tcp"
    assert data["host"] == "127.0.0.1"
    assert data["port"] == port
    assert data["msize"] == msize
    assert data["nodelay"] is nodelay
    assert data["unchecked"] is False and data["connected"] is True
    assert data["failed_calls"] == 0
    assert data["unit"] == "us"
    assert data["target_s"] == pytest.approx(0.02)
    assert isinstance(data["iterations"], int) and data["iterations"] >= 1
    samples = data["samples"]
    assert len(samples) == n
    assert all(s > 0 for s in samples)
    assert data["min"] <= data["median"] <= data["max"]
    assert data["median"] > 0
    assert data["min"] == min(samples) and data["max"] == max(samples)
    assert data["median"] == statistics.median(samples)   # n is odd
    m = LMBENCH_LINE.search(proc.stderr)
    assert m, proc.stderr
    assert m.group(1) == "127.0.0.1"
    assert m.group(2) == f"{data['median']:.4f}"
    return data


# ---------------------------------------------------------------- usage ---

def test_help_exits_zero(lat_tcp):
    proc = run(lat_tcp, "--help")
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: lat_tcp")
    assert run(lat_tcp, "-h").returncode == 0


def test_bogus_option_is_usage_error(lat_tcp):
    proc = run(lat_tcp, "-x", "127.0.0.1")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "usage:" in proc.stderr
    assert proc.stderr.startswith("lat_tcp: unknown option -x\n")


H = "127.0.0.1"


@pytest.mark.parametrize("args", [
    ["-m", "0", H], ["-m", "16777217", H], ["-m", "17m", H], ["-m", "-5", H],
    ["-m", "12q", H], ["-m", "", H], ["-N", "0", H], ["-N", "1001", H],
    ["-p", "0", H], ["-p", "65536", H], ["-t", "0", H], ["-t", "61", H],
    ["-t", "nan", H], ["-m"], [], [H, "extra"], ["-s", H], ["-b", H, H],
    ["-s", "-b", "not-an-ip"], ["-s", "-S"], ["-S"], ["-s", "-L"], ["-S", "-L", H],
], ids=repr)
def test_bad_values_are_usage_errors(lat_tcp, args):
    proc = run(lat_tcp, *args, timeout=5)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "usage:" in proc.stderr
    assert "microseconds" not in proc.stderr


# ----------------------------------------------------- failing connects ---

def test_no_server_is_an_error_and_prints_no_number(lat_tcp):
    port = free_port()
    proc = run(lat_tcp, *QUICK, "-p", str(port), "127.0.0.1")
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert "microseconds" not in proc.stderr
    assert proc.stderr.strip() == (
        f"lat_tcp: connect to 127.0.0.1:{port}: Connection refused")


def test_unchecked_client_without_server_prints_a_number(lat_tcp):
    """-L is lmbench 3.0-a9's client: the refused connect is not checked, every timed write
    and read is on descriptor -1 and fails, and a (tiny) latency is printed anyway."""
    port = free_port()
    proc = run(lat_tcp, *QUICK, "-L", "-p", str(port), "127.0.0.1")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["unchecked"] is True and data["connected"] is False
    assert data["failed_calls"] == 2 * data["iterations"] * len(data["samples"])
    assert len(data["samples"]) == 5 and data["median"] > 0
    m = LMBENCH_LINE.search(proc.stderr)
    assert m and m.group(2) == f"{data['median']:.4f}"


def test_unchecked_client_with_a_server_measures_the_same_thing(lat_tcp, tmp_path):
    port = free_port()
    with server(lat_tcp, tmp_path, port):
        proc = run(lat_tcp, *QUICK, "-L", "-p", str(port), "127.0.0.1")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["unchecked"] is True and data["connected"] is True
    assert data["failed_calls"] == 0 and data["median"] > 0


def test_stop_without_server_fails(lat_tcp):
    proc = run(lat_tcp, "-S", "-p", str(free_port()), "127.0.0.1")
    assert proc.returncode == 1
    assert "connect to 127.0.0.1" in proc.stderr


def test_server_on_busy_port_fails(lat_tcp, tmp_path):
    port = free_port()
    with server(lat_tcp, tmp_path, port):
        proc = run(lat_tcp, "-s", "-p", str(port), timeout=5)
    assert proc.returncode == 1
    assert "listening" not in proc.stderr
    assert "Address already in use" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


# ---------------------------------------------------------- measurement ---

def test_measure_one_byte(lat_tcp, tmp_path):
    port = free_port()
    with server(lat_tcp, tmp_path, port):
        proc = run(lat_tcp, *QUICK, "-m", "1", "-p", str(port), "127.0.0.1")
    check_result(proc, port, 1, False)


@pytest.mark.parametrize("size", ["65536", "64k"])
def test_measure_64k(lat_tcp, tmp_path, size):
    port = free_port()
    with server(lat_tcp, tmp_path, port):
        proc = run(lat_tcp, *QUICK, "-m", size, "-p", str(port), "127.0.0.1")
    check_result(proc, port, 65536, False)


def test_nodelay(lat_tcp, tmp_path):
    port = free_port()
    with server(lat_tcp, tmp_path, port):
        proc = run(lat_tcp, *QUICK, "-n", "-m", "100", "-p", str(port),
                   "127.0.0.1")
    check_result(proc, port, 100, True)


def test_client_waits_for_the_whole_reply(lat_tcp):
    """A Python echo server that answers in two pieces, 2 ms apart.  A
    client that took a short read for a full reply would send its next
    message before the second piece: the server checks for that."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stats = {"round_trips": 0, "early": 0, "header": None}

    def serve():
        conn, _ = listener.accept()
        with conn:
            stats["header"] = struct.unpack(">I", conn.recv(4, socket.MSG_WAITALL))[0]
            msize = stats["header"] & 0x7FFFFFFF
            while True:
                msg = conn.recv(msize, socket.MSG_WAITALL)
                if len(msg) < msize:
                    return
                conn.sendall(msg[: msize // 2])
                time.sleep(0.002)
                try:
                    if conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                        stats["early"] += 1
                except BlockingIOError:
                    pass
                conn.sendall(msg[msize // 2:])
                stats["round_trips"] += 1

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        proc = run(lat_tcp, "-t", "0.02", "-N", "3", "-m", "100", "-p",
                   str(port), "127.0.0.1")
        t.join(5)
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stderr
    assert stats["header"] == 100
    assert stats["round_trips"] >= 3
    assert stats["early"] == 0
    # each round trip included the 2 ms pause
    assert json.loads(proc.stdout)["median"] >= 2000


def test_server_dying_mid_run_is_an_error(lat_tcp, tmp_path):
    port = free_port()
    with server(lat_tcp, tmp_path, port) as srv:
        client = subprocess.Popen(
            [lat_tcp, "-t", "0.2", "-N", "50", "-p", str(port), "127.0.0.1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(0.5)
            kids = children_of(srv.pid)
            assert len(kids) == 1
            os.kill(kids[0][0], 9)
            out, err = client.communicate(timeout=10)
        finally:
            if client.poll() is None:
                client.kill()
                client.wait()
    assert client.returncode == 1
    assert out == ""
    assert "microseconds" not in err
    assert err.startswith(f"lat_tcp: read from 127.0.0.1:{port}: ")


# --------------------------------------------------------------- server ---

def test_stop_request_ends_server(lat_tcp, tmp_path):
    port = free_port()
    with server(lat_tcp, tmp_path, port) as srv:
        held = socket.create_connection(("127.0.0.1", port))
        held.settimeout(5)
        try:
            held.sendall(struct.pack(">I", 1))   # a client mid-conversation
            deadline = time.monotonic() + 3
            while not children_of(srv.pid) and time.monotonic() < deadline:
                time.sleep(0.01)
            (child, _), = children_of(srv.pid)
            proc = run(lat_tcp, "-S", "-p", str(port), "127.0.0.1", timeout=10)
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout == ""
            assert srv.wait(5) == 0
            # the server ended (and reaped) its remaining child
            assert held.recv(1) == b""
            assert not Path(f"/proc/{child}").exists()
        finally:
            held.close()
    # and the port is free again: nobody answers
    assert run(lat_tcp, *QUICK, "-p", str(port), "127.0.0.1").returncode == 1


def test_server_forks_a_child_per_connection(lat_tcp, tmp_path):
    port = free_port()
    with server(lat_tcp, tmp_path, port) as srv:
        # Hold one connection open mid-conversation.  An iterative server
        # would be stuck serving it and the clients below would hang.
        held = socket.create_connection(("127.0.0.1", port))
        try:
            held.sendall(struct.pack(">I", 1))
            held.sendall(b"x")
            assert held.recv(1) == b"x"
            assert len(children_of(srv.pid)) == 1
            cmd = [lat_tcp, "-t", "0.1", "-N", "5", "-p", str(port),
                   "127.0.0.1"]
            clients = [subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
                       for _ in range(2)]
            busy = 0                       # most server children seen
            while any(c.poll() is None for c in clients):
                busy = max(busy, len(children_of(srv.pid)))
                time.sleep(0.01)
            results = [c.communicate(timeout=15) for c in clients]
        finally:
            held.close()
        assert busy == 3, "expected one server child per connection"
        for c, (out, err) in zip(clients, results):
            assert c.returncode == 0, err
            assert len(json.loads(out)["samples"]) == 5
        # all children exit and are reaped: no zombies left behind
        deadline = time.monotonic() + 3
        while children_of(srv.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert children_of(srv.pid) == []
        assert srv.poll() is None          # the server itself is still up
