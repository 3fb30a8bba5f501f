"""The sentences of the lat_tcp chapter and evidence page that read the committed results in
words, each pinned to the result it reads: a rerun that changes what a sentence says fails here,
and the sentence is rewritten instead of contradicting the page's tables. Sentences that read a
claim's verdict carry ``prose_reads`` on the page instead (labkit/site/macros/claim_tables.py).

Each test quotes its sentence; the thresholds are the sentence's own words ("two calls", "at
least one read", "status 1", "one"), never a measured value. The reference is
:func:`refhost.result`; the emulated arm64 host's result is read where the sentence is about its
tab too."""

from __future__ import annotations

import json
import re
from pathlib import Path

from labkit.stats import claims
from labkit import model
import readings
import refhost

ROOT = readings.ROOT
LAB = ROOT / "labs" / "lat_tcp"
SIZE_CLAIMS = {"large-message-costs-more", "small-messages-cost-alike"}
reference, emulated, result = readings.host_fixtures("lat_tcp")
measurements = readings.measurements


def raw(result: dict, name: str) -> Path:
    """``results/<host>/lat_tcp/raw/<name>``."""
    return ROOT / "results" / result["host"]["label"] / "lat_tcp" / "raw" / name


def stacks(result: dict, pin: str) -> list[tuple[tuple[str, ...], int]]:
    """The client's folded stacks at placement ``pin``: ``(frames, weight)`` per stack
    (:func:`readings.folded`)."""
    art = next(a for a in result["artifacts"] if a["kind"] == "folded" and a["case"].get("pin") == pin)
    return readings.folded(ROOT / "results" / result["host"]["label"] / art["path"])


def frames(result: dict, pin: str) -> set[str]:
    """Every function name in the client's folded stacks at placement ``pin`` (inferno's ``_[k]``
    mark removed)."""
    return {f for frames, _ in stacks(result, pin) for f in frames}


def test_the_unchecked_client_with_no_server_prints_a_number_and_no_error(result):
    """Chapter, step 2, below the `-L` client's run with no server (repetition 1): "A number, and
    no error; only the JSON line gives it away (`"connected":false`, `failed_calls`)": exit status
    0, lmbench's latency line and nothing else on standard error, and a JSON line that says
    it never connected and counts failed calls."""
    (s,) = model.select_steps(result, dict(experiment="noserver", client="unchecked", server="none", rep=1))
    assert s["exit_code"] == 0
    err = raw(result, f"{s['name']}.err").read_text().splitlines()
    assert err and all(line.startswith("TCP latency using ") for line in err), err
    j = json.loads(raw(result, f"{s['name']}.out").read_text())
    assert j["median"] > 0 and j["connected"] is False and j["failed_calls"] > 0, j


def test_every_round_trip_without_a_server_is_two_failed_calls(result):
    """Chapter, step 2: "Without a server, each "round trip" is two calls failing": in every run
    of the `-L` client with no server, the failed calls of the timed batches are exactly two per
    round trip (the batches' count times the number of batches)."""
    runs = model.select_steps(result, dict(experiment="noserver", client="unchecked", server="none"))
    assert len(runs) >= 3
    for s in runs:
        j = json.loads(raw(result, f"{s['name']}.out").read_text())
        assert j["failed_calls"] == 2 * j["iterations"] * len(j["samples"]), (s["name"], j)


def test_the_unchecked_client_with_a_server_is_connected_and_fails_nothing(result):
    """Evidence page, the client with no server: the `-L` client with a server listening "prints
    a real round trip. Compare its JSON line (`"connected":true`, `"failed_calls":0`)"."""
    (s,) = model.select_steps(result, dict(experiment="noserver", client="unchecked", server="listening", rep=1))
    j = json.loads(raw(result, f"{s['name']}.out").read_text())
    assert s["exit_code"] == 0 and j["connected"] is True and j["failed_calls"] == 0 and j["median"] > 0, j


