#!/usr/bin/env bash
# labs/optane_kyber/run.sh: QD1 4k read latency per I/O scheduler, read with perf and flame
# graphs; a subsecond-offset heat map of a CPU burst; and what perf itself costs.
#
#   sudo labs/optane_kyber/run.sh [--quick] [--out DIR] [--only GROUP,..] [--host LABEL]
#
# What it does, one step per command (each kept with its output under <out>/optane_kyber/raw/):
#   device    a private tmpfs in the scratch dir, a file on it filled with random bytes, a
#             loop device over the file with --direct-io=on (the device under test: NOT an
#             Optane drive); its dio flag, schedulers and io_poll
#   sched     fio 4k random read, QD1, pvsync2 --hipri, interleaved (none, mq-deadline, kyber,
#             bfq, none, ...): none, mq-deadline and kyber 20 times, bfq 10 (quick mode: no
#             bfq); fio pinned to one CPU (taskset) and the loop device's worker confined to
#             the same CPU
#   flame     perf record -g -F 997 of fio (pinned as in sched) with none and with kyber ->
#             flame graphs and a differential flame graph (inferno); later repetitions are
#             only folded, so that kyber's share of the samples has one value per repetition
#   trace     perf stat -a of kyber:* and block:block_rq_issue on our device, per I/O
#   ipc       perf stat instructions, cycles, cache misses per scheduler (needs PMU counters)
#   heat      compile burst.c; perf record -a -g -k CLOCK_MONOTONIC over burst (busy 200 ms
#             every second) -> subsecond-offset heat map (a band), flame graph of the hottest
#             burst; then over one busy second among three quiet ones before and after it
#             (burst -n 1 -b 1000 -o 0 -q 3) -> its heat map (a column), and its perf script
#             --header output kept in the run directory (heat-1s.perf-script), for FlameScope
#   overhead  the fio job plain, under perf stat, under plain perf record (perf's defaults, as
#             the original ran it), under perf record -g at 997 and 9973 Hz; numjobs 1
#             (pinned as in sched) and 2, interleaved (quick mode: the cases the claims read)
#   sysbench  sysbench cpu plain, under plain perf record and under perf record -g at 997 and
#             9973 Hz, interleaved (quick mode: plain and perf record)
# A case a claim reads runs as many times in quick mode as in full (sched 20, flame and
# trace 5, heat 10 bursts and the one busy second, overhead 8,
# sysbench 10): quick mode runs fewer cases (bfq, ipc, the
# profilers no claim compares) and shorter fio jobs, never fewer repetitions.
# Every measuring step carries its case as fields (lab_run --case): record.py reads those.
# The scheduler and the workqueue CPU mask are restored, the loop device detached and the
# tmpfs unmounted on exit, error, Ctrl-C and TERM. perf record runs with --no-buildid-cache so
# that nothing is written to ~/.debug (perf's build-id cache) outside the scratch and run
# directories.
# shellcheck disable=SC2015 # "step && step || undo": the undo runs when any of the steps failed
# shellcheck source=../lib/lab.sh disable=SC2317 # group_* functions are called by lab_main
source "$(dirname "$0")/../lib/lab.sh"

lab_define optane_kyber "optane_kyber: QD1 latency per I/O scheduler, flame graphs, a heat map, perf's own cost" \
  fio perf gcc losetup sysbench inferno-flamegraph
lab_group device "loop device (--direct-io=on) over a file on a private tmpfs" always
lab_group sched "fio 4k randread QD1 pvsync2 --hipri per scheduler, pinned, repetitions interleaved"
lab_group flame "perf record -g of fio, none vs kyber: flame graphs, differential flame graph"
lab_group trace "perf stat -a: kyber and block tracepoints per I/O"
lab_group ipc "perf stat: IPC and cache misses per scheduler (PMU counters)"
lab_group heat "perf record -a -g over a CPU burst: heat map, flame graph of the hottest burst"
lab_group overhead "perf's cost on fio: plain, perf stat, perf record (defaults), perf record -g at 997 and 9973 Hz"
lab_group sysbench "perf's cost on sysbench cpu: plain, perf record (defaults), perf record -g at 997 and 9973 Hz"

