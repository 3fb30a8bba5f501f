# shellcheck shell=bash
# labs/nvme_swiotlb/guest_job.sh: what the nvme_swiotlb lab runs INSIDE its arm64 QEMU guest,
# once per boot (kernel x device tree). bash (the guest runner starts a job with sh: it starts
# again under bash), as root, in /job; it writes every raw output to $PCB_OUT (/out), which the
# guest runner brings back to the host.
# Every tool is the guest's own arm64 binary from Debian: coreutils dd, strace, perf, blktrace/btt.
#
# Parameters come from /job/job.env, written by run.sh: MB (MiB per read), REPS (direct dd reads),
# TREPS (direct reads whose read() calls are traced), BREPS (buffered dd reads, each after
# drop_caches), COUNTED (direct reads counted with perf stat, reads traced with function_graph),
# BUFFERED (1: buffered reads counted with perf stat too), STRACE (1: strace -c -w of a direct
# read), TRACE_MB (MiB read under blktrace; 0: none), PERF_MB (MiB read under perf record -g;
# 0: none), KNOBS (rounds of direct reads with each run-time knob the original tried, the knobs
# interleaved, each read a round of alternate.py against the control drive; 0: none), KNOB (the knob this boot carries on its kernel command line, such
# as threadirqs: the case of its dd and alternate.py reads; none by default; with isolcpus, dd runs bound to the
# isolated CPU 1, as the original bound dd, and the NVMe queue's interrupt follows), ALT (rounds of alternate.py: the
# NVMe drive and the control drive read 1 MiB at a time in alternation, ALT_MB MiB of each per
# round; 0: none). The control drive is a virtio disk with serial pcbctl outside the PCIe host
# bridge, which labkit.guest attaches read-only from the NVMe drive's own image.
# Its steps are recorded as a lab run records its own (labkit/guest/step.sh, with labs/lib/case.sh):
# $OUT/steps.tsv, and raw/<step>.cmd, .case (a measuring step's KEY=VALUE fields), .out and .err;
# the lab's record.py reads them with labkit.record.read_steps, never by a step's name.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
KNOBS=0 KNOB=none ALT=0 ALT_MB=0
. /job/job.env
OUT=$PCB_OUT
cp /job/job.env "$OUT/job.env"
DEV=/dev/nvme0n1
T=/sys/kernel/tracing
W=/tmp/pcb
mkdir -p "$W"

# step NAME [KEY=VALUE...] -- CMD...: labkit.guest's step language (labkit/guest/step.sh), the
# guest's lab_run: one command a reader could type, its outputs, exit status and case kept in $OUT.
# shellcheck source=SCRIPTDIR/../../labkit/guest/step.sh
. /job/.pcb/step.sh
drop() { step "$1" -- sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'; }

busybox mount -t tracefs nodev $T
busybox mount -t debugfs nodev /sys/kernel/debug

# What this guest is: kernel, command line, boot log lines about swiotlb and the drive, the
# device tree's dma-ranges on the PCIe host bridge, the parts of the device tree the kernel
# exported that say which RAM the PCIe devices reach (the root's cell sizes, the memory and PCIe
# host bridge nodes: decoded on the host by dt_dma_ranges.py), the drive's queue limits, and the
# drive's dev_t as trace event filters see it (MKDEV: major << 20 | minor).
uname -r > "$OUT/uname-r.txt"
uname -v > "$OUT/uname-v.txt"
cat /proc/cmdline > "$OUT/cmdline.txt"
busybox dmesg > "$OUT/dmesg.txt"
for f in /proc/device-tree/pcie@10000000/dma-ranges /proc/device-tree/pcie@10000000/ranges; do
  [ -e "$f" ] && busybox hexdump -C "$f" > "$OUT/dt-$(basename "$f").hex"
done
# One cp for all of them: under an emulated CPU every process the job starts costs a tenth of a
# second, so the loop below runs no command.
mkdir -p "$OUT/device-tree"
set --
for f in /proc/device-tree/* /proc/device-tree/.[!.]*; do
  case ${f##*/} in memory*|pcie@*) set -- "$@" "$f" ;; *) [ -f "$f" ] && set -- "$@" "$f" ;; esac
