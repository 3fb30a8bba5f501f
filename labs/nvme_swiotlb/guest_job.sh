# labs/nvme_swiotlb/guest_job.sh: what the nvme_swiotlb lab runs INSIDE its arm64 QEMU guest,
# once per boot (kernel x device tree). POSIX sh (the guest's dash), as root, in /job; it
# writes every raw output to $PCB_OUT (/out), which the guest runner brings back to the host.
# Every tool is the guest's own arm64 binary from Debian: coreutils dd, strace, perf, blktrace/btt.
#
# Parameters come from /job/job.env, written by run.sh: MB (MiB per read), REPS (bandwidth samples
# per kind), COUNTED (reads counted with perf stat), TRACE_MB (MiB read under blktrace and perf).
# Each step keeps <step>.cmd (the command as typed), <step>.out, <step>.err and <step>.rc.
set -u
. /job/job.env
OUT=$PCB_OUT
DEV=/dev/nvme0n1
T=/sys/kernel/tracing
W=/tmp/pcb
mkdir -p "$W"

# step NAME CMD...: run one command a reader could type, keep its command line and outputs.
step() {
  name=$1; shift
  printf '%s\n' "$*" > "$OUT/$name.cmd"
  echo "$name: $*"
  "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
  rc=$?
  echo "$rc" > "$OUT/$name.rc"
  [ "$rc" = 0 ] || echo "$name: exit $rc: $(tail -n 1 "$OUT/$name.err")"
  return 0
}
drop() { step "$1" sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'; }

busybox mount -t tracefs nodev $T
busybox mount -t debugfs nodev /sys/kernel/debug

# What this guest is: kernel, command line, boot log lines about swiotlb and the drive, the
# device tree's dma-ranges on the PCIe host bridge, the drive's queue limits.
uname -r > "$OUT/uname-r.txt"
uname -v > "$OUT/uname-v.txt"
cat /proc/cmdline > "$OUT/cmdline.txt"
busybox dmesg > "$OUT/dmesg.txt"
for f in /proc/device-tree/pcie@10000000/dma-ranges /proc/device-tree/pcie@10000000/ranges; do
  [ -e "$f" ] && busybox hexdump -C "$f" > "$OUT/dt-$(basename "$f").hex"
done
for f in max_sectors_kb max_hw_sectors_kb max_segments scheduler read_ahead_kb; do
  echo "$f $(cat /sys/block/nvme0n1/queue/$f)"
done > "$OUT/queue.txt"
swiotlb_state() { for f in /sys/kernel/debug/swiotlb/*; do [ -f "$f" ] && echo "$(basename "$f") $(cat "$f")"; done; }
swiotlb_state > "$OUT/swiotlb-before.txt"

# 1. Bandwidth: dd direct reads of the drive, and buffered reads after dropping the page cache.
i=1
while [ $i -le "$REPS" ]; do
  step "dd.$i.direct" dd if=$DEV of=/dev/null bs=1M count="$MB" iflag=direct
  drop "dd.$i.drop"
  step "dd.$i.buffered" dd if=$DEV of=/dev/null bs=1M count="$MB"
  i=$((i + 1))
done

# 2. Bounces: swiotlb_bounced and block_rq_complete counted during whole reads (perf stat -a).
i=1
while [ $i -le "$COUNTED" ]; do
  for io in direct buffered; do
    flag=""; [ $io = direct ] && flag="iflag=direct"
    [ $io = buffered ] && drop "count.$i.$io.drop"
    step "count.$i.$io" perf stat -x, -a -e swiotlb:swiotlb_bounced,block:block_rq_complete \
      -o "$OUT/count.$i.$io.csv" -- dd if=$DEV of=/dev/null bs=1M count="$MB" $flag
  done
  i=$((i + 1))
done
swiotlb_state > "$OUT/swiotlb-after.txt"

# 3. strace -c -w of a direct read: read calls and the wall time per call (the original's 2.1).
step strace.direct strace -c -w -o "$OUT/strace.direct.txt" dd if=$DEV of=/dev/null bs=1M count="$MB" iflag=direct

# 4. function_graph of ksys_read for single 1 MiB direct reads (the original's 2.3 and 2.4): do the
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
    step "fgraph.$i" sh -c "echo \$\$ > $T/set_ftrace_pid && echo 1 > $T/tracing_on && exec dd if=$DEV of=/dev/null bs=1M count=1 skip=$i iflag=direct"
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

# 5. blktrace during a direct read -> blkparse -> btt: D2C and Q2C of every request. 128 KiB reads:
# below the drive's max_sectors_kb and swiotlb's 256 KiB mapping limit, so the block layer does not
# split them (btt does not follow split I/Os) and both device trees see requests of one size.
blktrace -d $DEV -o nvme -D "$W" > "$OUT/blktrace.out" 2> "$OUT/blktrace.err" &
bt=$!
sleep 2
step btt.dd dd if=$DEV of=/dev/null bs=128k count=$((TRACE_MB * 8)) iflag=direct
kill -INT $bt
wait $bt
echo "blktrace -d $DEV -o nvme -D $W" > "$OUT/blktrace.cmd"
step btt.blkparse blkparse -i nvme -D "$W" -d "$W/blk.bin" -O
step btt.btt btt -i "$W/blk.bin" -l "$OUT/btt.d2c" -q "$OUT/btt.q2c"

# 6. perf record -g of every CPU during a direct read (folded and drawn on the host: inferno has
# no Debian package).
step perf.record perf record -e cpu-clock -F 999 -g -a -o "$W/perf.data" -- dd if=$DEV of=/dev/null bs=1M count="$TRACE_MB" iflag=direct
step perf.script perf script -i "$W/perf.data"
exit 0
