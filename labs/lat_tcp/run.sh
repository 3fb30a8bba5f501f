#!/usr/bin/env bash
# labs/lat_tcp/run.sh: TCP round-trip latency, the lmbench lat_tcp investigation, rerunnable.
#
#   sudo labs/lat_tcp/run.sh [--quick] [--out DIR] [--only GROUP,..] [--host LABEL]
#
# What it does, one step per command (each kept with its output under <out>/lat_tcp/raw/):
#   build     compile lat_tcp.c (our lmbench-method client/server) into the scratch dir
#   noserver  run the client with no server listening: it must fail and print no number
#   free      server and client left to the scheduler
#   pinned    server and client pinned with taskset to every CPU pair of the first 4 CPUs
#   msize     message sizes 1 B .. 64 KiB, server and client on one CPU and on two
#   veth      loopback vs a veth pair between two network namespaces (root), on one CPU
#   perf      perf record -g of the client, same CPU vs other CPU -> flame graphs (inferno)
#   strace    strace -c of the client: which system calls one round trip costs
#   sockperf  the same pinnings measured by sockperf ping-pong, an independent tool
# Servers are stopped by PID and namespaces deleted on exit, error, Ctrl-C and TERM.
# shellcheck disable=SC2015 # "step && step || undo": the undo runs when any of the steps failed
# shellcheck source=../lib/lab.sh disable=SC2317 # group_* functions are called by lab_main
source "$(dirname "$0")/../lib/lab.sh"

lab_define lat_tcp "lat_tcp: TCP round-trip latency (lmbench method), pinning, message size, veth" \
  gcc taskset perf strace sockperf ip inferno-flamegraph
lab_group build "compile lat_tcp.c" always
lab_group noserver "client with no server: must fail, print no number"
lab_group free "unpinned server and client, 1-byte messages"
lab_group pinned "taskset: every (server CPU, client CPU) pair of the first 4 CPUs"
lab_group msize "message size 1 B to 64 KiB, same CPU and other CPU"
lab_group veth "loopback vs veth between two network namespaces, same CPU (root)"
lab_group perf "perf record -g of the client: same CPU vs other CPU, flame graphs"
lab_group strace "strace -c of the client"
lab_group sockperf "cross-check with sockperf ping-pong on the same pinnings"

BIN="" PORT="" CPU_A=0 CPU_B=0 REL_AB=same-cpu T="" N=""

# shellcheck disable=SC2034 # REL_AB: the relation of CPU_A and CPU_B (topology.txt has it for record.py)
group_build() {
  # Timing per measurement: target seconds per sample (-t) and number of samples (-N).
  T=$(lab_quick 0.05 0.5)
  N=$(lab_quick 5 11)
  BIN="$LAB_SCRATCH/lat_tcp"
  lab_run build -- gcc -O2 -g -fno-omit-frame-pointer -Wall -Wextra -std=c11 -D_GNU_SOURCE \
    -o "$BIN" "$LAB_DIR/lat_tcp.c" || { BIN=""; return 1; }
  PORT=$(lab_free_port 31234)
  # CPU_A runs every server; CPU_B, the "other CPU" for a client, is the second online CPU if any.
  local pairs
  pairs=$("$LAB_PY" -m labkit topology --cpus 4)
  CPU_A=$(awk 'NR==1{print $1}' <<<"$pairs")
  read -r _ CPU_B REL_AB < <(awk -v a="$CPU_A" '$1==a && $2!=a {print; exit}' <<<"$pairs") || true
  [[ -n "$CPU_B" ]] || { CPU_B=$CPU_A; REL_AB=same-cpu; }
  printf '%s\n' "$pairs" > "$LAB_RUN/topology.txt"
}

need_bin() { [[ -n "$BIN" ]] || { lab_skip "$1" "build failed"; return 1; }; }

# start_server NAME CPU [ARGS...]: lat_tcp -s pinned to CPU ("" = unpinned), wait until it listens.
start_server() {
  local name=$1 cpu=$2; shift 2
  if [[ -n "$cpu" ]]; then
    lab_spawn "$name" -- taskset -c "$cpu" "$BIN" -s -p "$PORT" "$@"
  else
    lab_spawn "$name" -- "$BIN" -s -p "$PORT" "$@"
  fi
  lab_wait_for "$LAB_RUN/raw/$name.err" "listening" 5 || { lab_skip "$name" "server did not start: $(tail -n1 "$LAB_RUN/raw/$name.err")"; return 1; }
}