IMG_MIB=256          # size of the backing file (MiB): in RAM, on the lab's own tmpfs
DEV="" QDIR="" SCHEDS="" DEVT="" BURST=""
# The job of the original investigation: 4 KiB random reads, one at a time (QD1), O_DIRECT,
# preadv2() with RWF_HIPRI (fio's pvsync2 --hipri), which asked the kernel to poll for the
# completion; since 5.19 (2022) the kernel ignores RWF_HIPRI for synchronous direct I/O.
FIO_QD1=(--name=qd1 --rw=randread --bs=4k --iodepth=1 --direct=1 --ioengine=pvsync2 --hipri
         --time_based --percentile_list=50:99:99.9 --output-format=json)
# The CPU that fio runs on wherever its runs are compared (taskset -c): the last CPU this run
# may use. The loop device hands every read to a worker thread of an unbound workqueue, which
# the scheduler may place on fio's CPU or on another one; a whole run tends to stay in one
# placement, and a hand-off to another CPU (waking an idle vCPU on the reference VM) costs
# more than the scheduler under test, so unpinned runs fall into two latency modes. So the
# compared runs also confine the unbound workers to the same CPU (confine_workers).
PIN=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status); PIN=${PIN##*[,-]}
PINNED=(taskset -c "$PIN")
WQMASK=/sys/devices/virtual/workqueue/cpumask
# perf record's fixed options: nothing written into ~/.debug (--no-buildid-cache), and, where
# perf has it (5.1 and later), no side-band recording of BPF program loads (--no-bpf-event): at
# its start that reads every loaded BPF program (most of a second per perf record on the
# reference host), and the original's perf (4.15) had no such recording. Set by perf_rec.
PERF_REC=()

group_device() {
  lab_require device.tmpfs root loop cmd:losetup cmd:fio cmd:taskset || return 0
  local mnt="$LAB_SCRATCH/tmpfs"
  lab_mount device.tmpfs "$mnt" -- -t tmpfs -o "size=$((IMG_MIB + 16))m,mode=0700" tmpfs || return 0
  # Real bytes, not a sparse file: reads of a hole in tmpfs would not touch any data page.
  lab_run device.fill -- dd if=/dev/urandom of="$mnt/disk.img" bs=1M count="$IMG_MIB" status=none || return 0
  lab_loop_attach device.loop "$mnt/disk.img" --direct-io=on || return 0
  local name; name=$(basename "$LAB_LOOP")
  QDIR="/sys/block/$name/queue"
  lab_run --case experiment=device --case knob=dio device.dio -- cat "/sys/block/$name/loop/dio" || return 0
  lab_run --case experiment=device --case knob=scheduler device.schedulers -- cat "$QDIR/scheduler" || return 0
  lab_run --case experiment=device --case knob=io_poll device.io_poll -- cat "$QDIR/io_poll" || return 0
  SCHEDS=$(tr -d '[]' < "$LAB_RUN/raw/device.schedulers.out")
  # dev_t as the kernel's tracepoints print it: major << 20 | minor (for perf stat --filter).
  DEVT=$(( ($(stat -c '0x%t' "$LAB_LOOP") << 20) | $(stat -c '0x%T' "$LAB_LOOP") ))
  DEV=$LAB_LOOP
}

# perf_rec: fill PERF_REC (once; call it after lab_require ... perf).
perf_rec() {
  ((${#PERF_REC[@]})) && return 0
  local help
  help=$(perf record -h 2>&1) || true   # the usage text; perf exits 129 after printing it
  PERF_REC=(perf record --no-buildid-cache)
  if [[ $help == *--no-bpf-event* ]]; then PERF_REC+=(--no-bpf-event); fi
}

# cpu_mask CPU: a sysfs cpumask (hex, in comma-separated 32-bit groups) holding only CPU.
cpu_mask() {
  local mask i
  printf -v mask '%x' $((1 << ($1 % 32)))
  for ((i = 0; i < $1 / 32; i++)); do mask+=",00000000"; done
  echo "$mask"
}

# confine_workers STEP: run every unbound workqueue's workers (the loop device's among them) on
# CPU $PIN only, as step STEP, until the caller unwinds; the mask the host asked for
# (cpumask_requested where the kernel has it, else cpumask) is restored on every exit path.
# Returns 1 (step skipped) where the knob is missing.
confine_workers() {
  local old
  [[ -w $WQMASK ]] || { lab_skip "$1" "no writable $WQMASK: the loop device's worker is not confined"; return 1; }
  old=$(cat "${WQMASK}_requested" 2>/dev/null || cat "$WQMASK") || { lab_skip "$1" "cannot read $WQMASK"; return 1; }
  lab_defer "restore $WQMASK to $old" lab__write_file "$WQMASK" "$old"
  lab_run "$1" -- sh -c "echo $(cpu_mask "$PIN") > $WQMASK"
}

need_dev() { [[ -n "$DEV" ]] || { lab_skip "$1" "no test device (see the device steps)"; return 1; }; }

# offers STEP SCHEDULER: is SCHEDULER in the device's list? (else record STEP as skipped)
offers() {
  [[ " $SCHEDS " == *" $2 "* ]] && return 0
  lab_skip "$1" "the device does not offer the $2 scheduler (offers: $SCHEDS); for kyber try: modprobe kyber-iosched"
  return 1
}

group_sched() {
  need_dev sched || return 0
  local reps rt i s mark scheds
  # The claims read one ratio per repetition, kyber / none and kyber / mq-deadline: 20
  # repetitions of those three, bfq (for the page's table) in the first 10. Quick mode runs the
  # same repetitions of the three, shorter: half a second at QD1 is still thousands of reads,
  # plenty for a p50.
  reps=20; rt=$(lab_quick 500ms 2)
  scheds=$SCHEDS
  if ((LAB_QUICK)); then
    scheds=$(tr ' ' '\n' <<<"$SCHEDS" | grep -vx bfq | tr '\n' ' ')
    [[ " $SCHEDS " != *" bfq "* ]] || lab_skip sched.bfq "quick mode: no claim reads bfq"
  fi
  mark=$(lab_mark)
  confine_workers sched.workers || true
  # Interleaved: every repetition runs every scheduler once, so slow drift of the host
  # (other load, frequency, caches) spreads over all schedulers instead of posing as an effect.
  for ((i = 1; i <= reps; i++)); do
    for s in $scheds; do
      ((i <= 10)) || [[ $s != bfq ]] || continue
      offers "sched.$s.$i" "$s" || continue
      lab_set_knob "sched.$s.$i.set" "$QDIR/scheduler" "$s" || continue
      lab_run --case experiment=sched --case "scheduler=$s" --case "rep=$i" --case "cpu=$PIN" \
        "sched.$s.$i" -- "${PINNED[@]}" fio "${FIO_QD1[@]}" --filename="$DEV" --runtime="$rt"
    done
  done
  lab_unwind "$mark"
}

group_flame() {
  need_dev flame || return 0
  lab_require flame perf inferno || return 0
  perf_rec
  local s i reps mark data script rt c; rt=$(lab_quick 500ms 3); reps=5
  mark=$(lab_mark)
  confine_workers flame.workers || true
  # Repetition 1 of each scheduler is the profile shown (reports, flame graphs, the diff);
  # later repetitions are only folded: each gives one more value of kyber's share of the
  # samples. Interleaved like the sched group: none, kyber, none, kyber, ...
  for ((i = 1; i <= reps; i++)); do
    for s in none kyber; do
      offers "flame.$s.$i" "$s" || continue
      lab_set_knob "flame.$s.$i.set" "$QDIR/scheduler" "$s" || continue
      c=(--case experiment=flame --case "scheduler=$s" --case "rep=$i")
      if ((i > 1)); then
        data="$LAB_SCRATCH/flame-$s.$i.data" script="$LAB_SCRATCH/flame-$s.$i.script"
        lab_run "${c[@]}" --case tool=perf-record --case "cpu=$PIN" "flame.$s.$i.record" -- \
          "${PERF_REC[@]}" -g -F 997 -o "$data" -- \
          "${PINNED[@]}" fio "${FIO_QD1[@]}" --filename="$DEV" --runtime="$rt" || continue
        lab_run --stdout "$script" "flame.$s.$i.script" -- perf script -F "$LAB_PERF_STACKS" --max-stack 48 -i "$data" || continue
        lab_run --stdout "$LAB_RUN/flame-$s.$i.folded" "${c[@]}" --case tool=fold --case "folded=flame-$s.$i.folded" \
          "flame.$s.$i.fold" -- inferno-collapse-perf --all "$script"
        rm -f "$data" "$script"
        continue
      fi
      data="$LAB_SCRATCH/flame-$s.data"
      # -F 997: an odd rate, so sampling does not run in lockstep with periodic work (the
      # 1000 Hz or 250 Hz tick, timers); -g: call stacks (frame pointers).
      lab_run "${c[@]}" --case tool=perf-record --case "cpu=$PIN" "flame.$s.record" -- \
        "${PERF_REC[@]}" -g -F 997 -o "$data" -- \
        "${PINNED[@]}" fio "${FIO_QD1[@]}" --filename="$DEV" --runtime="$rt" || continue
      if [[ $s == kyber ]]; then
        # perf report's two views of the same samples: Children (samples with the function
        # anywhere on the stack) next to Self; then the call graph, fractal (each branch's
        # percentage relative to its parent), callee order (from the sampled function down).
        # --percent-limit 5 on both: at 15 the fractal report printed no entry at all (no
        # function held that share of the samples).
        lab_run "${c[@]}" --case tool=perf-report "flame.$s.report" -- perf report -i "$data" --stdio --children \
          --fields overhead_children,overhead,sym -g none --percent-limit 5
        lab_run "${c[@]}" --case tool=perf-report "flame.$s.fractal" -- perf report -i "$data" --stdio --no-children \
          --fields overhead,sym -g fractal,0.5,callee --percent-limit 5
      fi
      # --max-stack 48: deeper than any real stack here; a walk through code built without
      # frame pointers can follow garbage up to perf's limit (127 frames) and would draw a
      # tall thin tower of [unknown] frames.
      lab_run --stdout "$LAB_SCRATCH/flame-$s.script" "flame.$s.script" -- perf script -F "$LAB_PERF_STACKS" --max-stack 48 -i "$data" || continue
      lab_run "${c[@]}" --case tool=flamegraph --case "folded=flame-$s.folded" --case "svg=flame-$s.svg" \
        "flame.$s.flame" -- "$LAB_PY" -m labkit flame --perf-script "$LAB_SCRATCH/flame-$s.script" \
        --folded "$LAB_RUN/flame-$s.folded" --svg "$LAB_RUN/flame-$s.svg" \
        --title "fio 4k randread QD1 pvsync2 --hipri on a loop device, scheduler $s"
    done
  done
  lab_unwind "$mark"
  if [[ -f "$LAB_RUN/flame-none.folded" && -f "$LAB_RUN/flame-kyber.folded" ]]; then
    lab_run --case experiment=flame --case tool=diff-flamegraph --case folded=flame-diff.folded --case svg=flame-diff.svg \
      flame.diff -- "$LAB_PY" -m labkit diff-flame --before "$LAB_RUN/flame-none.folded" \
      --after "$LAB_RUN/flame-kyber.folded" --folded "$LAB_RUN/flame-diff.folded" --svg "$LAB_RUN/flame-diff.svg" \
      --title "kyber vs none: red = more samples with kyber, blue = fewer"
  fi
}

group_trace() {
  need_dev trace || return 0
  lab_require trace perf tracefs || return 0
  if ! perf list 'kyber:*' 2>/dev/null | grep -q 'kyber:kyber_latency'; then
    lab_skip trace "this kernel has no kyber tracepoints (kyber not built or not loaded)"; return 0
  fi
  local reps rt i s mark
  reps=5; rt=$(lab_quick 500ms 2)
  mark=$(lab_mark)
  for ((i = 1; i <= reps; i++)); do
    for s in none kyber; do
      offers "trace.$s.$i" "$s" || continue
      lab_set_knob "trace.$s.$i.set" "$QDIR/scheduler" "$s" || continue
      # -a counts every CPU: kyber's latency events fire from its timer, in whatever task runs
      # then, and a queue run deferred to kblockd issues in a worker; --filter keeps only
      # events of our device (dev == major<<20|minor), not the host's disk.
      lab_run --case experiment=trace --case "scheduler=$s" --case "rep=$i" \
        "trace.$s.$i" -- perf stat -x, -o "$LAB_RUN/raw/trace.$s.$i.csv" \
        -e 'kyber:*' --filter "dev == $DEVT" -e block:block_rq_issue --filter "dev == $DEVT" -a -- \
        fio "${FIO_QD1[@]}" --filename="$DEV" --runtime="$rt"
    done
  done
  lab_unwind "$mark"
}

group_ipc() {
  need_dev ipc || return 0
  lab_require ipc perf pmu || return 0
  if ((LAB_QUICK)); then lab_skip ipc "quick mode: no claim reads IPC or cache misses"; return 0; fi
  local s mark rt; rt=$(lab_quick 2 5)
  mark=$(lab_mark)
  confine_workers ipc.workers || true
  for s in none kyber; do
    offers "ipc.$s" "$s" || continue
    lab_set_knob "ipc.$s.set" "$QDIR/scheduler" "$s" || continue
    lab_run --case experiment=ipc --case "scheduler=$s" --case "cpu=$PIN" "ipc.$s" -- perf stat -x, -o "$LAB_RUN/raw/ipc.$s.csv" \
      -e instructions,cycles,cache-references,cache-misses -- "${PINNED[@]}" fio "${FIO_QD1[@]}" --filename="$DEV" --runtime="$rt"
  done
  lab_unwind "$mark"
}

group_heat() {
  # -a (every CPU) needs root, or perf_event_paranoid <= 0.
  lab_require heat root perf inferno cmd:gcc || return 0
  perf_rec
  local n data range mark
  n=10   # bursts: one sample per burst for the claims, quick or full
  mark=$(lab_mark)
  # The program is built in the run directory: perf from before mid-2024 (Debian 12's 6.1)
  # takes every file under /tmp/perf-* for a JIT map (/tmp/perf-PID.map) and shows no symbols
  # for it, and a reader's --scratch may be anywhere (lab.sh's own default is /tmp/pcb-*).
  BURST="$LAB_RUN/bin/burst"
  mkdir -p "$LAB_RUN/bin"
  lab_defer "remove $LAB_RUN/bin" rm -rf "$LAB_RUN/bin"
  lab_run heat.build -- gcc -O2 -g -fno-omit-frame-pointer -Wall -Wextra -std=c11 \
    -o "$BURST" "$LAB_DIR/burst.c" || { lab_unwind "$mark"; return 0; }
  data="$LAB_SCRATCH/heat.data"
  # -k CLOCK_MONOTONIC: sample times on the clock burst uses, so its windows line up.
  lab_run --case experiment=heat --case tool=perf-record heat.record -- "${PERF_REC[@]}" -a -g -F 997 -k CLOCK_MONOTONIC -o "$data" -- \
    "$BURST" -n "$n" -b 200 -o 400 &&
  lab_run --stdout "$LAB_SCRATCH/heat.script" heat.script -- perf script -F "$LAB_PERF_STACKS_ALL" --max-stack 48 -i "$data" &&
  lab_run --case experiment=heat --case tool=heatmap heat.map -- "$LAB_PY" -m labkit.heatmap --perf-script "$LAB_SCRATCH/heat.script" \
    --svg "$LAB_RUN/heatmap.svg" --json "$LAB_RUN/heatmap.json" --band 400,600 \
    --title "perf record -a -g -F 997, every CPU, idle samples left out" ||
    { lab_unwind "$mark"; return 0; }
  range=$(head -n 1 "$LAB_RUN/raw/heat.map.out")
  lab_run --stdout "$LAB_SCRATCH/heat-range.script" heat.range-script -- perf script -F "$LAB_PERF_STACKS_ALL" --max-stack 48 -i "$data" --time "$range" &&
    lab_run --case experiment=heat --case tool=flamegraph --case "profile=hottest range" \
      --case folded=heat-range.folded --case svg=heat-range.svg heat.range-flame -- "$LAB_PY" -m labkit flame --perf-script "$LAB_SCRATCH/heat-range.script" \
    --folded "$LAB_RUN/heat-range.folded" --svg "$LAB_RUN/heat-range.svg" \
    --title "every CPU, only the hottest burst's time range $range s"
  lab_run --case experiment=heat --case tool=flamegraph --case "profile=whole recording" \
    --case folded=heat-all.folded --case svg=heat-all.svg heat.all-flame -- "$LAB_PY" -m labkit flame --perf-script "$LAB_SCRATCH/heat.script" \
    --folded "$LAB_RUN/heat-all.folded" --svg "$LAB_RUN/heat-all.svg" \
    --title "every CPU, the whole recording"
  heat_column
  lab_unwind "$mark"
}

# heat_column: the ceph-osd case's shape, one busy second (burst -n 1 -b 1000 -o 0) between
# three quiet seconds before and three after it (-q 3), recorded as the bursts above were. In a
# subsecond-offset heat map that second is a column: every slice of it hot, the same slices of
# the other seconds not. Its perf script output is kept whole, with --header (what FlameScope
# reads: copy it into FlameScope's examples/ folder), in the run directory; the map is drawn
# from that file, with no range picked (the rule that picks one is made for a recurring burst).
heat_column() {
  local data="$LAB_SCRATCH/heat-1s.data" c=(--case "experiment=one-second burst")
  lab_run "${c[@]}" --case tool=perf-record heat.1s.record -- "${PERF_REC[@]}" -a -g -F 997 -k CLOCK_MONOTONIC \
    -o "$data" -- "$BURST" -n 1 -b 1000 -o 0 -q 3 &&
  lab_run --stdout "$LAB_RUN/heat-1s.perf-script" "${c[@]}" --case tool=perf-script heat.1s.script -- \
    perf script -F "$LAB_PERF_STACKS_ALL" --header --max-stack 48 -i "$data" &&
  lab_run "${c[@]}" --case tool=heatmap heat.1s.map -- "$LAB_PY" -m labkit.heatmap \
    --perf-script "$LAB_RUN/heat-1s.perf-script" --svg "$LAB_RUN/heatmap-1s.svg" --json "$LAB_RUN/heatmap-1s.json" \
    --no-range --title "one busy second among quiet ones: perf record -a -g -F 997, idle samples left out"
  rm -f "$data"
}

# The profilers the overhead and sysbench groups run their job under (short name → the label
# their steps' cases carry; record.py keeps the same table).
declare -A PROFILER=([none]=plain [stat]="perf stat" [rec]="record (defaults)" [rec997]="record 997 Hz"
                     [rec9973]="record 9973 Hz")

group_overhead() {
  need_dev overhead || return 0
  lab_require overhead perf || return 0
  perf_rec
  local reps rt i nj p name job pin profs c mark
  # Quick mode runs only the cases the claims compare (one job: plain, perf record, and perf
  # record -g at both rates; two jobs: plain and perf record), each as often as in full.
  reps=8; rt=$(lab_quick 500ms 3)
  for ((i = 1; i <= reps; i++)); do
    for nj in 1 2; do
      profs=$(lab_quick "none rec rec997 rec9973" "none stat rec rec997 rec9973")
      ((nj == 1)) || profs=$(lab_quick "none rec" "none stat rec rec997 rec9973")
      # One job runs as in the sched group: on one CPU, the loop device's worker with it. Two
      # jobs are the load of the whole machine and run where the kernel puts them.
      pin=() mark=$(lab_mark)
      if ((nj == 1)); then
        pin=("${PINNED[@]}")
        confine_workers "overhead.j1.workers.$i" || true
      fi
      for p in $profs; do
        name="overhead.j$nj.$p.$i"
        job=("${pin[@]}" fio "${FIO_QD1[@]}" --filename="$DEV" --runtime="$rt" --numjobs="$nj" --group_reporting)
        c=(--case experiment=overhead --case "numjobs=$nj" --case "profiler=${PROFILER[$p]}" --case "rep=$i")
        ((nj == 1)) && c+=(--case "cpu=$PIN")
        case $p in
          none) lab_run "${c[@]}" "$name" -- "${job[@]}" ;;
          stat) lab_run "${c[@]}" "$name" -- perf stat -x, -o "$LAB_RUN/raw/$name.csv" -- "${job[@]}" ;;
          # perf record as the original ran it: no call graphs, perf's default rate (4000 Hz)
          rec) lab_run "${c[@]}" "$name" -- "${PERF_REC[@]}" -o "$LAB_SCRATCH/overhead.data" -- "${job[@]}" ;;
          rec997) lab_run "${c[@]}" "$name" -- "${PERF_REC[@]}" -g -F 997 -o "$LAB_SCRATCH/overhead.data" -- "${job[@]}" ;;
          rec9973) lab_run "${c[@]}" "$name" -- "${PERF_REC[@]}" -g -F 9973 -o "$LAB_SCRATCH/overhead.data" -- "${job[@]}" ;;
        esac
      done
      lab_unwind "$mark"
    done
  done
}