def test_the_checked_client_with_no_server_exits_1_with_no_number(result):
    """Evidence page: "Our client checks `connect()`: with nothing listening it exits with status 1
    and prints no number" (the claim checks a non-zero status; the sentence says 1)."""
    s = model.find_step(result, "noserver")
    assert s["exit_code"] == 1 and s["stdout_bytes"] == 0, s
    assert "Connection refused" in raw(result, "noserver.err").read_text()


def test_gdb_shows_connect_fail_and_the_client_exit_with_status_1(result):
    """Evidence page: "Our checked client under `gdb`, on a port where nothing listens:
    `connect()` returns -1 (gdb prints the value where libc has debug symbols) and the program
    exits with status 1": gdb's output ends with the exit code 01, and shows connect's -1 unless
    the breakpoint stopped in a libc without debug information (`in connect () from …`)."""
    out = raw(result, "noserver.gdb.out").read_text()
    assert re.search(r"exited with code 01\]", out), out
    shown = re.search(r"Value returned is \$\d+ = -1$", out, re.M)
    no_debug_info = re.search(r"in (__libc_)?connect \(\) from /", out)
    assert shown or no_debug_info, out
    assert result["host"]["label"] != refhost.host("lat_tcp") or shown, out


def test_one_sample_per_run_5_a_case_10_for_the_size_claims(result):
    """Evidence page, method: "one run's median is one sample of its case: 5 runs for each case a
    claim reads, in quick mode as in a full run (the same-CPU runs of the message sizes the claims
    compare: 10; veth runs once in quick mode, and strace, which no claim reads, is skipped
    there)" (5 runs each traced and untraced in a full run)."""
    skipped = {s["group"] for s in result["steps"] if s["name"] == s["group"] and s["status"] == "skipped"}
    left_out = set(result["run"].get("left_out") or {})               # groups a quick run leaves out
    for c in claims.load(LAB / "claims.toml"):
        if c["kind"] == "step" or c.get("group") in left_out:
            continue
        for side in (c["a"], c["b"]):
            found = measurements(result, c["metric"], **side)
            if not found and (c.get("requires") or side["experiment"] in skipped):
                continue                                  # an SMT placement the host lacks, a group it skipped
            assert len(found) == 1, (c["id"], side, [m["case"] for m in found])
            assert len(found[0]["samples"]) == (10 if c["id"] in SIZE_CLAIMS else 5), (c["id"], side)
    veth = measurements(result, "round_trip", experiment="veth")
    strace = measurements(result, "round_trip", experiment="strace")
    if result["run"]["quick"]:
        assert veth and all(len(m["samples"]) == 1 for m in veth)
        assert not strace and model.find_step(result, "strace")["status"] == "skipped"
    else:
        assert len(strace) == 2 and all(len(m["samples"]) == 5 for m in strace)


def test_our_hosts_have_no_smt_and_no_sibling_row(result):
    """Chapter, step 5: "Our two hosts have no SMT, so no **smt-sibling** row"."""
    assert result["host"]["smt"] is False
    pins = {m["case"].get("pin") for m in measurements(result, "round_trip", experiment="pinned")}
    assert {"same-cpu", "other-core"} <= pins and "smt-sibling" not in pins, pins


def test_the_client_profiles_show_the_functions_the_pages_name(reference):
    """Chapter, step 6, same CPU: "Compare `tcp_sendmsg` and `tcp_recvmsg` … with `schedule` …
    the loopback delivery to its socket (`net_rx_action`, `tcp_v4_rcv`), run in the client's
    softirq, is [here]. Search for `spin_unlock_irqrestore` too"; evidence page, the flame graph
    on two CPUs: "look at how wide `schedule` is against `tcp_sendmsg` and `tcp_recvmsg`"."""
    same = frames(reference, "same-cpu")
    for f in ("tcp_sendmsg", "tcp_recvmsg", "schedule", "net_rx_action", "tcp_v4_rcv"):
        assert f in same, f
    assert any(f.endswith("spin_unlock_irqrestore") for f in same)
    other = frames(reference, "other-core")
    assert {"tcp_sendmsg", "tcp_recvmsg", "schedule"} <= other


