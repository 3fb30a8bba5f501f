#!/usr/bin/env bash
# labs/lat_tcp/run.sh: TCP round-trip latency, the lmbench lat_tcp investigation, rerunnable.
#
#   sudo labs/lat_tcp/run.sh [--quick] [--out DIR] [--only GROUP,..] [--host LABEL]
#
# What it does, one step per command (each kept with its output under <out>/lat_tcp/raw/):
#   build     compile lat_tcp.c (lmbench's protocol, our own timing) into the scratch dir; pick
#             the placements: the server's CPU (the first online CPU) and, for the client, that
#             CPU, its SMT sibling, another core and another package, where the host has them
#   noserver  the client with no server listening: ours must fail and print no number; then
#             the same command with -L (lmbench 3.0-a9's unchecked connect), with no server
#             and with one, interleaved
#   free      what ps shows of an unpinned server and client every 50 ms (the taskset and gdb
#             cards show it); ps perturbs the pair, so the placement measured is pinned's
#   pinned    server pinned with taskset, the client on each placement, and both unpinned,
#             interleaved; the unpinned pair once more under perf record of the scheduler's
#             events (root): on which CPU each of the two was, at every instant of its run
#   msize     message sizes 1 B .. 64 KiB, client on the server's CPU and on another, interleaved
#   veth      loopback vs a veth pair between two network namespaces (root), on one CPU
#   perf      perf record -g of the client against untraced runs, same CPU; other CPU once;
#             flame graphs (inferno)
#   strace    strace -c of the client against untraced runs: which system calls a round trip costs
#   sockperf  sockperf ping-pong and lat_tcp, interleaved, on the same pinnings
# A case a claim reads runs 5 times, in quick mode as in full (the message sizes the msize claims
# compare, same CPU: 10), the cases of a group in turn within each repetition (ABAB, not
# AAA BBB); each run's median round trip is one sample. Quick mode runs fewer cases, never
# fewer repetitions of a case a claim reads: it skips what no claim reads (the msize sizes
# between and the other-CPU series, strace, perf on the other CPU), runs veth once (its
# namespaces are the lab's host change to undo) and times shorter batches. Every measuring
# step carries its case as fields (lab_run --case); record.py reads those, never step names.
# Servers are stopped by PID and namespaces deleted on exit, error, Ctrl-C and TERM.
# shellcheck disable=SC2015 # "step && step || undo": the undo runs when any of the steps failed
# shellcheck source=../lib/lab.sh disable=SC2317 # group_* functions are called by lab_main
source "$(dirname "$0")/../lib/lab.sh"

lab_define lat_tcp "lat_tcp: TCP round-trip latency (lmbench's protocol), pinning, message size, veth" \
  gcc taskset perf strace sockperf ip inferno-flamegraph
lab_group build "compile lat_tcp.c, choose the placements" always
lab_group noserver "client with no server: ours fails; lmbench's unchecked connect prints a number"
lab_group free "where the scheduler puts an unpinned pair (ps every 50 ms)"
lab_group pinned "taskset placements of the client and an unpinned pair, interleaved; the pair's CPUs (perf sched events)"
lab_group msize "message size 1 B to 64 KiB, same CPU and other CPU, interleaved"
lab_group veth "loopback vs veth between two network namespaces, same CPU (root)"
lab_group perf "perf record -g of the client vs untraced, same CPU; flame graphs"
lab_group wakeup "where a round trip waits: perf sched timehist, same CPU and other CPU; the cpuidle driver (full runs)"
lab_group strace "strace -c of the client vs untraced"
lab_group sockperf "cross-check with sockperf ping-pong on the same pinnings, interleaved"

BIN="" NOBPF=-q PORT="" CPU_A=0 CPU_B=0 REL_B=same-cpu T="" N="" REPS=3 EXTRA=1 MREPS=6
CLAIM_SIZES=" 1 1024 65536 "   # the message sizes the msize claims compare
PLACES=()   # "CPU RELATION" of each client placement, the server being on CPU_A