done
cp -R -L "$@" "$OUT/device-tree/"
mm=$(cat /sys/block/nvme0n1/dev)
DEVT=$(( (${mm%%:*} << 20) | ${mm##*:} ))
for f in max_sectors_kb max_hw_sectors_kb max_segments scheduler read_ahead_kb; do
  read -r v < /sys/block/nvme0n1/queue/$f && echo "$f $v"
done > "$OUT/queue.txt"
swiotlb_state() { for f in /sys/kernel/debug/swiotlb/*; do [ -f "$f" ] && read -r v < "$f" && echo "${f##*/} $v"; done; }
swiotlb_state > "$OUT/swiotlb-before.txt"
CTL=""
if [ "$ALT" -gt 0 ]; then
  for f in /sys/block/vd*/serial; do
    serial=""; read -r serial < "$f"   # sysfs ends the serial without a newline: read says 1, serial is set
    [ "$serial" = pcbctl ] && { f=${f%/serial}; CTL=/dev/${f##*/}; }
  done
  [ -n "$CTL" ] || echo "no virtio disk with serial pcbctl" > "$OUT/control.skipped"
fi

# 1. Bandwidth: dd direct reads of the drive, and buffered reads after dropping the page cache
# (interleaved while both kinds have repetitions left). With isolcpus, the direct reads run on
# the isolated CPU (busybox taskset); each CPU has its own NVMe queue, whose interrupt is bound to
# it, so the completions land there too (the interrupt counts before and after show it).
# Debian's static busybox prefers its own applets, so the dd it starts is named by its path
# (coreutils' dd, the one every other step runs: busybox's prints no throughput line).
pin="" dd=dd
if [ "$KNOB" = isolcpus ]; then
  pin="busybox taskset -c 1" dd=$(command -v dd)
  step isolcpus.irq.before -- grep -e CPU -e nvme /proc/interrupts
fi
i=1
while [ $i -le "$REPS" ] || [ $i -le "$BREPS" ]; do
  # shellcheck disable=SC2086  # $pin is empty or "busybox taskset -c 1": words on purpose; $dd a path
  [ $i -gt "$REPS" ] || step "dd.$i.direct" tool=dd io=direct knob=$KNOB rep=$i -- $pin $dd if=$DEV of=/dev/null bs=1M count="$MB" iflag=direct
  if [ $i -le "$BREPS" ]; then
    drop "dd.$i.drop"
    step "dd.$i.buffered" tool=dd io=buffered rep=$i -- dd if=$DEV of=/dev/null bs=1M count="$MB"
  fi
  i=$((i + 1))
done
[ -z "$pin" ] || step isolcpus.irq.after -- grep -e CPU -e nvme /proc/interrupts

# 1b. The drive against the control: the emulator's read speed drifts within a boot, by a third
# from one dd to the next; read in alternation, 1 MiB of each at a time, both see the same drift,
# and their ratio is the drive's speed with the drift taken out. With isolcpus, bound to the
# isolated CPU as dd is.
if [ -n "$CTL" ]; then
  # shellcheck disable=SC2086  # $pin: words on purpose
  step alternate tool=alternate io=direct knob=$KNOB -- $pin python3 /job/alternate.py --mib "$ALT_MB" --rounds "$ALT" $DEV "$CTL"
fi

# 2. Bounces: swiotlb_bounced (every device: only the NVMe drive is behind the PCIe host bridge) and
# the drive's block_rq_complete (filtered on its dev_t) counted during whole reads (perf stat -a).
i=1
while [ $i -le "$COUNTED" ]; do
  for io in direct buffered; do
    [ $io = direct ] || [ "$BUFFERED" = 1 ] || continue
    flag=""; [ $io = direct ] && flag="iflag=direct"
    [ $io = buffered ] && drop "count.$i.$io.drop"
    step "count.$i.$io" tool=perf-stat io=$io rep=$i -- perf stat -x, -a -e swiotlb:swiotlb_bounced \
      -e block:block_rq_complete --filter "dev == $DEVT" \
      -o "$OUT/count.$i.$io.csv" -- dd if=$DEV of=/dev/null bs=1M count="$MB" $flag
  done
  i=$((i + 1))
done
swiotlb_state > "$OUT/swiotlb-after.txt"

# 3. strace -c -w of a direct read: read calls and the wall time per call (the original's 2.1).
# Under an emulated CPU, ptrace's stops cost more than a read itself: step 4 times the calls.
if [ "$STRACE" = 1 ]; then
  step strace.1.direct tool=strace-c io=direct rep=1 -- strace -c -w -o "$OUT/strace.1.direct.txt" \
    dd if=$DEV of=/dev/null bs=1M count="$MB" iflag=direct
fi

# 4. The time inside each read() of direct reads, from the syscall tracepoints (the original's
# 2.3 traced the read system call with ftrace): raw_syscalls sys_enter/sys_exit of read (number
# 63 on arm64), for dd's PID only (set_event_pid, written by the shell that then execs dd).
R=$T/events/raw_syscalls
if [ -d $R/sys_enter ]; then
  echo 0 > $T/tracing_on
  echo 'id == 63' > $R/sys_enter/filter
  echo 'id == 63' > $R/sys_exit/filter
  echo 1 > $R/sys_enter/enable
  echo 1 > $R/sys_exit/enable
  i=1
  while [ $i -le "$TREPS" ]; do
    echo > $T/trace
    step "readtime.$i" tool=syscall-trace io=direct rep=$i -- sh -c "echo \$\$ > $T/set_event_pid && echo 1 > $T/tracing_on && exec dd if=$DEV of=/dev/null bs=1M count=$MB iflag=direct"
    echo 0 > $T/tracing_on
    cat $T/trace > "$OUT/readtime.$i.trace"
    i=$((i + 1))
  done
  echo 0 > $R/sys_enter/enable
  echo 0 > $R/sys_exit/enable
  echo 0 > $R/sys_enter/filter
  echo 0 > $R/sys_exit/filter
  echo > $T/set_event_pid
  echo > $T/trace
else
  echo "no raw_syscalls events in $T/events" > "$OUT/readtime.skipped"
fi

# 5. function_graph of ksys_read for single 1 MiB direct reads (the original's 2.3 and 2.4): do the
# swiotlb map/bounce/unmap functions run under the read?
if grep -qw function_graph $T/available_tracers 2>/dev/null; then
  echo 0 > $T/tracing_on
  echo 16384 > $T/buffer_size_kb
  echo function_graph > $T/current_tracer
  echo ksys_read > $T/set_graph_function
  echo funcgraph-tail > $T/trace_options
  i=1
  while [ $i -le "$COUNTED" ]; do
    echo > $T/trace
    step "fgraph.$i" tool=function_graph rep=$i -- sh -c "echo \$\$ > $T/set_ftrace_pid && echo 1 > $T/tracing_on && exec dd if=$DEV of=/dev/null bs=1M count=1 skip=$i iflag=direct"
    echo 0 > $T/tracing_on
    cat $T/trace > "$OUT/fgraph.$i.trace"
    i=$((i + 1))
  done
  echo > $T/set_ftrace_pid
  echo > $T/set_graph_function
  echo nop > $T/current_tracer
else
  echo "function_graph not in $(cat $T/available_tracers 2>/dev/null)" > "$OUT/fgraph.skipped"
fi

# 6. blktrace during a direct read -> blkparse -> btt: D2C and Q2C of every request. 128 KiB reads:
# below the drive's max_sectors_kb and swiotlb's 256 KiB mapping limit, so the block layer does not
# split them (btt does not follow split I/Os) and both device trees see requests of one size.
if [ "$TRACE_MB" -gt 0 ]; then
  blktrace -d $DEV -o nvme -D "$W" > "$OUT/blktrace.out" 2> "$OUT/blktrace.err" &
  bt=$!
  sleep 1
  step btt.dd -- dd if=$DEV of=/dev/null bs=128k count=$((TRACE_MB * 8)) iflag=direct
  kill -INT $bt
  wait $bt
  echo "blktrace -d $DEV -o nvme -D $W" > "$OUT/blktrace.cmd"
  step btt.blkparse -- blkparse -i nvme -D "$W" -d "$W/blk.bin" -O
  step btt.btt tool=btt request_kib=128 -- btt -i "$W/blk.bin" -l "$OUT/btt.d2c" -q "$OUT/btt.q2c"
fi

# 7. perf record -g of every CPU during a direct read (folded and drawn on the host: inferno has
# no Debian package).
if [ "$PERF_MB" -gt 0 ]; then
  step perf.record -- perf record -e cpu-clock -F 999 -g -a -o "$W/perf.data" -- dd if=$DEV of=/dev/null bs=1M count="$PERF_MB" iflag=direct
  # -F: the fields of a host lab's LAB_PERF_STACKS_ALL (labs/lib/lab.sh), which inferno reads.
  step perf.script tool=perf-script -- perf script -F comm,tid,cpu,time,period,event,ip,sym,symoff,dso -i "$W/perf.data"
fi
# 8. The knobs the original tried at run time (its section 3), on the faulty board itself, in
# rounds, each knob put back after its read (the reads without a knob are step 1's):
# read_ahead_kb 128 -> 1024, nice -n -20, transparent_hugepage=always (which the original also
# switched at run time) and the I/O scheduler (mq-deadline, kyber where the kernel has them).
# Each read is one round of alternate.py against the control drive (ALT_MB MiB of each), so that
# the emulator's drift between two reads seconds apart cancels as it does in 1b; the control
# drive is a virtio disk whose own queue the knobs leave alone.
# The job's PATH has busybox's applets, not Debian's sed.
if [ "$KNOBS" -gt 0 ] && [ -z "$CTL" ]; then
  echo "no control drive to read the knobs against" > "$OUT/knobs.skipped"
elif [ "$KNOBS" -gt 0 ]; then
  Q=/sys/block/nvme0n1/queue
  THP=/sys/kernel/mm/transparent_hugepage/enabled
  modprobe kyber-iosched 2>/dev/null
  picked() { busybox sed 's/.*\[\(.*\)\].*/\1/' "$1"; }   # the [selected] word of a sysfs choice
  ra0=$(cat $Q/read_ahead_kb) sched0=$(picked $Q/scheduler) thp0=""
  [ -w $THP ] && thp0=$(picked $THP)
  # The mode the boot came up with, before any knob (Debian's kernels come up with always).
  [ -z "$thp0" ] || step knobs.thp-before tool=thp-mode -- cat $THP
  # The rounds' reads without the THP knob run with madvise where the boot came up with always,
  # so that the knob (always) is a change, as it was where the original set it at run time; the
  # boot's mode is put back after the rounds.
  thpoff=$thp0
  [ "$thp0" = always ] && thpoff=madvise
  if [ -n "$thp0" ]; then
    echo "$thpoff" > $THP
    step knobs.thp-rounds tool=thp-rounds-mode -- cat $THP
  fi
  # Each round starts with the same read without a knob (knob=baseline): the knob claims pair
  # every knob's read with its own round's baseline, seconds apart.
  knobs="baseline=none read_ahead_kb=1024 nice=-20"
  if [ -n "$thp0" ]; then knobs="$knobs transparent_hugepage=always"; else echo "no $THP" > "$OUT/knobs.skipped"; fi
  for s in mq-deadline kyber; do grep -qw $s $Q/scheduler && knobs="$knobs scheduler=$s"; done
  echo "$knobs" > "$OUT/knobs.txt"
  i=1
  while [ $i -le "$KNOBS" ]; do
    for k in $knobs; do
      name=${k%%=*} value=${k#*=} pre=""
      case $name in
        read_ahead_kb) echo "$value" > $Q/read_ahead_kb ;;
        scheduler) echo "$value" > $Q/scheduler ;;
        transparent_hugepage) echo "$value" > $THP ;;
        nice) pre="nice -n $value" ;;
      esac
      # shellcheck disable=SC2086  # $pre is empty or "nice -n VALUE": words on purpose
      step "knob.$i.$name.$value" tool=alternate io=direct "knob=$name" "setting=$value" "rep=$i" -- $pre python3 /job/alternate.py --mib "$ALT_MB" --rounds 1 --warmup 0 $DEV "$CTL"
      echo "$ra0" > $Q/read_ahead_kb
      echo "$sched0" > $Q/scheduler
      [ -z "$thp0" ] || echo "$thpoff" > $THP
    done
    i=$((i + 1))
  done
  [ -z "$thp0" ] || echo "$thp0" > $THP
  for f in max_sectors_kb max_segments nr_requests scheduler read_ahead_kb; do
    echo "$f $(cat $Q/$f)"
  done > "$OUT/queue-after-knobs.txt"
fi
exit 0