def test_the_reference_samples_on_the_cpu_clock_timer(reference):
    """Chapter, step 6: "on the x86_64 VM perf samples on the `cpu-clock` timer": no hardware
    PMU, perf's default event is cpu-clock."""
    pmu = reference["host"]["pmu"]
    assert reference["host"]["arch"] == "x86_64" and pmu["available"] is False and "cpu-clock" in pmu["detail"], pmu


def test_the_arm64_profile_is_an_emulated_quick_run(emulated):
    """Chapter, step 6: "The arm64 tab's profile is of an emulated CPU and a short quick run: much
    of it is the programs starting (`taskset` and the dynamic loader), [...] and it has no
    `spin_unlock_irqrestore` box": a quick run under QEMU TCG, "much" read as at least a quarter
    of the samples' weight in `taskset`'s stacks or under the dynamic loader, and no frame
    ending in ``spin_unlock_irqrestore``."""
    assert emulated["run"]["quick"] is True and emulated["host"]["emulation"]["accelerator"] == "tcg"
    same = stacks(emulated, "same-cpu")
    total = sum(w for _, w in same)
    starting = sum(w for fr, w in same if fr[0] == "taskset" or any(f.startswith("[ld-linux") for f in fr))
    assert starting >= total / 4, (starting, total)
    assert not any(f.endswith("spin_unlock_irqrestore") for fr, _ in same for f in fr)


def test_message_sizes_full_and_quick(reference, emulated):
    """Chapter, step 7: "The lab sends 1 byte to 64 KiB, client on the server's CPU and on another
    (a quick run: three sizes, one CPU)"; evidence page, message size: "a quick run has 1 byte,
    1 KiB and 64 KiB on the same CPU only"; veth: "Both ends run on the same CPU"."""
    def sizes(result, pin):
        return {m["case"]["msize"] for m in measurements(result, "round_trip", experiment="msize", pin=pin)}
    full = sizes(reference, "same-cpu")
    assert reference["run"]["quick"] is False and min(full) == 1 and max(full) == 65536 and len(full) > 3, full
    assert sizes(reference, "other-core") == full
    assert emulated["run"]["quick"] is True
    assert {m["case"]["pin"] for m in measurements(emulated, "round_trip", experiment="msize")} == {"same-cpu"}
    assert sizes(emulated, "same-cpu") == {1, 1024, 65536}
    for r in (reference, emulated):
        veth = measurements(r, "round_trip", experiment="veth")
        assert {m["case"]["path"] for m in veth} == {"loopback", "veth"} and {m["case"]["pin"] for m in veth} == {"same-cpu"}


def test_a_ps_share_counts_one_run_and_the_events_one_share_per_repetition(result):
    """Chapter, step 4: "A `ps` row is one watched run; the events' row has a share per
    repetition"; evidence page, placement: the `same_cpu_share` of `ps`'s snapshots: "its
    `samples` column counts runs (one), not the snapshots behind the share"."""
    for m in measurements(result, "same_cpu_share", experiment="free"):
        assert len(m["samples"]) == 1, m
    (events,) = measurements(result, "same_cpu_share", experiment="placement")
    (timed,) = measurements(result, "round_trip", experiment="placement", traced="perf record sched")
    assert len(events["samples"]) == len(timed["samples"]) >= 3