# relation_of RELATION: the first CPU that stands in RELATION to CPU_A (topology.txt), if any.
relation_of() { awk -v r="$1" '$3 == r { print $2; exit }' "$LAB_RUN/topology.txt"; }
# relation_to CPU: how CPU stands to CPU_A: same-cpu, smt-sibling, other-core or other-package.
relation_to() { awk -v c="$1" '$2 == c { print $3; exit }' "$LAB_RUN/topology.txt"; }

group_build() {
  # Per run: target seconds per batch (-t) and batches (-N); the run's median is one sample.
  T=$(lab_quick 0.03 0.2)
  N=5
  REPS=5   # every case a claim reads, quick or full: the calibrated interval decides at n = 5
  EXTRA=$(lab_quick 1 5)  # cases no claim reads (veth: the page's table, and the namespaces' undo)
  # The same-CPU runs of CLAIM_SIZES: one CPU's round trip is now and then 1.3x slower (a
  # second mode), and a "within 1.2x" claim needs more runs than that to decide.
  MREPS=10
  BIN="$LAB_SCRATCH/lat_tcp"
  lab_run build -- gcc -O2 -g -fno-omit-frame-pointer -Wall -Wextra -std=c11 -D_GNU_SOURCE \
    -o "$BIN" "$LAB_DIR/lat_tcp.c" || { BIN=""; return 1; }
  PORT=$(lab_free_port 31234)
  # The server always runs on CPU_A, the first online CPU. topology.txt: "CPU_A CPU RELATION"
  # for every online CPU, from the kernel's topology files (labkit topology).
  local all rel c
  all=$("$LAB_PY" -m labkit topology --cpus 100000) || all=""
  CPU_A=$(awk 'NR == 1 { print $1 }' <<<"$all")
  [[ -n "$CPU_A" ]] || { CPU_A=$(taskset -pc $$ | awk -F': ' '{ split($2, a, /[,-]/); print a[1] }'); all="$CPU_A $CPU_A same-cpu"; }
  awk -v a="$CPU_A" '$1 == a' <<<"$all" > "$LAB_RUN/topology.txt"
  PLACES=()
  for rel in same-cpu smt-sibling other-core other-package; do
    c=$(relation_of "$rel")
    [[ -z "$c" ]] || PLACES+=("$c $rel")
  done
  # CPU_B, the "other CPU" of the two-placement experiments: another core, else another
  # package, else the SMT sibling; CPU_A itself on a one-CPU host (those steps are skipped).
  CPU_B=$CPU_A REL_B=same-cpu
  for rel in other-core other-package smt-sibling; do
    c=$(relation_of "$rel")
    if [[ -n "$c" ]]; then CPU_B=$c REL_B=$rel; break; fi
  done
}

need_bin() { [[ -n "$BIN" ]] || { lab_skip "$1" "build failed"; return 1; }; }

# start_server NAME CPU PORT [ARGS...]: lat_tcp -s on PORT, pinned to CPU ("" = unpinned);
# waits until it listens.
start_server() {
  local name=$1 cpu=$2 port=$3; shift 3
  if [[ -n "$cpu" ]]; then
    lab_spawn "$name" -- taskset -c "$cpu" "$BIN" -s -p "$port" "$@"
  else
    lab_spawn "$name" -- "$BIN" -s -p "$port" "$@"
  fi
  lab_wait_for "$LAB_RUN/raw/$name.err" "listening" 5 || { lab_skip "$name" "server did not start: $(tail -n1 "$LAB_RUN/raw/$name.err")"; return 1; }
}

