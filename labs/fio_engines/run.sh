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
# In the original group, `pidstat -u -r -h -H -l -C 'aux-path=SCRATCH ' 1` also runs beside
# each job: the %CPU and RSS of each of the job's fio processes each second, what htop shows
# on fio's lines. fio gets --aux-path=SCRATCH (where it would put any file of its own) so
# that its command line, which pidstat -l -C matches, is this run's and no other fio's.
#
# Groups: setup (target, probes, lay out the file), original, engines, buffered, blocksize,
# layout, numjobs, strace. The lab writes only in its scratch directory, unless --device DEV and
# --yes-destroy-data are both given: then fio reads and WRITES the raw device DEV, which
# must not be mounted, used as swap or held by another device (LVM, RAID, dm-crypt).
# shellcheck source=../lib/lab.sh disable=SC2317 # group_* functions are called by lab_main
source "$(dirname "$0")/../lib/lab.sh"

lab_define fio_engines "fio: engines, iodepth, buffered vs direct, block size, file layout, numjobs" \
  fio perf iostat pidstat strace
lab_group setup "target file or device, capability probes, lay out the test file" always
lab_group original "the original's jobs: 4 KiB sequential writes, libaio vs psync at iodepth 1 and 2, buffered, 1k/4M blocks, strace -c"
lab_group engines "psync, libaio, io_uring at iodepth 1-32: 4 KiB random read/write, O_DIRECT"
lab_group buffered "buffered vs direct 4 KiB random I/O; cold and warm page cache"
lab_group blocksize "block size 1k-4m, sequential read/write, direct and buffered"
lab_group layout "written vs sparse vs fallocated file; random write with/without fsync; reading holes"
lab_group numjobs "numjobs 1, 2, 4 psync processes"
lab_group strace "strace -c -f of fio itself: psync vs libaio"

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
REPS=1 SIZE="" RUNTIME="" ORIG_RUNTIME="" TARGET="" FS="" DISK="" LBS=512 SETUP_OK=0
PERF_EVENTS=() PERF_WHY="" IOSTAT_WHY="" FALLOC_WHY="" IOSTAT_PID=""
PIDSTAT_WHY="" PIDSTAT_PID="" FIO_PIDSTAT=0
declare -A ENGINE_WHY=()