def test_the_reference_perf_lists_lat_tcp_under_terminated_tasks(reference):
    """Evidence page, wake-ups: "the two `lat_tcp` tasks, which older perf releases, the
    reference host's among them, list under "Terminated tasks"": in both `perf sched timehist -s`
    summaries, the two busy `lat_tcp` tasks (switched in thousands of times) are listed after that
    heading."""
    for pin in ("same", "other"):
        out = raw(reference, f"wakeup.{pin}.timehist.out").read_text()
        head, sep, tail = out.partition("Terminated tasks:")
        assert sep, pin
        busy = [line for line in tail.split("Idle stats")[0].splitlines()
                if re.match(r"\s*lat_tcp\[\d+\]\s+\d+\s+(\d+)", line) and int(line.split()[2]) >= 1000]
        assert len(busy) == 2, (pin, busy)
        assert not [line for line in head.splitlines()
                    if re.match(r"\s*lat_tcp\[\d+\]\s+\d+\s+(\d+)", line) and int(line.split()[2]) >= 1000], pin


def cpuidle(result: dict) -> dict[str, list[str]]:
    """The ``wakeup.cpuidle`` step's output as file name → words (``current_driver`` → [...],
    ``guest_halt_poll_ns`` → [...])."""
    out = raw(result, "wakeup.cpuidle.out").read_text()
    values = dict(line.rsplit(":", 1) for line in out.splitlines() if ":" in line)
    return {Path(k).name: v.split() for k, v in values.items()}


def test_the_reference_cpuidle_is_haltpoll_forced_and_never_polling(reference):
    """Evidence page, wake-ups: "On our reference EPYC VM `haltpoll` is the cpuidle driver and
    governor, loaded because the kernel's command line asks for it (`cpuidle_haltpoll`'s `force`
    is `Y` …), and its `guest_halt_poll_ns` is 0: it never polls"."""
    named = cpuidle(reference)
    assert "EPYC" in reference["host"]["cpu_model"]
    assert named["current_driver"] == named["current_governor"] == ["haltpoll"], named
    assert named["force"] == ["Y"] and named["guest_halt_poll_ns"] == ["0"], named


def test_the_xeon_vm_has_haltpoll_only_among_the_available_governors():
    """Evidence page, wake-ups: "On our Xeon VM the output names `haltpoll` only among the
    available governors, and the cpuidle driver is `none`"."""
    r = model.load(ROOT / "results" / "xeon-kvm-2vcpu" / "lat_tcp.json")
    named = cpuidle(r)
    assert named["current_driver"] == ["none"], named
    assert "haltpoll" in named["available_governors"], named
    assert all("haltpoll" not in v for k, v in named.items() if k != "available_governors"), named


def test_the_reference_wake_ups_take_much_of_the_other_core_gap(reference):
    """Evidence page, wake-ups: "at the median, a `lat_tcp` thread woken from the other CPU waits
    several times as long as one woken on its own CPU, and two such waits (a round trip has two
    wake-ups) make up more than half the gap between the two recorded round trips": median
    delays (p50) other-core ≥ 3 × same-CPU, and 2 × their difference > half the difference of
    the two round trips recorded under perf sched."""
    delay = {pin: readings.median(reference, "wakeup_delay", experiment="wakeup", pin=pin, stat="p50")
             for pin in ("same-cpu", "other-core")}
    trip = {pin: readings.median(reference, "round_trip", experiment="wakeup", pin=pin)
            for pin in ("same-cpu", "other-core")}
    assert delay["other-core"] >= 3 * delay["same-cpu"], delay
    assert 2 * (delay["other-core"] - delay["same-cpu"]) > (trip["other-core"] - trip["same-cpu"]) / 2, (delay, trip)


def test_strace_counts_one_write_and_at_least_one_read_per_round_trip(reference):
    """Evidence page, strace: "Each round trip is one `write` and at least one `read`": in every
    traced run the client's reads are at least its writes, less the one write of the size word
    that opens the connection."""
    reads = measurements(reference, "strace_calls", syscall="read")[0]["samples"]
    writes = measurements(reference, "strace_calls", syscall="write")[0]["samples"]
    assert len(reads) == len(writes) >= 3
    assert all(r >= w - 1 and w > 1 for r, w in zip(reads, writes)), (reads, writes)


