#!/usr/bin/env bash
# labs/fio_engines/run.sh: what fio's parameters do, measured with fio's JSON, perf and iostat.
#
#   sudo labs/fio_engines/run.sh [--quick] [--out DIR] [--scratch DIR] [--only GROUP,..] [--host LABEL]
#                                [--device DEV --yes-destroy-data]
#
# Every fio job is one step, with its job file from this folder and its parameters in
# environment variables that the job file reads as ${VAR} (fio's own substitution):
#
#   env FIO_ENGINE=libaio FIO_IODEPTH=32 FIO_RW=randread FIO_FILE=F FIO_SIZE=1g FIO_RUNTIME=2 \
#     perf stat -x, -o STEP.perf -e block:block_rq_issue --filter 'dev == N' ... -a -- \
#     fio --output-format=json labs/fio_engines/engines.fio
#
# fio's JSON report (standard output) is the only source of IOPS, bandwidth, latency
# percentiles and fio's CPU time; perf stat counts the block layer's tracepoints on the
# target's device system-wide while the job runs; `iostat -x -y -o JSON 1 DEV` runs beside
# each job (started before it, stopped with SIGINT after it, so its JSON is complete).
# In the original group of a full run, `pidstat -u -r -h -H -l -C 'aux-path=SCRATCH ' 1` also
# runs beside each job: the %CPU and RSS of each of the job's fio processes each second, what
# htop shows on fio's lines. fio gets --aux-path=SCRATCH (where it would put any file of its
# own) so that its command line, which pidstat -l -C matches, is this run's and no other fio's.
# (Quick mode's jobs of half a second leave pidstat, and iostat, no whole 1-s interval: pidstat
# is skipped there, and the block layer's counts come from perf alone.)
#
# Every measuring step carries its case as data (lab_run --case KEY=VALUE: experiment, engine,
# iodepth, rw, bs, io, ..., the repetition `rep` and the `tool` whose output it is); record.py
# reads those, never a step's name. Repetitions are interleaved: each pass runs every case of
# its group once, then the next pass. The cases the claims read run as often in quick mode as
# in full: 8 passes of the original and layout groups, 5 of the engines group. Full mode also
# runs 3 passes of the groups no claim reads (buffered, blocksize, numjobs, profile; strace once).
# Quick mode runs fewer cases, never fewer passes: the cases the claims read (the buffered,
# blocksize, numjobs and profile groups are skipped and say so), with shorter jobs, and strace's two
# block sizes. Beside strace -c of the 1 KiB job, the same job with fio's --thread (quick or full).
#
# The setup group also reads the target disk's scheduler and queue limits (queue/scheduler,
# max_sectors_kb, max_segments, nr_requests) as a step. The original group adds, beside the
# original's jobs, libaio at iodepth 32 with batched submission (iodepth_batch_submit and
# iodepth_batch_complete_min = 32) and buffered against direct writes with end_fsync=1.
#
# Groups: setup (target, probes, queue limits, lay out the file), original, engines, buffered,
# blocksize, layout, numjobs, strace, profile (full runs only: perf record -g of the buffered
# job and its flame graph; strace -c -w beside strace -c). The lab writes only in its scratch directory, unless --device DEV and
# --yes-destroy-data are both given: then fio reads and WRITES the raw device DEV, which
# must not be mounted, used as swap or held by another device (LVM, RAID, dm-crypt).
# shellcheck source=../lib/lab.sh disable=SC2317 # group_* functions are called by lab_main
source "$(dirname "$0")/../lib/lab.sh"

lab_define fio_engines "fio: engines, iodepth, buffered vs direct, block size, file layout, numjobs" \
  fio perf iostat pidstat strace inferno-flamegraph
lab_group setup "target file or device, capability probes, lay out the test file" always
lab_group original "the original's jobs: 4 KiB sequential writes, libaio vs psync at iodepth 1 and 2, buffered, 1k/4M blocks, strace -c"
lab_group engines "psync, libaio, io_uring at iodepth 1-32: 4 KiB random read/write, O_DIRECT"
lab_group buffered "buffered vs direct 4 KiB random I/O; cold and warm page cache"
lab_group blocksize "block size 1k-4m, sequential read/write, direct and buffered"
lab_group layout "written vs sparse vs fallocated file; random write with/without fsync; reading holes"
lab_group numjobs "numjobs 1, 2, 4 psync processes"
lab_group strace "strace -c -f of fio itself: psync vs libaio"
lab_group profile "perf record -g of the original's buffered job (flame graph); strace -c -w beside strace -c"

# ---- lab-specific options (lab.sh does not know them): parsed here, the rest go to lab_main
fio_die() { printf '%s: %s\n' "$(basename "$0")" "$1" >&2; exit 2; }

