#!/usr/bin/env bash
# labs/nvme_swiotlb/run.sh: NVMe reads halved by a kernel upgrade (swiotlb bounce buffers), rerunnable.
#
#   sudo labs/nvme_swiotlb/run.sh [--quick] [--out DIR] [--only GROUP,..] [--host LABEL]
#
# The investigation's funnel, one step per command (each kept with its output under
# <out>/nvme_swiotlb/raw/):
#   build    compile bounce.c, write the data file (dd conv=fsync), attach a loop device over it,
#            mount tracefs at /sys/kernel/tracing (and debugfs in the scratch dir) if not mounted
#   dd       dd, repeated: write (conv=fsync), drop caches, direct and buffered reads of the file
#            (cold and warm page cache), direct reads of the loop device; fincore shows the cache
#   strace   strace -c -w (calls, time per call) of buffered and direct dd, repeated and interleaved;
#            strace -T (every read's latency) once each
#   events   a private tracefs instance: block_rq_issue/complete filtered on the loop device,
#            sched_switch filtered on dd's PID (the original investigation's recipe)
#   btt      Q2C/D2C of the loop device: blktrace -> blkparse -> btt where blktrace works,
#            else the ftrace "blk" tracer in binary mode -> blkparse -> btt
#   fgraph   function_graph of ksys_read, where the kernel has that tracer
#   swiotlb  "am I bouncing?": boot options, kernel log, debugfs, swiotlb_bounced count during
#            direct reads (repeated), dma-ranges of PCIe nodes in the device tree (arm64)
#   bounce   bounce.c: O_DIRECT reads with and without one extra memcpy per I/O, 4 KiB..1 MiB,
#            from the disk file and from a private tmpfs (the "fast device")
#   tried    the knobs the original investigation tried: read_ahead_kb, scheduler, nice; the
#            settings compared are interleaved within each repetition
#   guest    the root cause itself, in arm64 QEMU guests with an emulated NVMe drive (labkit.guest):
#            kernels 5.10 (Debian bullseye) and 6.1 (bookworm) x three device trees:
#            plain (QEMU's own), dma-ranges (a 1 GiB PCIe DMA window: the upgrade's state) and
#            dma-ranges-wide (the window widened to cover all guest RAM: the original's fix); in
#            each configuration's first boot, labs/nvme_swiotlb/guest_job.sh runs dd, perf stat of
#            swiotlb_bounced, a trace of read()'s syscall tracepoints, function_graph of ksys_read
#            (and in full runs buffered reads, strace -c, blktrace/btt and perf record -g); four
#            more boots of each configuration read only (the boot is the unit of the claims that
#            compare configurations)
# A case a claim reads runs as many times in quick mode as in full (host dd, strace -c -w and
# swiotlb_bounced 5, bounce.c 15, read_ahead_kb, scheduler and nice 16; in the guests 5 boots of
# each configuration, each with 3 direct dd reads and 5 alternating rounds, 6 rounds of knobs,
# 6 counted and 5 traced reads in a first boot). Quick mode runs fewer cases, never fewer
# repetitions: it skips what no claim reads (dd's rewrites and loop-device reads, buffered
# strace -c, bounce.c on the disk file, block sizes but 1 MiB, read_ahead_kb settings but 16 and
# 4096, the boot-time knobs' and the positive control's boots) and reads less per read where the
# claims' effects stay clear (read_ahead_kb sweep, guest reads).
# Every measuring step carries its case as data (lab_run --case KEY=VALUE; inside the guests,
# guest_job.sh's steps are recorded by the same writer): record.py reads those, never a step's name.
# Every tracefs setting, sysfs knob, mount and loop device is put back on exit, error,
# Ctrl-C and TERM (the cleanup stack of labs/lib/lab.sh).
# PCB_TRACEFS=DIR uses DIR instead of /sys/kernel/tracing as the tracefs mount point (the tests
# use an unmounted directory there, to check that the lab mounts and unmounts it).
# shellcheck disable=SC2015 # "step && step || undo": the undo runs when any of the steps failed
# shellcheck source=../lib/lab.sh disable=SC2317 # group_* functions are called by lab_main
source "$(dirname "$0")/../lib/lab.sh"

lab_define nvme_swiotlb "nvme_swiotlb: dd, strace, ftrace, btt and a bounce-buffer model (swiotlb)" \
  dd strace perf blktrace blkparse btt fincore losetup gcc
lab_group build "compile bounce.c, write the data file, loop device, tracefs mount" always
lab_group dd "dd: write with conv=fsync, drop caches, buffered and direct reads, repeated"
lab_group strace "strace -c -w and strace -T of buffered and direct dd"
lab_group events "tracefs instance: block_rq_issue/complete on the loop device, sched_switch of dd"
lab_group btt "blktrace (or the ftrace blk tracer) -> blkparse -> btt: Q2C and D2C"
lab_group fgraph "function_graph of ksys_read (where available)"
lab_group swiotlb "am I bouncing? boot options, kernel log, debugfs, swiotlb_bounced, dma-ranges"
lab_group bounce "bounce model: O_DIRECT reads with and without one extra copy"
lab_group tried "things tried: read_ahead_kb sweep, scheduler, nice -n -20"
lab_group guest "arm64 QEMU guests, emulated NVMe: kernels 5.10 and 6.1 x device trees plain, dma-ranges, dma-ranges-wide"

BIN="" DATA="" MB=0 LOOP="" LOOPN="" DEVT="" TR="" DBG="" TRACE_BS_KB=0 REPS=0

# q VALUE: VALUE in single quotes, for the sh -c commands a reader can copy (values never hold ').
q() { printf "'%s'" "$1"; }