# dev_t as the kernel stores it in trace events (MKDEV: major << 20 | minor), for --filter.
kdev() { local mm=$1; echo $(( (${mm%%:*} << 20) | ${mm##*:} )); }

group_setup() {
  REPS=$(lab_quick 1 3)
  SIZE=$(lab_quick 256m 1g)
  RUNTIME=$(lab_quick 1 2)
  ORIG_RUNTIME=$(lab_quick 2 4)   # the original group: long enough for pidstat's 1-s intervals
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
  printf 'target=%s\nfs=%s\ndisk=%s\nsize=%s\nruntime=%s\noriginal_runtime=%s\nreps=%s\nlogical_block_size=%s\n' \
    "$TARGET" "$FS" "$DISK" "$SIZE" "$RUNTIME" "$ORIG_RUNTIME" "$REPS" "$LBS" > "$LAB_RUN/target.txt"
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

# SIGINT makes iostat close its JSON document (SIGTERM, the cleanup stack's signal, does not).
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

# fio_job NAME JOBFILE [VAR=VALUE...]: run fio on JOBFILE with VAR=VALUE in its environment
# (FIO_FILE, FIO_SIZE and FIO_RUNTIME added unless given), under perf stat when it can count,
# with iostat sampling the device meanwhile (and pidstat the fio processes, if FIO_PIDSTAT=1).
# Returns 1 if the job failed.
fio_job() {
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
  lab_run "$name" -- "${cmd[@]}" || rc=1
  pidstat_stop
  iostat_stop
  lab_unwind "$mark"
  return "$rc"
}

# sync_job NAME: write back the target's dirty pages (fsync of that one file) and count
# the block requests that takes: the bill for a buffered write job, paid after it ended.
sync_job() {
  if [[ -z $PERF_WHY ]]; then
    lab_run "$1" -- perf stat -x, -o "$LAB_RUN/raw/$1.perf" "${PERF_EVENTS[@]}" -a -- sync "$TARGET"
  else
    lab_run "$1" -- sync "$TARGET"
  fi
}

engine_ok() {
  local e=$1 step=$2
  [[ $e == psync || -z ${ENGINE_WHY[$e]:-} ]] && return 0
  lab_skip "$step" "${ENGINE_WHY[$e]}"
  return 1
}

# The original investigation's jobs, with the settings its write-up gives: 4 KiB writes
# (IOPS x 4 KiB = its MiB/s), rw=write (it names "rw from write to read"), direct=1 except
# for the buffered job, libaio at iodepth 1 as the base job; then psync, iodepth 2,
# direct=0, and 1k/4M blocks, one change at a time. Every job runs ORIG_RUNTIME seconds
# (time_based), so that block request counts are over equal windows.
original_job() {
  local name=$1; shift
  fio_job "$name" original.fio "FIO_RUNTIME=$ORIG_RUNTIME" "$@"
}

group_original() {
  need_setup original || return 0
  local r e qd bs bytes name
  for ((r = 1; r <= REPS; r++)); do
    FIO_PIDSTAT=1
    for qd in 1 2; do
      for e in libaio psync; do
        name="original.write.$e.qd$qd.4k.direct.r$r"
        engine_ok "$e" "$name" || continue
        original_job "$name" FIO_ENGINE="$e" FIO_IODEPTH="$qd" FIO_BS=4k FIO_DIRECT=1 || true
      done
    done
    name="original.write.libaio.qd1.4k.buffered.r$r"
    if engine_ok libaio "$name"; then
      original_job "$name" FIO_ENGINE=libaio FIO_IODEPTH=1 FIO_BS=4k FIO_DIRECT=0 && { sync_job "$name.sync" || true; }
    fi
    for bs in 1k 4m; do
      name="original.write.libaio.qd1.$bs.direct.r$r"
      bytes=$(numfmt --from=iec "${bs^^}")
      if ((bytes < LBS)); then
        lab_skip "$name" "O_DIRECT needs I/O of at least the device's logical block size ($LBS bytes)"
        continue
      fi
      engine_ok libaio "$name" || continue
      original_job "$name" FIO_ENGINE=libaio FIO_IODEPTH=1 FIO_BS="$bs" FIO_DIRECT=1 || true
    done
    FIO_PIDSTAT=0
  done
  # strace -c -f of the base job at each block size, as the original did (table on stderr).
  lab_require original.strace cmd:strace || return 0
  for ((r = 1; r <= REPS; r++)); do
    for bs in $(lab_quick "1k 4m" "1k 4k 4m"); do
      name="original.strace.write.libaio.qd1.$bs.direct.r$r"
      bytes=$(numfmt --from=iec "${bs^^}")
      if ((bytes < LBS)); then
        lab_skip "$name" "O_DIRECT needs I/O of at least the device's logical block size ($LBS bytes)"
        continue
      fi
      engine_ok libaio "$name" || continue
      lab_run "$name" -- env FIO_ENGINE=libaio FIO_IODEPTH=1 FIO_BS="$bs" FIO_DIRECT=1 "FIO_FILE=$TARGET" \
        "FIO_SIZE=$SIZE" "FIO_RUNTIME=$ORIG_RUNTIME" strace -c -f -- fio --output-format=json "$LAB_DIR/original.fio" || true
    done
  done
}

group_engines() {
  need_setup engines || return 0
  local r e rw qd depths
  depths=$(lab_quick "1 32" "1 2 4 32")
  for ((r = 1; r <= REPS; r++)); do
    for rw in randread randwrite; do
      for e in psync libaio io_uring; do
        for qd in $depths; do
          engine_ok "$e" "engines.$e.$rw.qd$qd.r$r" || continue
          fio_job "engines.$e.$rw.qd$qd.r$r" engines.fio FIO_ENGINE="$e" FIO_IODEPTH="$qd" FIO_RW="$rw" || true
        done
      done
    done
  done
}

group_buffered() {
  need_setup buffered || return 0
  local r
  for ((r = 1; r <= REPS; r++)); do
    fio_job "buffered.randread.direct.r$r" buffered.fio FIO_RW=randread FIO_DIRECT=1 FIO_INVALIDATE=1 || true
    fio_job "buffered.randread.cold.r$r" buffered.fio FIO_RW=randread FIO_DIRECT=0 FIO_INVALIDATE=1 || true
    # A raw block device loses its page cache when its last opener closes it (the kernel
    # syncs and drops the device's mapping): hold it open from the warm-up to the warm job.
    local mark; mark=$(lab_mark)
    [[ -z $FIO_DEVICE ]] || lab_spawn "buffered.hold.r$r" -- flock --shared "$TARGET" sleep 3600
    fio_job "buffered.warmup.r$r" warmup.fio || true
    fio_job "buffered.randread.warm.r$r" buffered.fio FIO_RW=randread FIO_DIRECT=0 FIO_INVALIDATE=0 || true
    lab_unwind "$mark"
    fio_job "buffered.randwrite.direct.r$r" buffered.fio FIO_RW=randwrite FIO_DIRECT=1 FIO_INVALIDATE=1 || true
    fio_job "buffered.randwrite.buffered.r$r" buffered.fio FIO_RW=randwrite FIO_DIRECT=0 FIO_INVALIDATE=1 || true
    sync_job "buffered.randwrite.buffered.r$r.sync" || true
  done
}

group_blocksize() {
  need_setup blocksize || return 0
  local r rw io bs sizes direct
  sizes=$(lab_quick "4k 4m" "1k 4k 64k 4m")
  for ((r = 1; r <= REPS; r++)); do
    for rw in read write; do
      for io in direct buffered; do
        if [[ $io == direct ]]; then direct=1; else direct=0; fi
        for bs in $sizes; do
          local name="blocksize.$rw.$io.$bs.r$r" bytes
          bytes=$(numfmt --from=iec "${bs^^}")
          if ((direct && bytes < LBS)); then
            lab_skip "$name" "O_DIRECT needs I/O of at least the device's logical block size ($LBS bytes)"
            continue
          fi
          fio_job "$name" blocksize.fio FIO_RW="$rw" FIO_BS="$bs" FIO_DIRECT="$direct" || continue
          if [[ $rw == write && $io == buffered ]]; then sync_job "$name.sync" || true; fi
        done
      done
    done
  done
}

# layout_make NAME KIND FILE: make FILE of layout KIND as one step (regular: already laid out).
layout_make() {
  case "$2" in
    sparse) rm -f "$3"; lab_run "$1" -- truncate -s "$SIZE" "$3" ;;
    fallocated) rm -f "$3"; lab_run "$1" -- fallocate -l "$SIZE" "$3" ;;
    regular) return 0 ;;
  esac
}

group_layout() {
  need_setup layout || return 0
  if [[ -n $FIO_DEVICE ]]; then lab_skip layout "the target is a block device: file layouts need a file"; return 0; fi
  local r kind f file
  for ((r = 1; r <= REPS; r++)); do
    for f in $(lab_quick "0" "0 1"); do
      for kind in regular sparse fallocated; do
        local name="layout.$kind.randwrite.fsync$f.r$r"
        if [[ $kind == fallocated && -n $FALLOC_WHY ]]; then lab_skip "$name" "$FALLOC_WHY"; continue; fi
        if [[ $kind == regular ]]; then file=$TARGET; else file="$LAB_SCRATCH/$kind.dat"; fi
        layout_make "$name.make" "$kind" "$file" || continue
        lab_run "$name.before" -- stat -c '%s %b %B' "$file" || true
        fio_job "$name" layout.fio FIO_FILE="$file" FIO_RW=randwrite FIO_FSYNC="$f" || true
        lab_run "$name.after" -- stat -c '%s %b %B' "$file" || true
        [[ $kind == regular ]] || rm -f "$file"
      done
    done
    # Reads: a fresh sparse file (all holes), a fresh fallocated one (all unwritten
    # extents), and the written file.
    for kind in regular sparse fallocated; do
      local name="layout.$kind.randread.fsync0.r$r"
      if [[ $kind == fallocated && -n $FALLOC_WHY ]]; then lab_skip "$name" "$FALLOC_WHY"; continue; fi
      if [[ $kind == regular ]]; then file=$TARGET; else file="$LAB_SCRATCH/$kind.dat"; fi
      layout_make "$name.make" "$kind" "$file" || continue
      fio_job "$name" layout.fio FIO_FILE="$file" FIO_RW=randread FIO_FSYNC=0 || true
      [[ $kind == regular ]] || rm -f "$file"
    done
  done
}

group_numjobs() {
  need_setup numjobs || return 0
  local r rw n counts
  counts=$(lab_quick "1 4" "1 2 4")
  for ((r = 1; r <= REPS; r++)); do
    for rw in randread randwrite; do
      for n in $counts; do
        fio_job "numjobs.$rw.nj$n.r$r" numjobs.fio FIO_RW="$rw" FIO_NUMJOBS="$n" || true
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
    lab_run "strace.$e" -- env FIO_ENGINE="$e" FIO_IODEPTH="$qd" FIO_RW=randread "FIO_FILE=$TARGET" \
      "FIO_SIZE=$SIZE" "FIO_RUNTIME=$RUNTIME" \
      strace -c -f -- fio --output-format=json "$LAB_DIR/engines.fio" || true
  done
}

lab_main ${LAB_REST[@]+"${LAB_REST[@]}"}