FIO_DEVICE="" FIO_YES=0 FIO_HELP=0 LAB_REST=()
while (($#)); do
  case "$1" in
    --device) (($# >= 2)) || fio_die "--device needs a block device path"; FIO_DEVICE=$2; shift ;;
    --device=*) FIO_DEVICE=${1#*=} ;;
    --yes-destroy-data) FIO_YES=1 ;;
    -h|--help) FIO_HELP=1 ;;
    --out|--scratch|--only|--host) LAB_REST+=("$1"); if (($# >= 2)); then LAB_REST+=("$2"); shift; fi ;;
    *) LAB_REST+=("$1") ;;
  esac
  shift
done

if ((FIO_HELP)); then
  lab_usage
  cat <<'EOF'

fio_engines options:
  --device DEV          run the engines, buffered, blocksize, numjobs and strace jobs on the
                        raw block device DEV instead of a file in the scratch directory.
                        fio WRITES to DEV: everything on it is destroyed.
  --yes-destroy-data    required with --device. A device that is mounted (or has a mounted
                        partition), is used as swap or is held by another device is refused
                        even then.
EOF
  exit 0
fi

# fio_check_device DEV: exit 2 with a one-line reason unless DEV is a block device fio may
# overwrite: --yes-destroy-data given, writable, not mounted (nor any of its partitions or
# holders), not swap, not held by dm/md. Nothing is opened for writing here.
fio_check_device() {
  local dev=$1 real n majmin holders
  ((FIO_YES)) || fio_die "refusing --device $dev without --yes-destroy-data: fio would overwrite the data on it"
  [[ -b $dev ]] || fio_die "--device $dev: not a block device"
  real=$(realpath -- "$dev")
  [[ -w $real ]] || fio_die "--device $dev: not writable by this user (run as root)"
  while read -r n majmin; do
    [[ -n $n ]] || continue
    if findmnt -rn --source "$n" >/dev/null 2>&1 ||
       awk -v mm="$majmin" '$3 == mm {found=1} END {exit !found}' /proc/self/mountinfo; then
      local where; where=$(findmnt -rn -o TARGET --source "$n" 2>/dev/null | head -n1) || true
      [[ -n $where ]] || where=$(awk -v mm="$majmin" '$3 == mm {print $5; exit}' /proc/self/mountinfo)
      fio_die "refusing --device $dev: $n is mounted at $where"
    fi
    if awk -v d="$n" 'NR > 1 && $1 == d {found=1} END {exit !found}' /proc/swaps; then
      fio_die "refusing --device $dev: $n is in use as swap"
    fi
  done < <(lsblk -nrpo NAME,MAJ:MIN -- "$real" 2>/dev/null)
  holders=$(ls "/sys/class/block/$(basename "$real")/holders" 2>/dev/null || true)
  [[ -z $holders ]] || fio_die "refusing --device $dev: held by ${holders//$'\n'/ } (LVM, RAID or dm)"
}
[[ -z $FIO_DEVICE ]] || fio_check_device "$FIO_DEVICE"
((FIO_YES == 0)) || [[ -n $FIO_DEVICE ]] || fio_die "--yes-destroy-data is only meaningful with --device DEV"

# ---- state set by the setup group --------------------------------------------------------
REPS=5 CLAIM_REPS=8 OTHER_REPS=3 SIZE="" RUNTIME="" ORIG_RUNTIME="" TARGET="" FS="" DISK="" LBS=512 SETUP_OK=0
PERF_EVENTS=() PERF_WHY="" IOSTAT_WHY="" FALLOC_WHY="" IOSTAT_PID=""
PIDSTAT_WHY="" PIDSTAT_PID="" FIO_PIDSTAT=0
declare -A ENGINE_WHY=()

# dev_t as the kernel stores it in trace events (MKDEV: major << 20 | minor), for --filter.
kdev() { local mm=$1; echo $(( (${mm%%:*} << 20) | ${mm##*:} )); }

group_setup() {
  REPS=5         # passes over the engines group's cases, which claims read (quick or full)
  # Passes over the original and layout groups: their claims compare IOPS and per-call times
  # that vary by a third between runs on a shared virtual disk, and need more samples.
  CLAIM_REPS=8
  OTHER_REPS=3   # passes over the groups no claim reads (buffered, blocksize, numjobs): full runs only
  SIZE=$(lab_quick 256m 1g)
  RUNTIME=$(lab_quick 500ms 2)        # fio's time units; a number alone is seconds
  ORIG_RUNTIME=$(lab_quick 500ms 4)   # full: long enough for pidstat's and iostat's 1-s intervals
  local src="" kname="" type="" pkname="" mm="" disk_mm=""
  if [[ -n $FIO_DEVICE ]]; then
    TARGET=$(realpath -- "$FIO_DEVICE"); FS=blockdev; src=$TARGET
    lab_run target -- lsblk -o NAME,MAJ:MIN,SIZE,TYPE,MOUNTPOINT,MODEL "$TARGET" || return 1
    local bytes; bytes=$(blockdev --getsize64 "$TARGET") || return 1
    if ((bytes < $(lab_quick 268435456 1073741824))); then SIZE=$((bytes / 1048576))m; fi
  else
    TARGET="$LAB_SCRATCH/data.dat"
    lab_run target -- findmnt -T "$LAB_SCRATCH" || return 1
    read -r src FS < <(findmnt -n -o SOURCE,FSTYPE -T "$LAB_SCRATCH") || true
    src=${src%%\[*}   # btrfs: /dev/sda2[/@home]
    if [[ ! -b $src ]]; then   # e.g. /dev/root: find the device by the filesystem's major:minor
      local fsmm; fsmm=$(findmnt -n -o MAJ:MIN -T "$LAB_SCRATCH" | tr -d ' ') || true
      [[ ! -e /sys/dev/block/$fsmm ]] || src="/dev/$(basename "$(readlink -f "/sys/dev/block/$fsmm")")"
    fi
  fi
  # The block device under the target, as iostat and the block tracepoints name it.
  if [[ -b $src ]]; then
    read -r kname type pkname mm < <(lsblk -ndro KNAME,TYPE,PKNAME,MAJ:MIN -- "$src" | awk '{ if (NF == 3) print $1, $2, "-", $3; else print }') || true
  fi
  case "$type" in
    disk|loop) DISK=$kname; disk_mm=$mm ;;
    part) DISK=$pkname; disk_mm=$(lsblk -ndro MAJ:MIN "/dev/$pkname") ;;
    "") DISK="" ;;
    *) DISK=$kname ;;   # dm, md, ...: requests are counted on the devices below it
  esac
  if [[ $FS == tmpfs || -z $DISK ]]; then
    lab_skip device "the scratch filesystem ($FS on ${src:-?}) has no block device under it: O_DIRECT is accepted but only copies memory, iostat has no device to watch, and block request counts are of other devices"
    IOSTAT_WHY="no block device under the scratch directory ($FS)"
  fi
  LBS=$(cat "/sys/class/block/${DISK:-none}/queue/logical_block_size" 2>/dev/null || echo 512)
  # The target disk's elevator and queue limits, which decide what can merge and how large a
  # request may grow: the I/O scheduler (bracketed), the largest request (max_sectors_kb), the
  # most scattered pieces of memory one request may carry (max_segments), the requests the
  # scheduler may hold (nr_requests). Read once, as they are; the lab changes none of them.
  if [[ -n $DISK && $FS != tmpfs && -d /sys/class/block/$DISK/queue ]]; then
    local q qfiles=()
    for q in scheduler max_sectors_kb max_segments nr_requests; do
      [[ ! -r /sys/class/block/$DISK/queue/$q ]] || qfiles+=("/sys/class/block/$DISK/queue/$q")
    done
    ((${#qfiles[@]} == 0)) || lab_run --case experiment=queue --case "disk=$DISK" --case tool=sysfs \
      target.queue -- grep -H . "${qfiles[@]}" || true
  else
    lab_skip target.queue "no block device under the scratch directory ($FS): no I/O scheduler or queue limits to read"
  fi
  # perf: the three block tracepoints, filtered to the target's disk when it has one.
  if ! command -v perf >/dev/null 2>&1; then
    PERF_WHY="perf not installed"
  elif ! perf stat -e block:block_rq_complete -a -- true >/dev/null 2>&1; then
    PERF_WHY="perf cannot count block tracepoints system-wide here (needs root or perf_event_paranoid <= -1, and tracefs)"
  else
    local ev filt=""
    if [[ -n $DISK && $FS != tmpfs && ( $type == disk || $type == loop || $type == part ) ]]; then
      filt="dev == $(kdev "$disk_mm")"
    fi
    for ev in block:block_rq_issue block:block_rq_complete block:block_bio_queue; do
      PERF_EVENTS+=(-e "$ev")
      if [[ -n $filt ]]; then
        if [[ $ev == block:block_bio_queue && $type == part ]]; then
          PERF_EVENTS+=(--filter "$filt || dev == $(kdev "$mm")")   # bios are queued on the partition
        else
          PERF_EVENTS+=(--filter "$filt")
        fi
      fi
    done
  fi
  [[ -z $PERF_WHY ]] || lab_skip perf "$PERF_WHY: jobs run without block request counts"
  if [[ -z $IOSTAT_WHY ]] && ! command -v iostat >/dev/null 2>&1; then IOSTAT_WHY="iostat not installed (Debian: sysstat)"; fi
  [[ -z $IOSTAT_WHY ]] || lab_skip iostat "$IOSTAT_WHY: jobs run without iostat"
  command -v pidstat >/dev/null 2>&1 || PIDSTAT_WHY="pidstat not installed (Debian: sysstat)"
  [[ -n $PIDSTAT_WHY || $(lab_quick quick full) == full ]] ||
    PIDSTAT_WHY="quick mode's jobs last $ORIG_RUNTIME: pidstat's 1-s intervals need a job of at least 2 s to leave one whole interval after a process's first"
  [[ -z $PIDSTAT_WHY ]] || lab_skip pidstat "$PIDSTAT_WHY: the original group runs without CPU% and RSS per fio process"
  # Engines: compiled into this fio, and allowed by this kernel (io_uring can be disabled).
  local e
  for e in libaio io_uring; do
    if ! fio --enghelp="$e" >/dev/null 2>&1; then
      ENGINE_WHY[$e]="this fio has no $e engine"
    elif ! fio --name=probe --filename="$LAB_SCRATCH/probe-$e" --size=64k --bs=4k --rw=read --ioengine="$e" \
        --output-format=json >/dev/null 2>"$LAB_SCRATCH/probe-$e.err"; then
      ENGINE_WHY[$e]="fio's $e engine fails here: $(tail -n 1 "$LAB_SCRATCH/probe-$e.err")"
    fi
    rm -f "$LAB_SCRATCH/probe-$e"
  done
  if [[ -z $FIO_DEVICE ]] && ! fallocate -l 4096 "$LAB_SCRATCH/probe-falloc" 2>/dev/null; then
    FALLOC_WHY="fallocate is not supported by $FS"
  fi
  rm -f "$LAB_SCRATCH/probe-falloc"
  printf 'target=%s\nfs=%s\ndisk=%s\nsize=%s\nruntime=%s\noriginal_runtime=%s\nreps=%s\nclaim_reps=%s\nlogical_block_size=%s\n' \
    "$TARGET" "$FS" "$DISK" "$SIZE" "$RUNTIME" "$ORIG_RUNTIME" "$REPS" "$CLAIM_REPS" "$LBS" > "$LAB_RUN/target.txt"
  if [[ -n $FIO_DEVICE ]]; then
    lab_skip prepare "the target is the block device $TARGET: fio uses it as it is"
  else
    lab_run prepare -- env "FIO_FILE=$TARGET" "FIO_SIZE=$SIZE" fio --output-format=json "$LAB_DIR/prepare.fio" || return 1
  fi
  SETUP_OK=1
}

# need_setup NAME: the experiments need the target; if setup failed, say so instead.
need_setup() { ((SETUP_OK)) || { lab_skip "$1" "setup failed: no target to run fio on"; return 1; }; }

# ---- one fio job = one step ----------------------------------------------------------

iostat_start() {
  IOSTAT_PID=""
  [[ -z $IOSTAT_WHY ]] || return 0
  lab_spawn "$1.iostat" -- iostat -x -y -o JSON 1 "$DISK"
  IOSTAT_PID=$LAB_SPAWNED
  # iostat prints its JSON header once it has read its first snapshot of the counters.
  lab_wait_for "$LAB_RUN/raw/$1.iostat.out" '"statistics"' 5 || true
}

# SIGINT makes iostat close its JSON document; SIGTERM, the cleanup stack's signal, does not in
# sysstat 12.6 (the reference host's 12.6.1), only since sysstat 12.7.8.
iostat_stop() {
  [[ -n $IOSTAT_PID ]] || return 0
  kill -INT "$IOSTAT_PID" 2>/dev/null || true
  wait "$IOSTAT_PID" 2>/dev/null || true
  IOSTAT_PID=""
}

# pidstat beside a job of the original group (FIO_PIDSTAT=1): %CPU and RSS, each second,
# of every process whose command line (-l) has this run's --aux-path (-C takes a regular
# expression; -h: one line per process, -H: Unix time). It prints its first line at once;
# SIGINT makes it exit cleanly, with every line written.
pidstat_start() {
  PIDSTAT_PID=""
  ((FIO_PIDSTAT)) && [[ -z $PIDSTAT_WHY ]] || return 0
  lab_spawn "$1.pidstat" -- env LC_ALL=C pidstat -u -r -h -H -l -C "aux-path=${LAB_SCRATCH//./\\.} " 1
  PIDSTAT_PID=$LAB_SPAWNED
  lab_wait_for "$LAB_RUN/raw/$1.pidstat.out" '^Linux' 5 || true
}

pidstat_stop() {
  [[ -n $PIDSTAT_PID ]] || return 0
  kill -INT "$PIDSTAT_PID" 2>/dev/null || true
  wait "$PIDSTAT_PID" 2>/dev/null || true
  PIDSTAT_PID=""
}

# fio_job [--case KEY=VALUE]... NAME JOBFILE [VAR=VALUE...]: run fio on JOBFILE with VAR=VALUE
# in its environment (FIO_FILE, FIO_SIZE and FIO_RUNTIME added unless given), under perf stat
# when it can count, with iostat sampling the device meanwhile (and pidstat the fio
# processes, if FIO_PIDSTAT=1). A job given --case fields is a measuring step: its case is
# those fields plus tool=fio; a job without (the page-cache warm-up) has none.
# Returns 1 if the job failed.
fio_job() {
  local fields=()
  while [[ $1 == --case ]]; do fields+=(--case "$2"); shift 2; done
  ((${#fields[@]} == 0)) || fields+=(--case tool=fio)
  local name=$1 job=$2 rc=0 mark; shift 2
  local cmd=(env "$@")
  [[ " $* " == *" FIO_FILE="* ]] || cmd+=("FIO_FILE=$TARGET")
  [[ " $* " == *" FIO_RUNTIME="* ]] || cmd+=("FIO_RUNTIME=$RUNTIME")
  cmd+=("FIO_SIZE=$SIZE")
  if [[ -z $PERF_WHY ]]; then
    # shellcheck disable=SC2054 # -x, is perf's option (comma-separated output)
    cmd+=(perf stat -x, -o "$LAB_RUN/raw/$name.perf" "${PERF_EVENTS[@]}" -a --)
  fi
  cmd+=(fio --output-format=json)
  if ((FIO_PIDSTAT)) && [[ -z $PIDSTAT_WHY ]]; then cmd+=("--aux-path=$LAB_SCRATCH"); fi
  cmd+=("$LAB_DIR/$job")
  mark=$(lab_mark)
  iostat_start "$name"
  pidstat_start "$name"
  lab_run ${fields[@]+"${fields[@]}"} "$name" -- "${cmd[@]}" || rc=1
  pidstat_stop
  iostat_stop
  lab_unwind "$mark"
  return "$rc"
}

# sync_job NAME [--case KEY=VALUE]...: write back the target's dirty pages (fsync of that one
# file) and count the block requests that takes: the bill for a buffered write job, paid after
# it ended. Its case is the write job's own fields (rep included) with tool=sync: record.py
# pairs the two by those fields.
sync_job() {
  local name=$1; shift
  if [[ -z $PERF_WHY ]]; then
    lab_run "$@" --case tool=sync "$name" -- perf stat -x, -o "$LAB_RUN/raw/$name.perf" "${PERF_EVENTS[@]}" -a -- sync "$TARGET"
  else
    lab_run "$@" --case tool=sync "$name" -- sync "$TARGET"
  fi
}

engine_ok() {
  local e=$1 step=$2
  [[ $e == psync || -z ${ENGINE_WHY[$e]:-} ]] && return 0
  lab_skip "$step" "${ENGINE_WHY[$e]}"
  return 1
}

# direct_too_small NAME BS: with O_DIRECT a block smaller than the device's logical block size
# is refused: record NAME as skipped and return 0 in that case.
direct_too_small() {
  local bytes; bytes=$(numfmt --from=iec "${2^^}")
  ((bytes < LBS)) || return 1
  lab_skip "$1" "O_DIRECT needs I/O of at least the device's logical block size ($LBS bytes)"
}

# The original investigation's jobs, with the settings its write-up gives: 4 KiB writes
# (IOPS x 4 KiB = its MiB/s), rw=write (it names "rw from write to read"), direct=1 except
# for the buffered job, libaio at iodepth 1 as the base job; then psync, iodepth 2,
# direct=0, and 1k/4M blocks, one change at a time; and libaio with 32 sequential writes in
# flight, where the block layer has adjacent requests to merge (iostat's wrqm/s). Every job
# runs ORIG_RUNTIME seconds (time_based), so that block request counts cover equal windows.

# original_job NAME ENGINE IODEPTH BS IO REP [BATCH [END_FSYNC [INVALIDATE]]]: one job of the
# original group (IO: direct or buffered). BATCH (default 1, fio's own) is iodepth_batch_submit
# and iodepth_batch_complete_min. END_FSYNC=1 makes it a job of the "original flush" experiment:
# fio fsyncs the file when its writes end and its run time includes the flush. INVALIDATE=0
# (fio's default is 1) makes it a job of the "original no invalidate" experiment: fio leaves the
# file's cached pages alone when it opens the file and each time a time_based job wraps around.
# A buffered job without END_FSYNC is followed by the sync that writes its data back.
original_job() {
  local name=$1 e=$2 qd=$3 bs=$4 io=$5 r=$6 batch=${7:-1} fsync=${8:-0} inval=${9:-1} direct=1 exp=original
  [[ $io == direct ]] || direct=0
  ((fsync == 0)) || exp="original flush"
  ((inval == 1)) || exp="original no invalidate"
  local case=(--case "experiment=$exp" --case "engine=$e" --case "iodepth=$qd" --case "bs=$(numfmt --from=iec "${bs^^}")"
              --case "io=$io" --case rw=write --case "batch=$batch" --case "end_fsync=$fsync" --case "rep=$r")
  ((inval == 1)) || case+=(--case invalidate=0)
  if ((direct)) && direct_too_small "$name" "$bs"; then return 0; fi
  engine_ok "$e" "$name" || return 0
  fio_job "${case[@]}" "$name" original.fio "FIO_RUNTIME=$ORIG_RUNTIME" FIO_ENGINE="$e" FIO_IODEPTH="$qd" \
    FIO_BS="$bs" FIO_DIRECT="$direct" FIO_BATCH="$batch" FIO_END_FSYNC="$fsync" FIO_INVALIDATE="$inval" || return 0
  if [[ $io == buffered ]] && ((fsync == 0)); then sync_job "$name.sync" "${case[@]}" || true; fi
}

# original_strace NAME BS REP [--thread]: strace -c -f of the base job at block size BS, as the
# original did (strace's table on standard error, fio's JSON on standard output). With
# --thread, fio runs the job as a thread of its main process instead of a child process
# (experiment "strace threads"): which call strace charges with the job's system time.
original_strace() {
  local name=$1 bs=$2 r=$3 thread=(${4:+"$4"}) experiment="original strace"
  [[ -z ${4:-} ]] || experiment="strace threads"
  direct_too_small "$name" "$bs" && return 0
  engine_ok libaio "$name" || return 0
  lab_run --case "experiment=$experiment" --case engine=libaio --case iodepth=1 \
    --case "bs=$(numfmt --from=iec "${bs^^}")" --case io=direct --case rw=write --case "rep=$r" --case tool=strace \
    "$name" -- env FIO_ENGINE=libaio FIO_IODEPTH=1 FIO_BS="$bs" FIO_DIRECT=1 FIO_BATCH=1 FIO_END_FSYNC=0 FIO_INVALIDATE=1 "FIO_FILE=$TARGET" \
    "FIO_SIZE=$SIZE" "FIO_RUNTIME=$ORIG_RUNTIME" strace -c -f -- fio ${thread[@]+"${thread[@]}"} --output-format=json \
    "$LAB_DIR/original.fio" || true
}

group_original() {
  need_setup original || return 0
  local r e qd bs eq strace_ok=1
  lab_require original.strace cmd:strace || strace_ok=0
  for ((r = 1; r <= CLAIM_REPS; r++)); do
    FIO_PIDSTAT=1
    # engine:iodepth; psync at iodepth 2 (fio caps it at 1) only in full mode, no claim reads it.
    # The 1k job right after the 4k one: a claim pairs them, repetition by repetition.
    for eq in $(lab_quick "libaio:1 psync:1 libaio:2 libaio:32" "libaio:1 psync:1 libaio:2 psync:2 libaio:32"); do
      e=${eq%:*} qd=${eq#*:}
      original_job "original.write.$e.qd$qd.4k.direct.r$r" "$e" "$qd" 4k direct "$r"
      [[ $eq != libaio:1 ]] || original_job "original.write.libaio.qd1.1k.direct.r$r" libaio 1 1k direct "$r"
      # Right after fio's default (one write per io_submit): the same 32 writes handed to
      # the kernel together, in one io_submit (one plug), and reaped together.
      [[ $eq != libaio:32 ]] || original_job "original.write.libaio.qd32.batch32.4k.direct.r$r" libaio 32 4k direct "$r" 32
    done
    original_job "original.write.libaio.qd1.4k.buffered.r$r" libaio 1 4k buffered "$r"
    # The same buffered job with invalidate=0, right after (a claim pairs the two): whether
    # the writeback requests during the job come from fio's invalidate at each wrap-around.
    # Full runs only: a quick job (500 ms) does not get round the file.
    ((LAB_QUICK)) || original_job "original.noinval.write.libaio.qd1.4k.buffered.r$r" libaio 1 4k buffered "$r" 1 0 0
    original_job "original.write.libaio.qd1.4m.direct.r$r" libaio 1 4m direct "$r"
    # Buffered against direct, each with end_fsync=1 (its run time includes the flush), back to
    # back. Each starts with none of the file's pages cached: fio's invalidate=1 drops them
    # (POSIX_FADV_DONTNEED) as the job opens the file, and no dirty page is left from the job
    # before (the flush, or the sync after the unflushed buffered job, wrote them back). The
    # buffered job (time_based) drops them again, starting writeback of the dirty ones, each
    # time it wraps around to the file's start (fio's loop_cache_invalidate): mid-run.
    original_job "original.flush.write.libaio.qd1.4k.direct.r$r" libaio 1 4k direct "$r" 1 1
    original_job "original.flush.write.libaio.qd1.4k.buffered.r$r" libaio 1 4k buffered "$r" 1 1
    FIO_PIDSTAT=0
    ((strace_ok)) || continue
    for bs in $(lab_quick "1k 4m" "1k 4k 4m"); do
      original_strace "original.strace.write.libaio.qd1.$bs.direct.r$r" "$bs" "$r"
      # The same job as a thread, right after: a claim pairs the two, repetition by repetition.
      [[ $bs != 1k ]] || original_strace "original.strace.thread.write.libaio.qd1.1k.direct.r$r" 1k "$r" --thread
    done
  done
}

group_engines() {
  need_setup engines || return 0
  local r e rw qd name
  for ((r = 1; r <= REPS; r++)); do
    for rw in $(lab_quick "randread" "randread randwrite"); do
      for e in $(lab_quick "psync libaio" "psync libaio io_uring"); do
        for qd in $(lab_quick "32" "1 2 4 32"); do
          name="engines.$e.$rw.qd$qd.r$r"
          engine_ok "$e" "$name" || continue
          fio_job --case experiment=engines --case "engine=$e" --case "iodepth=$qd" --case "rw=$rw" --case "rep=$r" \
            "$name" engines.fio FIO_ENGINE="$e" FIO_IODEPTH="$qd" FIO_RW="$rw" || true
        done
      done
    done
  done
}

# buffered_job NAME RW MODE REP VAR=VALUE...: one job of the buffered group (MODE: direct,
# buffered cold, buffered warm, buffered).
buffered_job() {
  local name=$1 rw=$2 mode=$3 r=$4; shift 4
  fio_job --case experiment=buffered --case "rw=$rw" --case "mode=$mode" --case "rep=$r" \
    "$name" buffered.fio FIO_RW="$rw" "$@"
}

# quick_skip GROUP: in quick mode, record GROUP as skipped (no claim reads it) and return 0.
quick_skip() {
  ((LAB_QUICK)) || return 1
  lab_skip "$1" "quick mode runs the cases the claims read, and none reads this group: run without --quick"
}

group_buffered() {
  need_setup buffered || return 0
  quick_skip buffered && return 0
  local r
  for ((r = 1; r <= OTHER_REPS; r++)); do
    buffered_job "buffered.randread.direct.r$r" randread direct "$r" FIO_DIRECT=1 FIO_INVALIDATE=1 || true
    buffered_job "buffered.randread.cold.r$r" randread "buffered cold" "$r" FIO_DIRECT=0 FIO_INVALIDATE=1 || true
    # A raw block device loses its page cache when its last opener closes it (the kernel
    # syncs and drops the device's mapping): hold it open from the warm-up to the warm job.
    local mark; mark=$(lab_mark)
    [[ -z $FIO_DEVICE ]] || lab_spawn "buffered.hold.r$r" -- flock --shared "$TARGET" sleep 3600
    fio_job "buffered.warmup.r$r" warmup.fio || true
    buffered_job "buffered.randread.warm.r$r" randread "buffered warm" "$r" FIO_DIRECT=0 FIO_INVALIDATE=0 || true
    lab_unwind "$mark"
    buffered_job "buffered.randwrite.direct.r$r" randwrite direct "$r" FIO_DIRECT=1 FIO_INVALIDATE=1 || true
    if buffered_job "buffered.randwrite.buffered.r$r" randwrite buffered "$r" FIO_DIRECT=0 FIO_INVALIDATE=1; then
      sync_job "buffered.randwrite.buffered.r$r.sync" --case experiment=buffered --case rw=randwrite \
        --case mode=buffered --case "rep=$r" || true
    fi
  done
}

group_blocksize() {
  need_setup blocksize || return 0
  if [[ $(lab_quick quick full) == quick ]]; then
    lab_skip blocksize "quick mode runs the cases the claims read, and none reads this group (the original group has its own 1k/4k/4m jobs): run without --quick"
    return 0
  fi
  local r rw io bs direct name
  for ((r = 1; r <= OTHER_REPS; r++)); do
    for rw in read write; do
      for io in direct buffered; do
        if [[ $io == direct ]]; then direct=1; else direct=0; fi
        for bs in $(lab_quick "4k 4m" "1k 4k 64k 4m"); do
          name="blocksize.$rw.$io.$bs.r$r"
          if ((direct)) && direct_too_small "$name" "$bs"; then continue; fi
          local case=(--case experiment=blocksize --case "rw=$rw" --case "io=$io"
                      --case "bs=$(numfmt --from=iec "${bs^^}")" --case "rep=$r")
          fio_job "${case[@]}" "$name" blocksize.fio FIO_RW="$rw" FIO_BS="$bs" FIO_DIRECT="$direct" || continue
          if [[ $rw == write && $io == buffered ]]; then sync_job "$name.sync" "${case[@]}" || true; fi
        done
      done
    done
  done
}

# layout_make NAME KIND FILE: make FILE of layout KIND, new, as one step. The written (regular)
# file is written in full by prepare.fio, which fsyncs it (fio's create_fsync), so that every
# layout gets a new file, a new placement on the disk below, for every job.
layout_make() {
  rm -f "$3"
  case "$2" in
    sparse) lab_run "$1" -- truncate -s "$SIZE" "$3" ;;
    fallocated) lab_run "$1" -- fallocate -l "$SIZE" "$3" ;;
    regular) lab_run "$1" -- env "FIO_FILE=$3" "FIO_SIZE=$SIZE" fio --output-format=json "$LAB_DIR/prepare.fio" ;;
  esac
}

# layout_stat NAME KIND FSYNC WHEN REP FILE: the blocks allocated to FILE (stat), as a step
# whose case says which file and when (made, after randwrite).
layout_stat() {
  lab_run --case experiment=layout --case "layout=$2" --case "fsync=$3" --case "when=$4" --case "rep=$5" \
    --case tool=stat "$1" -- stat -c '%s %b %B' "$6"
}

group_layout() {
  need_setup layout || return 0
  if [[ -n $FIO_DEVICE ]]; then lab_skip layout "the target is a block device: file layouts need a file"; return 0; fi
  local r kind f file name
  for ((r = 1; r <= CLAIM_REPS; r++)); do
    for f in 0 1; do
      for kind in regular sparse fallocated; do
        name="layout.$kind.randwrite.fsync$f.r$r"
        # fsync=1: the claim compares sparse with regular; the fallocated file in full runs only
        if [[ $kind == fallocated && $f == 1 ]] && ((LAB_QUICK)); then
          ((r > 1)) || lab_skip "layout.$kind.randwrite.fsync$f" "quick mode: no claim reads the fallocated file's writes with fsync=1"
          continue
        fi
        if [[ $kind == fallocated && -n $FALLOC_WHY ]]; then lab_skip "$name" "$FALLOC_WHY"; continue; fi
        file="$LAB_SCRATCH/$kind.dat"
        layout_make "$name.make" "$kind" "$file" || continue
        layout_stat "$name.before" "$kind" "$f" made "$r" "$file" || true
        fio_job --case experiment=layout --case "layout=$kind" --case rw=randwrite --case "fsync=$f" --case "rep=$r" \
          "$name" layout.fio FIO_FILE="$file" FIO_RW=randwrite FIO_FSYNC="$f" || true
        layout_stat "$name.after" "$kind" "$f" "after randwrite" "$r" "$file" || true
        rm -f "$file"
      done
    done
    # Reads: a new written file, a new sparse file (all holes) and a new fallocated one
    # (all unwritten extents; not in quick mode, no claim reads it).
    for kind in $(lab_quick "regular sparse" "regular sparse fallocated"); do
      name="layout.$kind.randread.fsync0.r$r"
      if [[ $kind == fallocated && -n $FALLOC_WHY ]]; then lab_skip "$name" "$FALLOC_WHY"; continue; fi
      file="$LAB_SCRATCH/$kind.dat"
      layout_make "$name.make" "$kind" "$file" || continue
      fio_job --case experiment=layout --case "layout=$kind" --case rw=randread --case fsync=0 --case "rep=$r" \
        "$name" layout.fio FIO_FILE="$file" FIO_RW=randread FIO_FSYNC=0 || true
      rm -f "$file"
    done
  done
}

group_numjobs() {
  need_setup numjobs || return 0
  quick_skip numjobs && return 0
  local r rw n
  for ((r = 1; r <= OTHER_REPS; r++)); do
    for rw in randread randwrite; do
      for n in 1 2 4; do
        fio_job --case experiment=numjobs --case "numjobs=$n" --case "rw=$rw" --case "rep=$r" \
          "numjobs.$rw.nj$n.r$r" numjobs.fio FIO_RW="$rw" FIO_NUMJOBS="$n" || true
      done
    done
  done
}

# strace -c prints its table on standard error when fio exits (raw/strace.ENGINE.err);
# fio's JSON report stays on standard output.
group_strace() {
  need_setup strace || return 0
  lab_require strace cmd:strace || return 0
  local e qd
  for e in psync libaio; do
    if [[ $e == psync ]]; then qd=1; else qd=32; fi
    engine_ok "$e" "strace.$e" || continue
    lab_run --case experiment=strace --case "engine=$e" --case "iodepth=$qd" --case rw=randread --case tool=strace \
      "strace.$e" -- env FIO_ENGINE="$e" FIO_IODEPTH="$qd" FIO_RW=randread "FIO_FILE=$TARGET" \
      "FIO_SIZE=$SIZE" "FIO_RUNTIME=$RUNTIME" \
      strace -c -f -- fio --output-format=json "$LAB_DIR/engines.fio" || true
  done
}

# perf record -g of the original's buffered job (libaio, iodepth 1, 4 KiB, no flush: the
# note's flame graph), drawn as a flame graph (labkit flame, inferno). Only fio's own processes
# are sampled, not the whole host (-a): the writeback of its pages runs later in kworkers, and
# other work on the host stays out. Then strace -c -f beside strace -c -f -w of the base job at
# 1 KiB and 4 MiB, back to back in each pass: -c alone sums each call's system CPU time, -w
# its wall-clock time (a sleep counts as long as it slept). No claim reads this group: full
# runs only.
group_profile() {
  need_setup profile || return 0
  quick_skip profile && return 0
  engine_ok libaio profile || return 0
  local env=(env FIO_ENGINE=libaio FIO_IODEPTH=1 FIO_BATCH=1 FIO_END_FSYNC=0 FIO_INVALIDATE=1 "FIO_FILE=$TARGET" "FIO_SIZE=$SIZE"
             "FIO_RUNTIME=$ORIG_RUNTIME")
  local pc=(--case experiment=profile --case engine=libaio --case iodepth=1 --case bs=4096 --case io=buffered --case rw=write)
  local data="$LAB_SCRATCH/perf-buffered.data" script="$LAB_SCRATCH/perf-buffered.script"
  if lab_require profile.perf perf; then
    # -F 997: an odd rate, so sampling does not run in lockstep with periodic kernel work.
    # --no-buildid-cache: nothing written to ~/.debug.
    if lab_run "${pc[@]}" --case tool=perf profile.perf.record -- "${env[@]}" FIO_BS=4k FIO_DIRECT=0 \
        perf record -g -F 997 --no-buildid-cache -o "$data" -- fio --output-format=json "$LAB_DIR/original.fio"; then
      lab_run profile.perf.sync -- sync "$TARGET" || true   # its dirty pages, written back before the next job
      if lab_run --stdout "$script" profile.perf.script -- perf script -F "$LAB_PERF_STACKS" -i "$data" && lab_require profile.flame inferno; then
        lab_run "${pc[@]}" --case tool=inferno profile.flame -- "$LAB_PY" -m labkit flame --perf-script "$script" \
          --folded "$LAB_RUN/flame-buffered.folded" --svg "$LAB_RUN/flame-buffered.svg" \
          --title "fio, buffered 4 KiB sequential writes (libaio, iodepth 1, no flush): fio's processes" || true
      fi
    fi
    rm -f "$data" "$script"
  fi
  lab_require profile.strace cmd:strace || return 0
  local r bs clock name w=()
  for ((r = 1; r <= OTHER_REPS; r++)); do
    for bs in 1k 4m; do
      for clock in system wall; do
        name="profile.strace.$clock.$bs.r$r"
        direct_too_small "$name" "$bs" && continue
        if [[ $clock == wall ]]; then w=(strace -c -w -f); else w=(strace -c -f); fi
        lab_run --case "experiment=strace clock" --case "clock=$clock" --case engine=libaio --case iodepth=1 \
          --case "bs=$(numfmt --from=iec "${bs^^}")" --case io=direct --case rw=write --case "rep=$r" --case tool=strace \
          "$name" -- "${env[@]}" FIO_BS="$bs" FIO_DIRECT=1 "${w[@]}" -- fio --output-format=json "$LAB_DIR/original.fio" || true
      done
    done
  done
}

lab_main ${LAB_REST[@]+"${LAB_REST[@]}"}