# tr_set NAME FILE VALUE [RESTORE]: write VALUE to a tracefs or sysfs FILE as step NAME. The
# file's current value (or RESTORE, e.g. "0" for an event filter) is written back on cleanup;
# the restore is registered before the write, so Ctrl-C between the two cannot leak it.
tr_set() {
  local name=$1 file=$2 value=$3 old
  if (($# >= 4)); then old=$4; else old=$(cat "$file") || { lab_skip "$name" "cannot read $file"; return 1; }; fi
  lab_defer "restore $file to '$old'" lab__write_file "$file" "$old"
  lab_run "$name" -- sh -c "echo $(q "$value") > $file"
}

# alive PID: the process exists and is not a zombie.
alive() { local st; st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [[ $st != Z ]]; }


group_build() {
  cd "$LAB_SCRATCH" || return 1
  export LC_ALL=C # dd's summary in the C locale: "N bytes (...) copied, S s, R MB/s"
  # 512 MiB in quick runs too: a small file just written reads at another speed on a virtual
  # disk (its host's cache), where the scheduler pair below stops being a fair test.
  MB=512
  REPS=5   # host steps a claim reads (dd, strace -c -w, swiotlb_bounced), quick or full
  BIN="$LAB_SCRATCH/bounce"
  lab_run build -- gcc -O2 -g -Wall -Wextra -std=c11 -D_GNU_SOURCE -o "$BIN" "$LAB_DIR/bounce.c" || BIN=""
  DATA="$LAB_SCRATCH/data.img"
  # Random data, so no layer below can shortcut zeros; fsync so the write reaches the disk.
  lab_run data -- dd if=/dev/urandom of="$DATA" bs=1M count="$MB" conv=fsync || { DATA=""; return 1; }
  if lab_require loop root loop cmd:losetup; then
    # --direct-io=on: the loop device reads its backing file with O_DIRECT, so a direct read of the
    # loop device reaches the disk (the file's page cache is not in the way).
    lab_loop_attach loop "$DATA" --direct-io=on && LOOP=$LAB_LOOP
    if [[ -n "$LOOP" ]]; then
      LOOPN=${LOOP#/dev/}
      # No I/O scheduler, the kernel's default for a device with several hardware queues, as an
      # NVMe drive usually has (the original's had none until it tried mq-deadline and kyber): a
      # loop device keeps whatever its queue was given before (a udev rule, an earlier run), and
      # blkparse then shows an extra action per request. Put back on exit.
      if grep -qw none "/sys/block/$LOOPN/queue/scheduler"; then
        lab_set_knob loop.scheduler "/sys/block/$LOOPN/queue/scheduler" none
      fi
      local mm; mm=$(cat "/sys/block/$LOOPN/dev")
      DEVT=$(( (${mm%%:*} << 20) | ${mm##*:} )) # the kernel's dev_t (MKDEV), as trace event filters see it
      # A request the block layer splits (X events) is not followed by btt, so the traced reads use the
      # largest block the loop device takes in one request, at most 1 MiB.
      local q_=/sys/block/$LOOPN/queue msk seg pg
      msk=$(cat "$q_/max_sectors_kb"); seg=$(cat "$q_/max_segments"); pg=$(getconf PAGESIZE)
      TRACE_BS_KB=1024
      ((msk < TRACE_BS_KB)) && TRACE_BS_KB=$msk
      ((seg * pg / 1024 < TRACE_BS_KB)) && TRACE_BS_KB=$((seg * pg / 1024))
      local p=1; while ((p * 2 <= TRACE_BS_KB)); do p=$((p * 2)); done; TRACE_BS_KB=$p
      printf 'loop=%s devt=%s max_sectors_kb=%s max_segments=%s page=%s trace_bs_kb=%s\n' \
        "$LOOP" "$DEVT" "$msk" "$seg" "$pg" "$TRACE_BS_KB" > "$LAB_RUN/loop.txt"
    fi
  fi
  # tracefs: perf, the events instance and the blk tracer need it. Mounted here only if it is not
  # already (so perf does not mount it for us and leave it behind); unmounted on exit only then.
  if [[ $EUID -eq 0 ]] && grep -qw tracefs /proc/filesystems; then
    TR=${PCB_TRACEFS:-/sys/kernel/tracing}
    if ! mountpoint -q "$TR"; then
      lab_mount tracefs "$TR" -- -t tracefs nodev || TR=""
    fi
  fi
  # debugfs (blktrace's relay files, /sys/kernel/debug/swiotlb): the usual place if mounted, else a
  # private mount in the scratch dir.
  if [[ $EUID -eq 0 ]] && grep -qw debugfs /proc/filesystems; then
    if mountpoint -q /sys/kernel/debug; then
      DBG=/sys/kernel/debug
    else
      DBG="$LAB_SCRATCH/debugfs"
      lab_mount debugfs "$DBG" -- -t debugfs nodev || DBG=""
    fi
  fi
  return 0
}

need_data() { [[ -n "$DATA" ]] || { lab_skip "$1" "no data file (the data step failed)"; return 1; }; }
need_loop() { [[ -n "$LOOP" ]] || { lab_skip "$1" "no loop device (needs root and loop devices)"; return 1; }; }
need_tr() { [[ -n "$TR" && -w "$TR/tracing_on" ]] || { lab_skip "$1" "tracefs not available (needs root; /sys/kernel/tracing)"; return 1; }; }

# drop NAME: empty the page cache before a cold read: the whole cache as root (its own step, as in
# the original investigation), else only the data file's pages (posix_fadvise DONTNEED via dd).
drop() {
  if [[ $EUID -eq 0 ]]; then
    lab_run "$1" -- sh -c 'echo 3 > /proc/sys/vm/drop_caches'
  else
    lab_run "$1" -- dd if="$DATA" iflag=nocache count=0 status=none
  fi
}

group_dd() {
  need_data dd || return 0
  local i f
  for ((i = 1; i <= REPS; i++)); do
    f=(--case tool=dd --case experiment=dd --case "rep=$i")
    if ((LAB_QUICK)); then
      ((i > 1)) || lab_skip dd.write "quick mode: no claim reads the rewrite (the data step wrote the file; drop empties the cache)"
    else
      lab_run "${f[@]}" --case target=file --case io=write --case cache=- \
        "dd.$i.write" -- dd if=/dev/urandom of="$DATA" bs=1M count="$MB" conv=fsync,notrunc
    fi
    drop "dd.$i.drop"
    lab_run "${f[@]}" --case target=file --case io=direct --case cache=cold \
      "dd.$i.direct-cold" -- dd if="$DATA" of=/dev/null bs=1M iflag=direct
    lab_run --case tool=fincore --case "after=direct read" --case "rep=$i" \
      "dd.$i.fincore-direct" -- fincore --json --bytes "$DATA"
    lab_run "${f[@]}" --case target=file --case io=buffered --case cache=cold \
      "dd.$i.buffered-cold" -- dd if="$DATA" of=/dev/null bs=1M
    lab_run --case tool=fincore --case "after=buffered read" --case "rep=$i" \
      "dd.$i.fincore-buffered" -- fincore --json --bytes "$DATA"
    lab_run "${f[@]}" --case target=file --case io=buffered --case cache=warm \
      "dd.$i.buffered-warm" -- dd if="$DATA" of=/dev/null bs=1M
    lab_run "${f[@]}" --case target=file --case io=direct --case cache=warm \
      "dd.$i.direct-warm" -- dd if="$DATA" of=/dev/null bs=1M iflag=direct
    if ((LAB_QUICK)); then
      ((i > 1)) || lab_skip dd.loop-direct "quick mode: no claim reads the loop device's direct reads"
    elif [[ -n "$LOOP" ]]; then
      lab_run "${f[@]}" --case target=loop --case io=direct --case cache=- \
        "dd.$i.loop-direct" -- dd if="$LOOP" of=/dev/null bs=1M iflag=direct
    else
      lab_skip "${f[@]}" --case target=loop --case io=direct --case cache=- \
        "dd.$i.loop-direct" "no loop device (needs root and loop devices)"
    fi
  done
}

group_strace() {
  need_data strace || return 0
  lab_require strace cmd:strace || return 0
  local io flag i name
  # -c -w: per system call, the count and the wall-clock time spent in it (-c alone counts
  # system CPU time, which leaves out the time a read sleeps waiting for the device). Repeated,
  # buffered and direct interleaved; the first repetition keeps the plain names strace.c.<io>.
  ((LAB_QUICK == 0)) || lab_skip strace.c.buffered "quick mode: no claim reads strace -c -w of buffered reads"
  for ((i = 1; i <= REPS; i++)); do
    for io in $(lab_quick direct "buffered direct"); do
      flag=(); [[ $io == direct ]] && flag=(iflag=direct)
      name="strace.c.$io"; ((i == 1)) || name+=".$i"
      drop "$name.drop"
      # The table goes to standard error, after dd's own summary (both kept in raw/strace.c.*.err).
      lab_run --case tool=strace-c --case "io=$io" --case "rep=$i" \
        "$name" -- strace -c -w dd if="$DATA" of=/dev/null bs=1M "${flag[@]}"
    done
  done
  # -T: every read's own duration (the "instrumented dd" of the investigation): one distribution
  # of every read per kind.
  for io in buffered direct; do
    flag=(); [[ $io == direct ]] && flag=(iflag=direct)
    drop "strace.T.$io.drop"
    lab_run --case tool=strace-T --case "io=$io" \
      "strace.T.$io" -- strace -T -s 0 -e trace=read -o "$LAB_RUN/raw/strace.T.$io.calls" \
      dd if="$DATA" of=/dev/null bs=1M "${flag[@]}"
  done
}

group_events() {
  need_loop events || return 0
  need_tr events || return 0
  local inst="$TR/instances/pcb-$$" ev mark count
  if [[ ! -d "$TR/instances" ]]; then lab_skip events "no tracefs instances directory"; return 0; fi
  mark=$(lab_mark)
  lab_rmdir_later "$inst"   # the tracefs instance, removed on cleanup
  lab_run events.instance -- mkdir "$inst" || { lab_unwind "$mark"; return 0; }
  for ev in issue complete; do
    tr_set "events.filter-$ev" "$inst/events/block/block_rq_$ev/filter" "dev == $DEVT" 0 &&
      tr_set "events.enable-$ev" "$inst/events/block/block_rq_$ev/enable" 1 ||
      { lab_unwind "$mark"; return 0; }
  done
  if [[ -d "$inst/events/swiotlb/swiotlb_bounced" ]]; then
    tr_set events.enable-bounced "$inst/events/swiotlb/swiotlb_bounced/enable" 1
  else
    lab_skip events.enable-bounced "no swiotlb:swiotlb_bounced event in this kernel"
  fi
  # sched_switch filtered on dd's own PID: the shell writes the filter with its PID ($$) and then
  # execs dd, which keeps that PID.
  local sw="$inst/events/sched/sched_switch"
  lab_defer "disable sched_switch in $inst" lab__write_file "$sw/enable" 0
  lab_defer "clear the sched_switch filter in $inst" lab__write_file "$sw/filter" 0
  count=$(( $(lab_quick 64 256) * 1024 / TRACE_BS_KB ))
  lab_run events.dd -- sh -c "echo \"prev_pid == \$\$ || next_pid == \$\$\" > $sw/filter && echo 1 > $sw/enable && exec dd if=$LOOP of=/dev/null bs=${TRACE_BS_KB}k iflag=direct count=$count"
  tr_set events.off "$inst/tracing_on" 0
  lab_run --case tool=tracefs-events events.trace -- cat "$inst/trace"
  lab_unwind "$mark"
}

group_btt() {
  need_loop btt || return 0
  lab_require btt cmd:blkparse cmd:btt || return 0
  local count mark path=""
  count=$(( $(lab_quick 64 256) * 1024 / TRACE_BS_KB ))
  mark=$(lab_mark)
  # 1. blktrace, the usual tool: relay files in debugfs. Probed first; kernel lockdown refuses it.
  if command -v blktrace >/dev/null && [[ -n "$DBG" ]]; then
    local probe="$LAB_RUN/raw/btt.blktrace-probe.err" rc=0
    timeout 3 blktrace -r "$DBG" -d "$LOOP" -w 1 -o - > /dev/null 2> "$probe" || rc=$?
    if ((rc == 0)) && ! grep -qiE 'not permitted|failed|error' "$probe"; then
      path=blktrace
    else
      # The kernel names the cause in its log when lockdown refused the relay files.
      local lock; lock=$(dmesg 2>/dev/null | grep -m1 -o 'Lockdown: blktrace: [^;]*' || true)
      lab_skip btt.blktrace "blktrace -d $LOOP failed (exit $rc): $(grep -m1 -iE 'not permitted|failed|error' "$probe" || tail -n1 "$probe")${lock:+ (kernel log: $lock)}; using the ftrace blk tracer"
    fi
  else
    lab_skip btt.blktrace "$(command -v blktrace >/dev/null && echo "debugfs not available" || echo "blktrace not installed"); trying the ftrace blk tracer"
  fi
  if [[ $path == blktrace ]]; then
    mkdir -p "$LAB_SCRATCH/blktrace"
    lab_spawn btt.blktrace -- blktrace -r "$DBG" -d "$LOOP" -o loop -D "$LAB_SCRATCH/blktrace"
    sleep 1
    lab_run btt.dd -- dd if="$LOOP" of=/dev/null bs="${TRACE_BS_KB}k" iflag=direct count="$count"
    # Stop blktrace as Ctrl-C would (it then tears the trace down and flushes its per-CPU files),
    # and give it time to finish before the cleanup stack would kill it.
    kill -INT "$LAB_SPAWNED" 2>/dev/null || true
    local w=0; while ((w++ < 50)) && alive "$LAB_SPAWNED"; do sleep 0.2; done
    lab_unwind "$mark"
    lab_run btt.blkparse -- blkparse -i loop -D "$LAB_SCRATCH/blktrace" -d "$LAB_SCRATCH/blk.bin" -O || return 0
  else
    # 2. The ftrace blk tracer: the same blk_io_trace records in the ftrace ring buffer, printed in
    # binary with the bin option and without the ftrace context prefix; blkparse reads them from a pipe.
    need_tr btt.ftrace || return 0
    local cur evs
    cur=$(cat "$TR/current_tracer"); evs=$(cat "$TR/set_event")
    if ! grep -qw blk "$TR/available_tracers"; then
      lab_skip btt.ftrace "no blk tracer in available_tracers ($(cat "$TR/available_tracers"))"; return 0
    elif [[ $cur != nop ]]; then
      lab_skip btt.ftrace "the top-level tracer is in use (current_tracer=$cur): not taking it over"; return 0
    elif [[ -n $evs ]]; then
      lab_skip btt.ftrace "top-level trace events are enabled by someone else ($(head -n1 <<<"$evs")...): they would mix into the binary stream"; return 0
    elif [[ ! -w /sys/block/$LOOPN/trace/enable ]]; then
      lab_skip btt.ftrace "no /sys/block/$LOOPN/trace/enable (kernel without CONFIG_BLK_DEV_IO_TRACE)"; return 0
    fi
    path=ftrace
    [[ $(cat "$TR/tracing_on") == 1 ]] || tr_set btt.tracing-on "$TR/tracing_on" 1
    tr_set btt.tracer "$TR/current_tracer" blk &&
      tr_set btt.bin "$TR/options/bin" 1 &&
      tr_set btt.nocontext "$TR/options/context-info" 0 || { lab_unwind "$mark"; return 0; }
    lab_spawn btt.capture -- cat "$TR/trace_pipe"
    tr_set btt.enable "/sys/block/$LOOPN/trace/enable" 1 || { lab_unwind "$mark"; return 0; }
    lab_run btt.dd -- dd if="$LOOP" of=/dev/null bs="${TRACE_BS_KB}k" iflag=direct count="$count"
    lab_run btt.disable -- sh -c "echo 0 > /sys/block/$LOOPN/trace/enable"
    # Let the reader drain the ring buffer: wait until the capture stops growing.
    local cap="$LAB_RUN/raw/btt.capture.out" size=-1 tries=0
    while ((tries++ < 20)) && [[ $(stat -c %s "$cap") != "$size" ]]; do size=$(stat -c %s "$cap"); sleep 0.2; done
    lab_unwind "$mark" # stop the reader, then tracer and options back (a tracer cannot change while trace_pipe is open)
    lab_run btt.blkparse -- sh -c "blkparse -i - -d $LAB_SCRATCH/blk.bin < $cap" || return 0
  fi
  printf '%s\n' "$path" > "$LAB_RUN/btt.path"
  # btt writes its side files (*_fp.dat) into the current directory: the scratch dir.
  lab_run --case tool=btt --case "path=$path" \
    btt.btt -- btt -i "$LAB_SCRATCH/blk.bin" -l "$LAB_RUN/raw/btt.d2c" -q "$LAB_RUN/raw/btt.q2c"
}

group_fgraph() {
  need_data fgraph || return 0
  need_tr fgraph || return 0
  if ! grep -qw function_graph "$TR/available_tracers"; then
    lab_skip fgraph "function_graph is not in available_tracers ($(cat "$TR/available_tracers")): kernel built without CONFIG_FUNCTION_GRAPH_TRACER"
    return 0
  fi
  local cur; cur=$(cat "$TR/current_tracer")
  [[ $cur == nop ]] || { lab_skip fgraph "the top-level tracer is in use (current_tracer=$cur)"; return 0; }
  local mark; mark=$(lab_mark)
  [[ $(cat "$TR/tracing_on") == 1 ]] || tr_set fgraph.tracing-on "$TR/tracing_on" 1
  tr_set fgraph.depth "$TR/max_graph_depth" 3 &&
    tr_set fgraph.function "$TR/set_graph_function" ksys_read "" || { lab_unwind "$mark"; return 0; }
  lab_defer "clear set_ftrace_pid" lab__write_file "$TR/set_ftrace_pid" ""
  tr_set fgraph.tracer "$TR/current_tracer" function_graph || { lab_unwind "$mark"; return 0; }
  drop fgraph.drop
  lab_run fgraph.dd -- sh -c "echo \$\$ > $TR/set_ftrace_pid && exec dd if=$DATA of=/dev/null bs=1M count=4"
  tr_set fgraph.off "$TR/tracing_on" 0
  lab_run --stdout "$LAB_RUN/raw/fgraph.trace.out" fgraph.trace -- cat "$TR/trace"
  lab_unwind "$mark"
}

group_swiotlb() {
  lab_run swiotlb.cmdline -- cat /proc/cmdline
  if dmesg > /dev/null 2>&1; then
    lab_run swiotlb.kmsg -- sh -c "dmesg | grep -iE 'swiotlb|software io tlb|bounce buffer|dma-ranges' || true"
  elif journalctl -k -b -n 1 --no-pager > /dev/null 2>&1; then
    lab_run swiotlb.kmsg -- sh -c "journalctl -k -b --no-pager | grep -iE 'swiotlb|software io tlb|bounce buffer|dma-ranges' || true"
  else
    lab_skip swiotlb.kmsg "kernel log not readable (dmesg_restrict=$(cat /proc/sys/kernel/dmesg_restrict 2>/dev/null), not root)"
  fi
  if [[ -z "$DBG" ]]; then
    lab_skip swiotlb.debugfs "debugfs not available (needs root)"
  elif [[ ! -d "$DBG/swiotlb" ]]; then
    lab_skip swiotlb.debugfs "no swiotlb directory in debugfs (kernel without swiotlb debugfs support)"
  else
    local f bad=""
    for f in "$DBG"/swiotlb/*; do [[ -f "$f" ]] || continue; cat "$f" > /dev/null 2>&1 || bad="$f"; done
    if [[ -n "$bad" ]]; then
      # shellcheck disable=SC2002 # cat's own error message is the reason
      lab_skip swiotlb.debugfs "cannot read $bad: $(cat "$bad" 2>&1 | tail -n1)"
    else
      # Empty output: no files, as 6.1 creates none when no swiotlb pool was set up (e.g. "No low
      # mem"); 5.10 always creates them, and without a pool they read 0.
      lab_run swiotlb.debugfs -- find "$DBG/swiotlb" -maxdepth 1 -type f -exec grep -H . {} +
    fi
  fi
  if need_data swiotlb.perf && lab_require swiotlb.perf cmd:perf; then
    local why
    if ! why=$(perf stat -a -x, -e swiotlb:swiotlb_bounced -- true 2>&1 >/dev/null); then
      lab_skip swiotlb.perf "perf cannot count swiotlb:swiotlb_bounced system-wide: $(tail -n1 <<<"$why")"
    else
      local i
      for ((i = 1; i <= REPS; i++)); do
        lab_run --case tool=perf-stat --case "rep=$i" \
          "swiotlb.perf.$i" -- perf stat -a -x, -o "$LAB_RUN/raw/swiotlb.perf.$i.csv" \
          -e swiotlb:swiotlb_bounced,block:block_rq_complete -- dd if="$DATA" of=/dev/null bs=1M iflag=direct
      done
    fi
  fi
  if [[ -d /proc/device-tree ]]; then
    lab_run --case tool=dt_dma_ranges swiotlb.dt -- "$LAB_PY" "$LAB_DIR/dt_dma_ranges.py"
  else
    lab_skip swiotlb.dt "no /proc/device-tree: this $(uname -m) host describes its hardware with ACPI; dma-ranges is a device-tree property (arm64 boards)"
  fi
}

group_bounce() {
  [[ -n "$BIN" ]] || { lab_skip bounce "build failed"; return 0; }
  need_data bounce || return 0
  local sizes n t mark
  sizes=$(lab_quick 1m 4k,8k,16k,32k,64k,128k,256k,512k,1m)  # the claims read 1 MiB from tmpfs
  # 15 samples of each mode per size: at 7, two full runs on one VM bounded the copy-time
  # model's agreement with the measured slowdown at 0.85–1.17 and 0.96–1.04.
  n=15 t=0.25
  if ((LAB_QUICK)); then
    lab_skip bounce.disk "quick mode: no claim reads bounce.c on the disk file (the claims read the tmpfs copy)"
  else
    lab_run --case tool=bounce --case target=disk bounce.disk -- "$BIN" -f "$DATA" -b "$sizes" -n "$n" -t "$t"
  fi
  if lab_require bounce.tmpfs root; then
    mark=$(lab_mark)
    lab_mount bounce.mount "$LAB_SCRATCH/tmpfs" -- -t tmpfs -o "size=$((MB + 16))m,mode=0700" tmpfs &&
      lab_run bounce.copy -- cp "$DATA" "$LAB_SCRATCH/tmpfs/data.img" &&
      if lab_takes_odirect "$LAB_SCRATCH/tmpfs/data.img"; then
        lab_run --case tool=bounce --case target=tmpfs \
          bounce.tmpfs -- "$BIN" -f "$LAB_SCRATCH/tmpfs/data.img" -b "$sizes" -n "$n" -t "$t"
      else
        lab_skip bounce.tmpfs "tmpfs refuses O_DIRECT before Linux 6.6 (this kernel: $(uname -r)): no direct reads from memory to compare with"
      fi
    lab_unwind "$mark"
  fi
}

group_tried() {
  need_loop tried || return 0
  local qd="/sys/block/$LOOPN/queue" mark v i mb ramb reps sreps s f
  # The repetitions of a full run in quick runs too: the claims compare pairs of one repetition,
  # and a direct read's throughput varies by a fifth from one repetition to the next on a shared
  # disk, by up to a third for the 1 MiB reads of the scheduler and nice pairs: 16 pairs each (at
  # 8 read_ahead_kb pairs, two full runs on one VM bounded the direct reads' ratio at 0.88–1.10
  # and 0.78–1.25, the second reaching past the claim's band). A quick run reads less per
  # read_ahead_kb setting (ramb) and sweeps only the two settings the claims compare; its
  # scheduler and nice reads are a full run's (256 MiB of the 512 MiB device).
  mb=256 ramb=$(lab_quick 64 256) reps=16 sreps=16
  # read_ahead_kb: a buffered sequential read goes through the loop device's page cache, and its
  # readahead decides how large (and how far ahead) the requests to the device are; a direct read
  # has no readahead. Read in 4 KiB pieces, as an application that reads small records does: with
  # 1 MiB reads each read() is already one large request, whatever read_ahead_kb says. The direct
  # reads (one 4 KiB request each) read a quarter as much, to keep the run short. Each repetition
  # goes through every setting (16, 128, 4096, 16, 128, 4096, ...), so drift hits all alike.
  mark=$(lab_mark)
  for ((i = 1; i <= reps; i++)); do
    for v in $(lab_quick "16 4096" "16 64 256 1024 4096 16384"); do
      lab_set_knob "tried.ra$v.$i" "$qd/read_ahead_kb" "$v" || continue
      f=(--case tool=dd --case experiment=read_ahead --case "read_ahead_kb=$v" --case "rep=$i")
      lab_run "tried.ra$v.$i.flush" -- blockdev --flushbufs "$LOOP"
      lab_run "${f[@]}" --case io=buffered "tried.ra$v.$i.buffered" -- dd if="$LOOP" of=/dev/null bs=4k count=$((ramb * 256))
      lab_run "${f[@]}" --case io=direct "tried.ra$v.$i.direct" -- dd if="$LOOP" of=/dev/null bs=4k count=$((ramb * 64)) iflag=direct
    done
  done
  lab_unwind "$mark"
  mark=$(lab_mark)
  for ((i = 1; i <= sreps; i++)); do
    for s in none mq-deadline; do
      if ! grep -qw -- "$s" "$qd/scheduler"; then
        ((i > 1)) || lab_skip --case tool=dd --case experiment=scheduler --case "scheduler=$s" \
          "tried.sched-$s" "scheduler $s not available ($(cat "$qd/scheduler"))"
        continue
      fi
      lab_set_knob "tried.sched-$s.$i.set" "$qd/scheduler" "$s" || continue
      lab_run --case tool=dd --case experiment=scheduler --case "scheduler=$s" --case "rep=$i" \
        "tried.sched-$s.$i" -- dd if="$LOOP" of=/dev/null bs=1M count="$mb" iflag=direct
    done
  done
  lab_unwind "$mark"
  for ((i = 1; i <= sreps; i++)); do
    lab_run --case tool=dd --case experiment=nice --case nice=0 --case "rep=$i" \
      "tried.nice0.$i" -- dd if="$LOOP" of=/dev/null bs=1M count="$mb" iflag=direct
    lab_run --case tool=dd --case experiment=nice --case nice=-20 --case "rep=$i" \
      "tried.nice-20.$i" -- nice -n -20 dd if="$LOOP" of=/dev/null bs=1M count="$mb" iflag=direct
  done
}

# The root cause, reproduced: boot arm64 guests (QEMU, TCG or KVM) whose NVMe drive sits behind the
# PCIe host bridge of QEMU's virt machine, with three device trees: QEMU's own ("plain"), the same
# tree plus a 1 GiB dma-ranges window ("dma-ranges": RAM above the first GiB is out of the drive's
# reach, as dd's buffers were on the original board after the upgrade), and that tree with the
# window widened to cover all of the guest's RAM ("dma-ranges-wide": the original's fix, made by
# dt_widen.py from the dma-ranges tree). Kernel 5.10 (the original's), then 6.1. The
# guest's kernel, modules and tools are Debian arm64 packages, cached by labkit.guest under
# ~/.cache. No root needed. After each first boot, dt_dma_ranges.py decodes the device tree the
# guest's kernel saw (copied back from its /proc/device-tree): how much RAM lies outside the window.
#
# The boot is the unit of the claims that compare two configurations (kernel, device tree, boot-time
# knob): two boots of one configuration differ by more than the reads inside one boot do, so every
# configuration boots GUEST_BOOTS times, each boot giving one value (the median of its direct dd
# reads, and of its rounds against the control drive). The first boot of each also runs the job's
# traces and counts; the others (rep 2.., in rounds that visit every configuration in turn, so that
# drift in the emulator's speed over the run weighs on all alike) read only.
GUEST_BOOTS=5

# words ARG...: the ARGs joined by the unit separator (0x1f), which no path holds: a list kept in
# one array element, split again with IFS=$'\x1f' read -ra.
words() { local IFS=$'\x1f'; echo "$*"; }

# guest_boot STEP RELEASE JOB WORK OUT [KEY=VALUE...] -- [ARG...]: one boot as step STEP:
# labkit.guest run of the kernel of Debian RELEASE with the job folder JOB, the boot's disks and
# console log in WORK, the guest's /out brought back to $LAB_RUN/OUT; KEY=VALUE: the step's case
# beside tool, experiment, release and out; ARG: the boot's device tree and command line
# (--dt NAME or --dtb FILE, --append ARGS). The drive's image is $LAB_SCRATCH/nvme.img, attached
# twice: as the NVMe drive behind the PCIe host bridge and read-only as the control drive.
guest_boot() {
  local step=$1 kr=$2 jobd=$3 work=$4 out=$5 cases=()
  shift 5
  while (($#)) && [[ $1 != -- ]]; do cases+=(--case "$1"); shift; done
  shift
  lab_run --case tool=labkit.guest --case experiment=guest --case "release=$kr" "${cases[@]}" --case "out=$out" \
    "$step" -- "$LAB_PY" -m labkit.guest run --arch arm64 --kernel-release "$kr" "$@" \
    --job "$jobd" --out "$LAB_RUN/$out" --work "$work" \
    --nvme "$LAB_SCRATCH/nvme.img" --drive "pcbctl=$LAB_SCRATCH/nvme.img" --timeout 900
}

group_guest() {
  lab_require guest cmd:qemu-system-aarch64 cmd:mmdebstrap cmd:dtc cmd:mke2fs cmd:cpio || return 0
  local job="$LAB_SCRATCH/guest-job" mb kr dt work rdt check
  mkdir -p "$job" "$LAB_RUN/raw/guest"
  cp "$LAB_DIR/guest_job.sh" "$job/run" && cp "$LAB_DIR/alternate.py" "$job/"
  # MiB per read (the original read 512 MiB; a quick run reads a quarter), direct dd reads (3: a
  # boot's median), direct reads with their read() calls traced, buffered dd reads, direct reads
  # counted with perf stat and traced with function_graph, buffered reads counted too (1) or not,
  # strace -c -w of a direct read (1) or not, MiB read under blktrace and under perf record -g
  # (0: none), and rounds of alternate.py (ALT, ALT_MB MiB of each drive per round: 5, a boot's
  # median): the drive's speed relative to the control drive's, read in alternation. Quick runs
  # leave out the buffered reads, strace, btt and perf record: their tables and flame graphs come
  # from full runs, and the two claims that read them (D2C on 5.10 and on 6.1, timings) are not
  # applicable on an emulated CPU.
  # The first dma-ranges boot of 5.10 also tries the original's run-time knobs (KNOBS rounds, each
  # read against the control drive in alternation, paired with a read without a knob in the same
  # round); full runs also do so on 6.1. Full runs boot the 5.10 dma-ranges tree with each of the
  # original's boot-time knobs on the kernel command line (boot_knobs), and the 5.10 plain tree
  # with swiotlb=force (the positive control: bouncing without a window), reading only, as the
  # repeated boots do.
  mb=$(lab_quick 128 512)
  printf 'MB=%s\nREPS=%s\nTREPS=%s\nBREPS=%s\nCOUNTED=%s\nBUFFERED=%s\nSTRACE=%s\nTRACE_MB=%s\nPERF_MB=%s\nALT=%s\nALT_MB=%s\n' \
    "$mb" 3 5 "$(lab_quick 0 5)" 6 "$(lab_quick 0 1)" "$(lab_quick 0 1)" \
    "$(lab_quick 0 128)" "$(lab_quick 0 128)" 5 "$(lab_quick 64 256)" > "$job/job.env"
  # Later assignments in job.env win.
  cp -r "$job" "$job-knobs" && printf 'KNOBS=%s\n' 6 >> "$job-knobs/job.env"
  cp -r "$job" "$job-read" &&
    printf 'TREPS=0\nBREPS=0\nCOUNTED=0\nBUFFERED=0\nSTRACE=0\nTRACE_MB=0\nPERF_MB=0\n' >> "$job-read/job.env"
  local boot_knobs=(threadirqs isolcpus=1) knob name
  for knob in "${boot_knobs[@]}"; do
    cp -r "$job-read" "$job-read-${knob%%=*}" && echo "KNOB=${knob%%=*}" >> "$job-read-${knob%%=*}/job.env"
  done
  # The positive control's first boot counts its bounces.
  cp -r "$job-read" "$job-force" && printf 'COUNTED=%s\n' 6 >> "$job-force/job.env"
  cp "$job/job.env" "$LAB_RUN/raw/guest/job.env"
  # The drive's content: random data, so nothing below can shortcut zeros.
  lab_run guest.image -- dd if=/dev/urandom of="$LAB_SCRATCH/nvme.img" bs=1M count=$((mb + 16)) status=none || return 0
  local dtjob b i
  for kr in bullseye bookworm; do
    lab_run "guest.prepare.$kr" -- "$LAB_PY" -m labkit.guest prepare --arch arm64 --kernel-release "$kr" || continue
    # The configurations whose first boot ran, for the repeated boots: name, the step's case
    # fields, the job, and the boot's arguments (the first boot's device tree, as a file).
    local cfg_name=() cfg_case=() cfg_job=() cfg_args=()
    # The plain boot sits between the two it is compared with (drift in the emulator's speed over
    # the minutes of the run then weighs on both comparisons alike); the widened tree is made from
    # the dma-ranges boot's tree, so that boot comes first.
    for dt in dma-ranges plain dma-ranges-wide; do
      work="$LAB_SCRATCH/guest/$kr-$dt" rdt=(--dt "$dt")
      if [[ $dt == dma-ranges-wide ]]; then
        if [[ ! -f "$LAB_SCRATCH/guest/$kr-dma-ranges/dma-ranges.dtb" ]]; then
          lab_skip "guest.$kr.$dt" "no dma-ranges device tree to widen (the dma-ranges boot did not run)"
          continue
        fi
        mkdir -p "$work"
        lab_run "guest.$kr.$dt.dtb" -- "$LAB_PY" "$LAB_DIR/dt_widen.py" \
          "$LAB_SCRATCH/guest/$kr-dma-ranges/dma-ranges.dtb" "$work/wide.dtb" || continue
        rdt=(--dtb "$work/wide.dtb")
      fi
      dtjob=$job
      if [[ $dt == dma-ranges ]] && { ((LAB_QUICK == 0)) || [[ $kr == bullseye ]]; }; then dtjob=$job-knobs; fi
      guest_boot "guest.$kr.$dt" "$kr" "$dtjob" "$work" "raw/guest/$kr-$dt" "dt=$dt" -- "${rdt[@]}" || continue
      # labkit.guest leaves the tree it built in the work folder: the repeated boots boot that file.
      [[ $dt == dma-ranges ]] && rdt=(--dtb "$work/dma-ranges.dtb")
      cfg_name+=("$dt") cfg_case+=("dt=$dt") cfg_job+=("$job-read") cfg_args+=("$(words "${rdt[@]}")")
      if [[ -d "$LAB_RUN/raw/guest/$kr-$dt/device-tree" ]]; then
        check=(); [[ $dt == dma-ranges-wide ]] && check=(--fail-if-outside)
        lab_run --case tool=dt_dma_ranges --case experiment=guest --case "release=$kr" --case "dt=$dt" \
          "guest.$kr.$dt.dt" -- "$LAB_PY" "$LAB_DIR/dt_dma_ranges.py" --root "$LAB_RUN/raw/guest/$kr-$dt/device-tree" "${check[@]}"
      else
        lab_skip "guest.$kr.$dt.dt" "the guest did not copy its device tree back"
      fi
    done
    if [[ $kr == bullseye ]]; then
      for knob in "${boot_knobs[@]}"; do
        name=${knob%%=*}
        if ((LAB_QUICK)); then
          lab_skip --case tool=labkit.guest --case experiment=guest --case "release=$kr" --case dt=dma-ranges \
            --case "boot_args=$knob" "guest.$kr.dma-ranges.$name" "a boot-time knob costs $GUEST_BOOTS boots: full runs only"
          continue
        fi
        [[ -f "$LAB_SCRATCH/guest/$kr-dma-ranges/dma-ranges.dtb" ]] ||
          { lab_skip "guest.$kr.dma-ranges.$name" "no dma-ranges device tree (the dma-ranges boot did not run)"; continue; }
        rdt=(--dtb "$LAB_SCRATCH/guest/$kr-dma-ranges/dma-ranges.dtb" --append "$knob")
        guest_boot "guest.$kr.dma-ranges.$name" "$kr" "$job-read-$name" "$LAB_SCRATCH/guest/$kr-dma-ranges-$name" \
          "raw/guest/$kr-dma-ranges-$name" dt=dma-ranges "boot_args=$knob" -- "${rdt[@]}" || continue
        cfg_name+=("dma-ranges.$name") cfg_case+=("dt=dma-ranges boot_args=$knob") cfg_job+=("$job-read-$name") cfg_args+=("$(words "${rdt[@]}")")
      done
      if ((LAB_QUICK)); then
        lab_skip --case tool=labkit.guest --case experiment=guest --case "release=$kr" --case dt=plain-force \
          --case boot_args=swiotlb=force "guest.$kr.plain-force" "the positive control costs $GUEST_BOOTS boots: full runs only"
      else
        guest_boot "guest.$kr.plain-force" "$kr" "$job-force" "$LAB_SCRATCH/guest/$kr-plain-force" \
          "raw/guest/$kr-plain-force" dt=plain-force boot_args=swiotlb=force -- --dt plain --append swiotlb=force &&
          cfg_name+=("plain-force") cfg_case+=("dt=plain-force boot_args=swiotlb=force") cfg_job+=("$job-read") \
            cfg_args+=("$(words --dt plain --append swiotlb=force)")
      fi
    fi
    # The repeated boots: rounds 2..GUEST_BOOTS, each boot of every configuration in turn.
    for ((b = 2; b <= GUEST_BOOTS; b++)); do
      for i in "${!cfg_name[@]}"; do
        work="$LAB_SCRATCH/guest/$kr-${cfg_name[i]}.$b"
        mkdir -p "$work"
        IFS=$'\x1f' read -ra rdt <<< "${cfg_args[i]}"
        # shellcheck disable=SC2086 # the case fields (KEY=VALUE, no spaces): words on purpose
        guest_boot "guest.$kr.${cfg_name[i]}.$b" "$kr" "${cfg_job[i]}" "$work" "raw/guest/$kr-${cfg_name[i]}.$b" \
          ${cfg_case[i]} "rep=$b" -- "${rdt[@]}"
        rm -rf "$work"   # its disks: a boot's outputs are in raw/guest/
      done
    done
  done
}

lab_main "$@"