group_noserver() {
  need_bin noserver || return 0
  # Nothing listens on $PORT (lab_free_port checked): lmbench's client would print a latency here.
  lab_run --expect-fail noserver -- "$BIN" -N 3 -t 0.05 -p "$PORT" 127.0.0.1
  # The same in gdb (the gdb card reads it): connect's return value, and the client's exit.
  lab_require noserver.gdb cmd:gdb || return 0
  lab_run noserver.gdb -- gdb -q -batch -ex 'break connect' -ex run -ex finish -ex continue \
    --args "$BIN" -N 1 -t 0.05 -p "$PORT" 127.0.0.1
}

group_free() {
  need_bin free || return 0
  local mark; mark=$(lab_mark)
  start_server free.server "" || return 0
  # What htop would show: every 50 ms, the CPU (psr) each lat_tcp process last ran on.
  lab_spawn free.where -- sh -c 'while :; do ps -o pid=,ppid=,psr=,args= -C lat_tcp; echo; sleep 0.05; done'
  lab_run free -- "$BIN" -m 1 -N "$N" -t "$T" -p "$PORT" 127.0.0.1
  lab_unwind "$mark"
}

group_pinned() {
  need_bin pinned || return 0
  lab_require pinned cmd:taskset || return 0
  local s c mark
  # The topology the placements below are chosen from, as the tools print it (the taskset card).
  lab_run pinned.lscpu -- lscpu -e=CPU,CORE,SOCKET,NODE,CACHE,ONLINE
  if lab_require pinned.numa cmd:numactl; then lab_run pinned.numa -- numactl --hardware; fi
  while read -r s c _; do
    mark=$(lab_mark)
    start_server "pinned.s$s-c$c.server" "$s" || continue
    lab_run "pinned.s$s-c$c" -- taskset -c "$c" "$BIN" -m 1 -N "$N" -t "$T" -p "$PORT" 127.0.0.1
    lab_unwind "$mark"
  done < "$LAB_RUN/topology.txt"
}

group_msize() {
  need_bin msize || return 0
  lab_require msize cmd:taskset || return 0
  local sizes m mark pin c
  sizes=$(lab_quick "1 64 1024 16384 65536" "1 4 16 64 256 1024 4096 16384 65536")
  # Both placements: on one CPU the noise floor is low enough to see the copy cost;
  # across CPUs the wake-up dominates and varies more than the copies cost.
  for pin in same other; do
    if [[ $pin == same ]]; then c=$CPU_A; else c=$CPU_B; fi
    if [[ $pin == other && $CPU_B == "$CPU_A" ]]; then lab_skip msize.other "only one CPU"; continue; fi
    mark=$(lab_mark)
    start_server "msize.$pin.server" "$CPU_A" || continue
    for m in $sizes; do
      lab_run "msize.$pin.$m" -- taskset -c "$c" "$BIN" -m "$m" -N "$N" -t "$T" -p "$PORT" 127.0.0.1
    done
    lab_unwind "$mark"
  done
}

group_veth() {
  need_bin veth || return 0
  lab_require veth root netns cmd:ip cmd:taskset || return 0
  # Two namespaces joined by a veth pair, addressed from 198.18.0.0/15 (RFC 2544's
  # benchmarking range); nothing leaves this machine. Deleting a namespace deletes its veth end.
  local a="pcb-lat-a-$$" b="pcb-lat-b-$$" mark
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
  local inner; inner=$(lab_mark)
  # The server runs in namespace a: first bound to its loopback, then to the veth address.
  lab_spawn veth.server-lo -- ip netns exec "$a" taskset -c "$CPU_A" "$BIN" -s -p "$PORT"
  lab_wait_for "$LAB_RUN/raw/veth.server-lo.err" listening 5 &&
    lab_run veth.loopback -- ip netns exec "$a" taskset -c "$CPU_A" "$BIN" -m 1 -N "$N" -t "$T" -p "$PORT" 127.0.0.1
  lab_unwind "$inner"
  lab_spawn veth.server-veth -- ip netns exec "$a" taskset -c "$CPU_A" "$BIN" -s -p "$PORT" -b 198.18.0.1
  lab_wait_for "$LAB_RUN/raw/veth.server-veth.err" listening 5 &&
    lab_run veth.veth -- ip netns exec "$b" taskset -c "$CPU_A" "$BIN" -m 1 -N "$N" -t "$T" -p "$PORT" 198.18.0.1
  lab_unwind "$mark"
}