# client NAME CPU PORT MSIZE KEY=VALUE...: one lat_tcp client run as a step, pinned to CPU
# ("" = unpinned), to 127.0.0.1:PORT with MSIZE-byte messages. Its case: tool=lat_tcp, msize,
# client_cpu (when pinned) and the KEY=VALUE fields given.
client() {
  local name=$1 cpu=$2 port=$3 m=$4 f cases=(); shift 4
  for f in tool=lat_tcp "msize=$m" ${cpu:+"client_cpu=$cpu"} "$@"; do cases+=(--case "$f"); done
  if [[ -n "$cpu" ]]; then
    lab_run "${cases[@]}" "$name" -- taskset -c "$cpu" "$BIN" -m "$m" -N "$N" -t "$T" -p "$port" 127.0.0.1
  else
    lab_run "${cases[@]}" "$name" -- "$BIN" -m "$m" -N "$N" -t "$T" -p "$port" 127.0.0.1
  fi
}

# gdb_child PORT: the move the original made on lmbench's forked worker, on our server: gdb runs
# lat_tcp -s following the child it forks per connection (follow-fork-mode child, both kept), a
# client connects, and gdb stops the child where it serves the connection: its stack and the
# two inferiors, then both are killed (the client then fails, as expected).
gdb_child() {
  local port=$1 mark pid i s; mark=$(lab_mark)
  lab_spawn noserver.gdb-child -- gdb -q -batch -ex 'set follow-fork-mode child' -ex 'set detach-on-fork off' \
    -ex 'break serve_connection' -ex run -ex bt -ex 'info inferiors' -ex kill -ex 'inferior 1' -ex kill \
    --args "$BIN" -s -p "$port"
  pid=$LAB_SPAWNED
  if lab_wait_for "$LAB_RUN/raw/noserver.gdb-child.err" "listening" 10; then
    lab_run --expect-fail noserver.gdb-client -- "$BIN" -N 1 -t 0.05 -p "$port" 127.0.0.1
    lab_wait_for "$LAB_RUN/raw/noserver.gdb-child.out" "inferiors|Num +Description" 10 || true
    # gdb then kills both inferiors and exits by itself: the unwind waits for that (up to 5 s),
    # since a TERM to the group while gdb kills them can crash gdb 13.1 (a segfault, "Fatal signal").
    lab_wait_for "$LAB_RUN/raw/noserver.gdb-child.out" "Inferior 1 .* killed" 5 || true
    for ((i = 0; i < 100; i++)); do
      { read -r s < "/proc/$pid/stat"; } 2>/dev/null && [[ ${s##*) } != [ZX]* ]] || break
      sleep 0.05
    done
  else
    lab_skip noserver.gdb-client "the server under gdb did not start listening: $(tail -n1 "$LAB_RUN/raw/noserver.gdb-child.err")"
  fi
  lab_unwind "$mark"
}

group_noserver() {
  need_bin noserver || return 0
  local quiet mark i
  quiet=$(lab_free_port $((PORT + 10)))
  # Nothing listens on $quiet (lab_free_port checked): lmbench's client would print a latency here.
  lab_run --expect-fail noserver -- "$BIN" -N 3 -t 0.05 -p "$quiet" 127.0.0.1
  # The same in gdb (the gdb card reads it): connect's return value, and the client's exit.
  if lab_require noserver.gdb cmd:gdb; then
    lab_run noserver.gdb -- gdb -q -batch -ex 'break connect' -ex run -ex finish -ex continue \
      --args "$BIN" -N 1 -t 0.05 -p "$quiet" 127.0.0.1
    gdb_child "$(lab_free_port $((PORT + 20)))"
  fi
  # lmbench 3.0-a9's client (-L: a failed connect is not checked), with no server on $quiet
  # and with one on $PORT, in turn; both on CPU_A.
  lab_require noserver.unchecked cmd:taskset || return 0
  mark=$(lab_mark)
  start_server noserver.server "$CPU_A" "$PORT" || return 0
  for ((i = 1; i <= REPS; i++)); do
    lab_run --case experiment=noserver --case tool=lat_tcp --case client=unchecked --case server=none \
      --case msize=1 --case "client_cpu=$CPU_A" --case "rep=$i" \
      "noserver.unchecked.none.$i" -- taskset -c "$CPU_A" "$BIN" -L -m 1 -N "$N" -t "$T" -p "$quiet" 127.0.0.1
    lab_run --case experiment=noserver --case tool=lat_tcp --case client=unchecked --case server=listening \
      --case msize=1 --case "server_cpu=$CPU_A" --case "client_cpu=$CPU_A" --case "rep=$i" \
      "noserver.unchecked.listening.$i" -- taskset -c "$CPU_A" "$BIN" -L -m 1 -N "$N" -t "$T" -p "$PORT" 127.0.0.1
  done
  lab_unwind "$mark"
}

group_free() {
  need_bin free || return 0
  local mark; mark=$(lab_mark)
  start_server free.server "" "$PORT" || return 0
  # What htop would show: every 50 ms, the CPU (psr) each lat_tcp process last ran on and its CPU%. This
  # run is for the snapshots: the round trips compared with the pinned ones are the pinned
  # group's unpinned runs, made without ps beside them.
  # pcpu: each process's CPU time over its life so far, in % of one CPU (htop's CPU% averaged).
  lab_spawn free.where -- sh -c 'while :; do ps -o pid=,ppid=,psr=,pcpu=,args= -C lat_tcp; echo; sleep 0.05; done'
  client free "" "$PORT" 1 experiment=free pin=free "observed=ps psr every 50 ms"
  lab_unwind "$mark"
}

group_pinned() {
  need_bin pinned || return 0
  lab_require pinned cmd:taskset || return 0
  local free_port place c rel i mark sched=1
  # The topology the placements are chosen from, as the tools print it (the taskset card).
  lab_run pinned.lscpu -- lscpu -e=CPU,CORE,SOCKET,NODE,CACHE,ONLINE
  if lab_require pinned.numa cmd:numactl; then lab_run pinned.numa -- numactl --hardware; fi
  # Where the unpinned pair runs, from scheduler events (free_sched): perf's tracepoints
  # system-wide need root (or perf_event_paranoid -1) and tracefs.
  lab_require pinned.free.sched root perf tracefs || sched=0
  NOBPF=$(lab__nobpf)
  mark=$(lab_mark)
  # Two servers for the whole group: one pinned to CPU_A, one left to the scheduler.
  start_server pinned.server "$CPU_A" "$PORT" || return 0
  free_port=$(lab_free_port $((PORT + 1)))
  start_server pinned.free-server "" "$free_port" || { lab_unwind "$mark"; return 0; }
  for ((i = 1; i <= REPS; i++)); do
    for place in "${PLACES[@]}"; do
      read -r c rel <<<"$place"
      client "pinned.$rel.$i" "$c" "$PORT" 1 experiment=pinned "pin=$rel" "server_cpu=$CPU_A" "rep=$i"
    done
    client "pinned.free.$i" "" "$free_port" 1 experiment=free pin=free "rep=$i"
    ((sched)) && free_sched "$free_port" "$i"
  done
  lab_unwind "$mark"
}

# free_sched PORT REP: the unpinned client once more, right after the unwatched one, its whole
# run (and no more) recorded system-wide with the scheduler events that say on which CPU each
# lat_tcp task is at every instant (labkit/parsers/perf_sched.py): exec, fork, wakeup_new,
# migrate_task and exit, filtered in the kernel to lat_tcp tasks. No sched_switch: a few events
# per migration, not four per round trip, so the recording leaves the pair as it is (the
# pinned runs before it are the same-CPU and other-CPU round trips its placement predicts).
free_sched() {
  local port=$1 i=$2 data="$LAB_SCRATCH/sched-free-$2.data" cs=(--case experiment=placement --case "rep=$2")
  local lt='comm == "lat_tcp"'
  lab_run "${cs[@]}" --case tool=lat_tcp --case msize=1 --case pin=free --case "traced=perf record sched" \
    "pinned.free.sched.$i" -- perf record -q -a --no-buildid-cache "$NOBPF" -o "$data" \
    -e sched:sched_process_exec --filter 'filename ~ "*/lat_tcp"' \
    -e sched:sched_process_fork --filter 'child_comm == "lat_tcp"' \
    -e sched:sched_wakeup_new --filter "$lt" -e sched:sched_migrate_task --filter "$lt" \
    -e sched:sched_process_exit --filter "$lt" -- \
    "$BIN" -m 1 -N "$N" -t "$T" -p "$port" 127.0.0.1 || return 0
  lab_run "${cs[@]}" --case "tool=perf script" "pinned.free.sched.$i.script" -- perf script -F "$LAB_PERF_TRACE" -i "$data"
}

group_msize() {
  need_bin msize || return 0
  lab_require msize cmd:taskset || return 0
  local sizes m i pin c rel mark
  local pins="same other"
  sizes=$(lab_quick "1 1024 65536" "1 4 16 64 256 1024 4096 16384 65536")
  mark=$(lab_mark)
  start_server msize.server "$CPU_A" "$PORT" || return 0
  # Both placements, each message size in turn. The claims read the same-CPU series (a
  # one-CPU host can run it): quick mode runs only that one.
  if ((LAB_QUICK)); then pins=same; lab_skip msize.other "quick mode: no claim reads the other-CPU series"
  elif [[ $CPU_B == "$CPU_A" ]]; then pins=same; lab_skip msize.other "only one CPU"; fi
  for ((i = 1; i <= MREPS; i++)); do
    for m in $sizes; do
      for pin in $pins; do
        # Past REPS runs, only the same-CPU runs of the sizes the claims compare.
        ((i <= REPS)) || [[ $pin == same && $CLAIM_SIZES == *" $m "* ]] || continue
        if [[ $pin == same ]]; then c=$CPU_A rel=same-cpu; else c=$CPU_B rel=$REL_B; fi
        client "msize.$pin.$m.$i" "$c" "$PORT" "$m" experiment=msize "pin=$rel" "server_cpu=$CPU_A" "rep=$i"
      done
    done
  done
  lab_unwind "$mark"
}

group_veth() {
  need_bin veth || return 0
  lab_require veth root netns cmd:ip cmd:taskset || return 0
  # Two namespaces joined by a veth pair, addressed from 198.18.0.0/15 (RFC 2544's
  # benchmarking range); nothing leaves this machine. Deleting a namespace deletes its veth end.
  local a="pcb-lat-a-$$" b="pcb-lat-b-$$" mark lo_port i path
  mark=$(lab_mark)
  # Each deletion (and /run/netns as it was) is registered before the namespace is added.
  lab_netns_add veth.netns-a "$a" || { lab_unwind "$mark"; return 0; }
  lab_netns_add veth.netns-b "$b" || { lab_unwind "$mark"; return 0; }
  lab_run veth.link -- ip link add pcb-va netns "$a" type veth peer name pcb-vb netns "$b" &&
    lab_run veth.addr-a -- ip -n "$a" addr add 198.18.0.1/30 dev pcb-va &&
    lab_run veth.addr-b -- ip -n "$b" addr add 198.18.0.2/30 dev pcb-vb &&
    lab_run veth.up-a -- ip -n "$a" link set pcb-va up &&
    lab_run veth.up-b -- ip -n "$b" link set pcb-vb up &&
    lab_run veth.lo-a -- ip -n "$a" link set lo up || { lab_unwind "$mark"; return 0; }
  # Two servers in namespace a, both on CPU_A: one bound to its loopback, one to the veth
  # address (a namespace has its own ports: the same port number serves both).
  lo_port=$((PORT + 1))
  lab_spawn veth.server-lo -- ip netns exec "$a" taskset -c "$CPU_A" "$BIN" -s -p "$lo_port"
  lab_spawn veth.server-veth -- ip netns exec "$a" taskset -c "$CPU_A" "$BIN" -s -p "$PORT" -b 198.18.0.1
  lab_wait_for "$LAB_RUN/raw/veth.server-lo.err" listening 5 && lab_wait_for "$LAB_RUN/raw/veth.server-veth.err" listening 5 ||
    { lab_skip veth.loopback "a server did not start"; lab_unwind "$mark"; return 0; }
  for ((i = 1; i <= EXTRA; i++)); do
    for path in loopback veth; do
      local cs=(--case experiment=veth --case tool=lat_tcp --case msize=1 --case pin=same-cpu --case "path=$path"
        --case "server_cpu=$CPU_A" --case "client_cpu=$CPU_A" --case "rep=$i")
      if [[ $path == loopback ]]; then
        lab_run "${cs[@]}" "veth.loopback.$i" -- ip netns exec "$a" taskset -c "$CPU_A" "$BIN" -m 1 -N "$N" -t "$T" -p "$lo_port" 127.0.0.1
      else
        lab_run "${cs[@]}" "veth.veth.$i" -- ip netns exec "$b" taskset -c "$CPU_A" "$BIN" -m 1 -N "$N" -t "$T" -p "$PORT" 198.18.0.1
      fi
    done
  done
  lab_unwind "$mark"
}

group_perf() {
  need_bin perf || return 0
  lab_require perf perf inferno cmd:taskset || return 0
  local pin c rel mark i reps data first name
  mark=$(lab_mark)
  start_server perf.server "$CPU_A" "$PORT" || return 0
  for pin in same other; do
    if [[ $pin == same ]]; then c=$CPU_A rel=same-cpu reps=$REPS; else c=$CPU_B rel=$REL_B reps=1; fi
    if [[ $pin == other && $CPU_B == "$CPU_A" ]]; then lab_skip perf.other "only one CPU: no other CPU to compare"; continue; fi
    if [[ $pin == other ]] && ((LAB_QUICK)); then lab_skip perf.other "quick mode: no claim reads the other-CPU profile"; continue; fi
    local cs=(--case experiment=perf --case tool=lat_tcp --case msize=1 --case "pin=$rel"
      --case "server_cpu=$CPU_A" --case "client_cpu=$c")
    for ((i = 1; i <= reps; i++)); do
      # On the same CPU an untraced run precedes each traced one: the claim compares the two.
      if [[ $pin == same ]]; then
        lab_run "${cs[@]}" --case traced=none --case "rep=$i" "perf.$pin.untraced.$i" -- \
          taskset -c "$c" "$BIN" -m 1 -N "$N" -t "$T" -p "$PORT" 127.0.0.1
      fi
      data="$LAB_SCRATCH/perf-$rel-$i.data"
      # The first traced run is perf.<pin>.record (the perf card shows it), the others .2, .3, ...
      name="perf.$pin.record"; ((i == 1)) || name+=".$i"
      # -F 997: an odd rate, so sampling does not run in lockstep with periodic kernel work.
      # --no-buildid-cache: perf would otherwise copy binaries into ~/.debug, outside the lab's directories.
      lab_run "${cs[@]}" --case "traced=perf record -g" --case "rep=$i" "$name" -- \
        perf record -g -F 997 --no-buildid-cache -o "$data" -- \
        taskset -c "$c" "$BIN" -m 1 -N "$N" -t "$T" -p "$PORT" 127.0.0.1
    done
    # The flame graph: the first traced run's samples.
    first="$LAB_SCRATCH/perf-$rel-1.data"
    lab_run --stdout "$LAB_SCRATCH/perf-$rel.script" "perf.$pin.script" -- perf script -F "$LAB_PERF_STACKS" -i "$first" || continue
    lab_run --case tool=inferno --case "pin=$rel" --case "server_cpu=$CPU_A" --case "client_cpu=$c" \
      "perf.$pin.flame" -- "$LAB_PY" -m labkit flame --perf-script "$LAB_SCRATCH/perf-$rel.script" \
      --folded "$LAB_RUN/flame-$rel.folded" --svg "$LAB_RUN/flame-$rel.svg" \
      --title "lat_tcp client, server on CPU $CPU_A, client on CPU $c"
  done
  lab_unwind "$mark"
}

group_strace() {
  need_bin strace || return 0
  if ((LAB_QUICK)); then lab_skip strace "quick mode: no claim reads strace -c's table"; return 0; fi
  lab_require strace cmd:strace cmd:taskset || return 0
  # The client's CPU for both the traced and the untraced runs (exercise 1 changes it).
  local c=$CPU_B rel mark i name
  rel=$(relation_to "$c")
  mark=$(lab_mark)
  start_server strace.server "$CPU_A" "$PORT" || return 0
  local cs=(--case experiment=strace --case tool=lat_tcp --case msize=1 --case "pin=$rel"
    --case "server_cpu=$CPU_A" --case "client_cpu=$c")
  for ((i = 1; i <= EXTRA; i++)); do
    lab_run "${cs[@]}" --case traced=none --case "rep=$i" "strace.untraced.$i" -- \
      taskset -c "$c" "$BIN" -m 1 -N "$N" -t "$T" -p "$PORT" 127.0.0.1
    # The first traced run is "strace" (the page shows its output), the others strace.2, ...
    name=strace; ((i == 1)) || name="strace.$i"
    # strace -c's table goes to raw/<step>.summary (record.py reads it beside the step's output).
    lab_run "${cs[@]}" --case "traced=strace -c" --case "rep=$i" "$name" -- \
      strace -c -o "$LAB_RUN/raw/$name.summary" taskset -c "$c" "$BIN" -m 1 -N "$N" -t "$T" -p "$PORT" 127.0.0.1
  done
  lab_unwind "$mark"
}

# A round trip is two wake-ups: each side sleeps in read() until the other's write wakes it.
# perf sched record (every CPU's scheduler events) through one short pinned run, same CPU and
# other CPU, then perf sched timehist -s: per task, how often it was switched in and how long it
# ran, and per CPU how long it was idle; the rest of the run's time the task was waiting. Then
# every switch (timehist --state, megabytes: kept in the scratch directory) reduced to the
# lat_tcp threads' delays from a wake-up to running (labkit/parsers/perf_sched_timehist.py).
# (perf sched latency gives that delay per task too, but keeps only a handful of a cross-CPU
# ping-pong's wake-ups and reports the rest as "context switch bugs".) The cpuidle driver and
# governor say what a woken idle CPU goes through first (a VM's haltpoll governor may poll
# before it halts the vCPU, for at most its guest_halt_poll_ns; 0 turns the polling off), and
# the haltpoll modules' parameters, where loaded, say how long it polls (cpuidle_haltpoll's
# force: the driver was asked for on the command line rather than by the hypervisor's hint).
group_wakeup() {
  need_bin wakeup || return 0
  if ((LAB_QUICK)); then lab_skip wakeup "quick mode: no claim reads the scheduling delays"; return 0; fi
  if [[ -d /sys/devices/system/cpu/cpuidle ]]; then
    local m idle=(/sys/devices/system/cpu/cpuidle/)
    for m in haltpoll cpuidle_haltpoll; do
      [[ ! -d /sys/module/$m/parameters ]] || idle+=("/sys/module/$m/parameters/")
    done
    lab_run wakeup.cpuidle -- grep -r . "${idle[@]}"
  else
    lab_skip wakeup.cpuidle "no /sys/devices/system/cpu/cpuidle: the kernel has no cpuidle driver"
  fi
  lab_require wakeup root perf tracefs cmd:taskset || return 0
  local pin c rel mark data
  mark=$(lab_mark)
  start_server wakeup.server "$CPU_A" "$PORT" || return 0
  for pin in same other; do
    if [[ $pin == same ]]; then c=$CPU_A rel=same-cpu; else c=$CPU_B rel=$REL_B; fi
    if [[ $pin == other && $CPU_B == "$CPU_A" ]]; then lab_skip wakeup.other "only one CPU: no other CPU to compare"; continue; fi
    data="$LAB_SCRATCH/sched-$rel.data"
    lab_run --case experiment=wakeup --case tool=lat_tcp --case msize=1 --case "pin=$rel" \
      --case "server_cpu=$CPU_A" --case "client_cpu=$c" --case "traced=perf sched record" \
      "wakeup.$pin.record" -- perf sched record --no-buildid-cache -o "$data" -- \
      taskset -c "$c" "$BIN" -m 1 -N 1 -t "$T" -p "$PORT" 127.0.0.1 || continue
    lab_run "wakeup.$pin.timehist" -- perf sched timehist -i "$data" -s
    # The wait from each wake-up to running on a CPU: the delay the scheduler adds to every hop
    # of a round trip that sleeps between messages.
    lab_run --stdout "$LAB_SCRATCH/timehist-$rel.txt" "wakeup.$pin.switches" -- \
      perf sched timehist -i "$data" --state --no-call-graph || continue
    lab_run --case experiment=wakeup --case tool=perf-sched-timehist --case "pin=$rel" \
      --case "server_cpu=$CPU_A" --case "client_cpu=$c" "wakeup.$pin.delay" -- \
      "$LAB_PY" -m labkit.parsers.perf_sched_timehist --comm lat_tcp "$LAB_SCRATCH/timehist-$rel.txt"
  done
  lab_unwind "$mark"
}

group_sockperf() {
  need_bin sockperf || return 0
  lab_require sockperf cmd:sockperf cmd:taskset || return 0
  local pin c rel i mark sport secs
  secs=$(lab_quick 1 3)
  [[ $CPU_B != "$CPU_A" ]] || lab_skip sockperf.other "only one CPU"
  mark=$(lab_mark)
  # A sockperf server and a lat_tcp server, both on CPU_A, for the whole group.
  sport=$(lab_free_port $((PORT + 1)))
  lab_spawn sockperf.server -- taskset -c "$CPU_A" sockperf server -i 127.0.0.1 -p "$sport" --tcp
  lab_wait_for "$LAB_RUN/raw/sockperf.server.out" "[Ss]erver|listen|socket" 5 || sleep 1
  start_server sockperf.lat_tcp-server "$CPU_A" "$PORT" || { lab_unwind "$mark"; return 0; }
  for ((i = 1; i <= REPS; i++)); do
    for pin in same other; do
      if [[ $pin == same ]]; then c=$CPU_A rel=same-cpu; else c=$CPU_B rel=$REL_B; fi
      [[ $pin == same || $CPU_B != "$CPU_A" ]] || continue
      local cs=(--case experiment=sockperf --case msize=14 --case "pin=$rel" --case "server_cpu=$CPU_A"
        --case "client_cpu=$c" --case "rep=$i")
      lab_run "${cs[@]}" --case tool=sockperf "sockperf.$pin.$i" -- \
        taskset -c "$c" sockperf ping-pong -i 127.0.0.1 -p "$sport" --tcp -m 14 -t "$secs"
      lab_run "${cs[@]}" --case tool=lat_tcp "sockperf.$pin.lat_tcp.$i" -- \
        taskset -c "$c" "$BIN" -m 14 -N "$N" -t "$T" -p "$PORT" 127.0.0.1
    done
  done
  lab_unwind "$mark"
}

lab_main "$@"