group_sysbench() {
  # sysbench: Debian package sysbench (make setup installs it).
  lab_require sysbench cmd:sysbench perf || return 0
  perf_rec
  local reps secs i p c profs
  # Quick mode runs only the two cases the claim compares, each as often as in full.
  reps=10; secs=$(lab_quick 1 3)
  profs=$(lab_quick "none rec" "none rec rec997 rec9973")
  for ((i = 1; i <= reps; i++)); do
    for p in $profs; do
      c=(--case experiment=sysbench --case "profiler=${PROFILER[$p]}" --case "rep=$i")
      case $p in
        none) lab_run "${c[@]}" "sysbench.none.$i" -- sysbench cpu --threads=1 --time="$secs" run ;;
        rec) lab_run "${c[@]}" "sysbench.rec.$i" -- "${PERF_REC[@]}" -o "$LAB_SCRATCH/sysbench.data" -- \
          sysbench cpu --threads=1 --time="$secs" run ;;
        rec997) lab_run "${c[@]}" "sysbench.rec997.$i" -- "${PERF_REC[@]}" -g -F 997 -o "$LAB_SCRATCH/sysbench.data" -- \
          sysbench cpu --threads=1 --time="$secs" run ;;
        rec9973) lab_run "${c[@]}" "sysbench.rec9973.$i" -- "${PERF_REC[@]}" -g -F 9973 -o "$LAB_SCRATCH/sysbench.data" -- \
          sysbench cpu --threads=1 --time="$secs" run ;;
      esac
    done
  done
}

lab_main "$@"