group_perf() {
  need_bin perf || return 0
  lab_require perf perf inferno cmd:taskset || return 0
  local pin c mark data
  for pin in same other; do
    if [[ $pin == same ]]; then c=$CPU_A; else c=$CPU_B; fi
    if [[ $pin == other && $CPU_B == "$CPU_A" ]]; then lab_skip perf.other "only one CPU: no other CPU to compare"; continue; fi
    mark=$(lab_mark)
    start_server "perf.$pin.server" "$CPU_A" || continue
    data="$LAB_SCRATCH/perf-$pin.data"
    # -F 997: an odd rate, so sampling does not run in lockstep with periodic kernel work.
    # --no-buildid-cache: perf would otherwise copy binaries into ~/.debug, outside the lab's directories.
    lab_run "perf.$pin.record" -- perf record -g -F 997 --no-buildid-cache -o "$data" -- \
      taskset -c "$c" "$BIN" -m 1 -N 3 -t "$(lab_quick 0.3 1)" -p "$PORT" 127.0.0.1
    lab_unwind "$mark"
    lab_run --stdout "$LAB_SCRATCH/perf-$pin.script" "perf.$pin.script" -- perf script -i "$data" || continue
    lab_run "perf.$pin.flame" -- "$LAB_PY" -m labkit flame --perf-script "$LAB_SCRATCH/perf-$pin.script" \
      --folded "$LAB_RUN/flame-$pin.folded" --svg "$LAB_RUN/flame-$pin.svg" \
      --title "lat_tcp client, server on CPU $CPU_A, client on CPU $c"
  done
}

group_strace() {
  need_bin strace || return 0
  lab_require strace cmd:strace cmd:taskset || return 0
  local mark; mark=$(lab_mark)
  start_server strace.server "$CPU_A" || return 0
  lab_run strace -- strace -c -o "$LAB_RUN/raw/strace.summary" \
    taskset -c "$CPU_B" "$BIN" -m 1 -N 3 -t "$(lab_quick 0.1 0.5)" -p "$PORT" 127.0.0.1
  lab_unwind "$mark"
}

group_sockperf() {
  need_bin sockperf || return 0
  lab_require sockperf cmd:sockperf cmd:taskset || return 0
  local pin c i mark sport reps secs
  reps=$(lab_quick 3 5); secs=$(lab_quick 1 3)
  sport=$(lab_free_port $((PORT + 1)))
  for pin in same other; do
    if [[ $pin == same ]]; then c=$CPU_A; else c=$CPU_B; fi
    if [[ $pin == other && $CPU_B == "$CPU_A" ]]; then lab_skip sockperf.other "only one CPU"; continue; fi
    mark=$(lab_mark)
    lab_spawn "sockperf.$pin.server" -- taskset -c "$CPU_A" sockperf server -i 127.0.0.1 -p "$sport" --tcp
    lab_wait_for "$LAB_RUN/raw/sockperf.$pin.server.out" "[Ss]erver|listen|socket" 5 || sleep 1
    for ((i = 1; i <= reps; i++)); do
      lab_run "sockperf.$pin.$i" -- taskset -c "$c" sockperf ping-pong -i 127.0.0.1 -p "$sport" --tcp -m 14 -t "$secs"
    done
    lab_unwind "$mark"
    mark=$(lab_mark)
    start_server "sockperf.$pin.lat_tcp-server" "$CPU_A" || continue
    lab_run "sockperf.$pin.lat_tcp" -- taskset -c "$c" "$BIN" -m 14 -N "$N" -t "$T" -p "$PORT" 127.0.0.1
    lab_unwind "$mark"
  done
}

lab_main "$@"
