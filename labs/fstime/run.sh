#!/usr/bin/env bash
# labs/fstime/run.sh: UnixBench "File Copy" (fstime) on five filesystems, with audit on and
# off, perf flame graphs, strace -c, what htop shows, and dd as a second opinion.
#
#   sudo labs/fstime/run.sh [--quick] [--out DIR] [--only GROUP,..] [--host LABEL]
#
# What it does, one step per command (each kept with its output under <out>/fstime/raw/):
#   build   compile fstime.c (our UnixBench fstime) into the scratch dir; the original's code
#           walk: cscope queries, gdb's list of source files, a gdb stop in the copy loop
#   setup   the filesystems: a directory on the scratch dir's own filesystem ("disk"), a
#           private tmpfs, an ext4 and an xfs image on that tmpfs and an xfs image on the
#           disk filesystem, each image on a loop device (--direct-io=on), mkfs'd, mounted
#   copy    fstime -c on every filesystem: UnixBench's three settings (bufsize/max_blocks
#           256/500, 1024/2000, 4096/8000; quick: 1024/2000 on the three filesystems the
#           claims compare), 5 repetitions (quick mode too) interleaved
#   cpu     what htop would show during a copy phase, once per repetition: cpusample.sh
#           reads /proc/stat and the process's /proc/<pid>/stat twice, cpushare.py prints the
#           per-CPU user/system/idle shares and the process's own in one line
#   perf    perf record -g of the copy phase on tmpfs and on the xfs image on tmpfs ->
#           flame graphs and a differential flame graph (inferno); auditframes.py lists the
#           audit functions on those stacks (none unless audit was enabled earlier in this boot)
#   strace  strace -c of a copy phase: which system calls, how many
#   dd      dd bs=1k of a file to another file on every filesystem, the same copy by
#           another program
#   audit   the copy on tmpfs in four audit states, all with auditd (started by the lab,
#           logging into the scratch dir) running, one repetition of each in turn: off (the
#           process started under a task,never rule of the lab's, so it carries no audit
#           context: the plain system-call path); no audit rule (a "dummy" context:
#           the slow system-call entry and exit, no filter; one plausible reading of the original's
#           "auditd on"); one rule that matches nothing (every system-call exit runs the
#           filters); a rule auditing every system call of the fstime process (by PID).
#           The audited states need the process to carry a context: other task,never rules
#           (the supervisor's own, labkit/run/auditctx.py) are taken out for the group (put
#           back on cleanup). Then a system-call loop (dd bs=1 to /dev/null) without and
#           with a task,never rule of the lab's, interleaved: what the suppression removes.
#           Audit state restored exactly after. It runs last: it enables audit, which cannot
#           be undone before the next boot.
# A quick run (--quick) leaves out strace and dd (no claim reads them) and audit (lab.toml
# quick_leaves_out); --quick --only GROUP runs one of them with quick mode's shorter steps.
# Every measuring step carries its case as fields (lab_run --case): record.py reads those.
# Mounts are unmounted, loop devices detached, audit rules deleted, the audit enabled flag
# restored and auditd stopped by PID on exit, error, Ctrl-C and TERM.
# shellcheck source=../lib/lab.sh disable=SC2317 # group_* functions are called by lab_main
source "$(dirname "$0")/../lib/lab.sh"

lab_define fstime "fstime: UnixBench File Copy per filesystem, audit, flame graphs" \
  gcc perf strace mkfs.xfs mkfs.ext4 losetup auditctl auditd dd inferno-flamegraph
lab_group build "compile fstime.c" always
lab_group setup "disk directory, tmpfs, ext4 and xfs images on tmpfs, xfs image on disk" always
lab_group copy "fstime -c per filesystem and UnixBench setting, repetitions interleaved"
lab_group cpu "per-CPU user/system split from /proc/stat during a copy phase (htop's view)"
lab_group perf "perf record -g of the copy phase: tmpfs vs xfs on tmpfs, flame graphs, diff"
lab_group strace "strace -c of a copy phase"
lab_group dd "dd bs=1k file-to-file copy on the same filesystems"
lab_group audit "audit off / auditd, no rules / one rule matching nothing / every syscall; task,never (last)"

TMPFS_MIB=768        # the lab's tmpfs: two sparse 512 MiB images and the test files fit
IMG_MIB=512          # image size (sparse: only what is written takes space)
DD_MIB=64            # size of the file dd copies
BIN="" SETTINGS="" REPS=5 CLAIM_REPS=10 T=1 S=0.1 P=0.25 D=1 OBS_PID=""
T_NAMES=() T_DIRS=() T_FS=()

group_build() {
  # UnixBench's Run: fstime -c -t 30 with -b 256 -m 500, -b 1024 -m 2000, -b 4096 -m 8000.
  # Here the measured copy phase is shorter (-t) and so is the settle sleep (-s, UnixBench 2 s);
  # quick mode also shortens the write and read that fill the file first (-p, UnixBench 2 s).
  SETTINGS=$(lab_quick "1024/2000" "256/500 1024/2000 4096/8000")
  # Repetitions, the same in quick mode as in a full run: REPS for the cases only tables show
  # and for the CPU split (its claims' sides hardly vary); CLAIM_REPS for the cases a timing
  # claim compares (the 1 KiB copy on tmpfs and the two xfs images, the audit states and the
  # suppression loop): at 5 a side the paired intervals of a shared VM's reference run were too
  # wide to decide a 1.05x or 1.5x threshold either way; at 10 the t interval is 0.58 times as
  # wide for the same noise (t(9)/sqrt(10) against t(4)/sqrt(5); calibrated at both n, labkit
  # calibrate).
  REPS=5 CLAIM_REPS=10
  T=$(lab_quick 1 2)
  S=$(lab_quick 0.1 0.5)
  P=$(lab_quick 0.25 2)
  D=$(lab_quick 1 3)     # seconds of observation (perf record, /proc/stat) in a copy phase
  BIN="$LAB_SCRATCH/fstime"
  lab_run build -- gcc -O2 -g -fno-omit-frame-pointer -Wall -Wextra -std=c11 -D_GNU_SOURCE \
    -o "$BIN" "$LAB_DIR/fstime.c" -lm || BIN=""
  # Where the score comes from, as the original found it: a cross-reference of the source (the
  # cscope card shows these). The index lives in scratch; -d: queries never rebuild it.
  if lab_require build.cscope cmd:cscope; then
    lab_run build.cscope -- cscope -bk -f "$LAB_SCRATCH/cscope.out" "$LAB_DIR/fstime.c" &&
      lab_run build.cscope.kbps -- cscope -dL -f "$LAB_SCRATCH/cscope.out" -4 KBps &&
      lab_run build.cscope.copy -- cscope -dL -f "$LAB_SCRATCH/cscope.out" -2 copy_phase &&
      lab_run build.cscope.report -- cscope -dL -f "$LAB_SCRATCH/cscope.out" -3 report
  fi
  # The original's other two moves, in gdb's batch mode: the source files the binary was built
  # from (its debug information: what the original fed cscope), and a stop in the copy loop (the
  # original used gdb -tui): a breakpoint on the loop's read, hit twice, with the call stack.
  # The stopped fstime is killed with gdb; its files stay in a scratch folder, removed on exit.
  if [[ -n "$BIN" ]] && lab_require build.gdb cmd:gdb; then
    local line gdir="$LAB_SCRATCH/gdb"
    mkdir -p "$gdir"
    line=$(( $(grep -n 'end of dummy0: rewind both' "$LAB_DIR/fstime.c" | cut -d: -f1) - 1 ))
    lab_run build.gdb.sources -- gdb -batch -nx -ex "info sources" "$BIN" &&
      lab_run build.gdb.loop -- gdb -batch -nx -ex "break fstime.c:$line" -ex run -ex bt \
        -ex "list $((line - 2)),$((line + 6))" -ex continue -ex "info breakpoints" \
        --args "$BIN" -c -t 0.2 -s 0 -p 0.05 -d "$gdir" -b 1024 -m 2000
  fi
}

need_bin() { [[ -n "$BIN" ]] || { lab_skip "$1" "build failed"; return 1; }; }

# ---- filesystems ----------------------------------------------------------------------

# add_target NAME DIR BACKING: a directory fstime and dd write in, with its filesystem.
add_target() {
  local fstype source
  fstype=$(findmnt -no FSTYPE --target "$2" | head -n 1)
  source=$(findmnt -no SOURCE --target "$2" | head -n 1)
  T_NAMES+=("$1"); T_DIRS+=("$2"); T_FS+=("${fstype:-unknown}")
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$fstype" "$source" "$3" >> "$LAB_RUN/targets.tsv"
}

# target_dir NAME: print the directory of target NAME; status 1 if it was not set up.
target_dir() {
  local i
  for i in "${!T_NAMES[@]}"; do
    [[ ${T_NAMES[$i]} == "$1" ]] && { echo "${T_DIRS[$i]}"; return 0; }
  done
  return 1
}

# target_fs NAME: print the filesystem type of target NAME (findmnt's, at setup).
target_fs() {
  local i
  for i in "${!T_NAMES[@]}"; do
    [[ ${T_NAMES[$i]} == "$1" ]] && { echo "${T_FS[$i]}"; return 0; }
  done
  echo unknown
}

# first_target NAME...: the first of these targets that exists.
first_target() {
  local t
  for t in "$@"; do target_dir "$t" >/dev/null && { echo "$t"; return 0; }; done
  return 1
}

# image FS WHERE DIR: an FS image file in DIR (on WHERE), on a loop device, mkfs'd, mounted.
image() {
  local fs=$1 where=$2 name="$1-on-$2" img="$3/$1.img" mnt="$LAB_SCRATCH/mnt-$1-on-$2" dev
  lab_require "setup.$name" root loop cmd:losetup "cmd:mkfs.$fs" || return 0
  lab_run "setup.$name.image" -- truncate -s "${IMG_MIB}M" "$img" || return 0
  # Direct I/O: the loop device reads and writes the image file without caching it a
  # second time, the way a disk holds a filesystem. Detached on cleanup.
  lab_loop_attach "setup.$name.loop" "$img" --direct-io=on || return 0
  dev=$LAB_LOOP
  if [[ $fs == ext4 ]]; then
    # Initialise inode tables and journal now, not in a kernel thread during the benchmark.
    lab_run "setup.$name.mkfs" -- mkfs.ext4 -q -E lazy_itable_init=0,lazy_journal_init=0 "$dev" || return 0
  else
    lab_run "setup.$name.mkfs" -- "mkfs.$fs" -q -f "$dev" || return 0
  fi
  lab_mount "setup.$name.mount" "$mnt" -- -t "$fs" "$dev" || return 0
  lab_run "setup.$name.dio" -- cat "/sys/block/${dev#/dev/}/loop/dio" || return 0
  add_target "$name" "$mnt" "$fs image on ${dev#/dev/} (direct I/O $(cat "$LAB_RUN/raw/setup.$name.dio.out")), a file on $where"
}

group_setup() {
  : > "$LAB_RUN/targets.tsv"
  setup_targets
  # Where each directory lives: filesystem type and device, one line per target.
  ((${#T_DIRS[@]} == 0)) || lab_run setup.df -- df -T "${T_DIRS[@]}"
}

setup_targets() {
  local scratch_fs disk_ok=0
  scratch_fs=$(findmnt -no FSTYPE --target "$LAB_SCRATCH" | head -n 1)
  if [[ $scratch_fs == tmpfs || $scratch_fs == ramfs ]]; then
    lab_skip setup.disk "the scratch directory is on $scratch_fs, not on a disk: pass --scratch a directory on a disk filesystem"
  elif lab_run setup.disk -- mkdir "$LAB_SCRATCH/disk"; then
    add_target disk "$LAB_SCRATCH/disk" "the scratch directory's own filesystem"
    disk_ok=1
  fi
  lab_require setup.tmpfs root || return 0
  lab_mount setup.tmpfs "$LAB_SCRATCH/tmpfs" -- -t tmpfs -o "size=${TMPFS_MIB}m,mode=0700" tmpfs || return 0
  lab_run setup.tmpfs.dir -- mkdir "$LAB_SCRATCH/tmpfs/files" || return 0
  add_target tmpfs "$LAB_SCRATCH/tmpfs/files" "memory (tmpfs)"
  image ext4 tmpfs "$LAB_SCRATCH/tmpfs"
  image xfs tmpfs "$LAB_SCRATCH/tmpfs"
  if ((disk_ok)); then
    image xfs disk "$LAB_SCRATCH"
  else
    lab_skip setup.xfs-on-disk "no disk filesystem for the image (see setup.disk)"
  fi
}

need_targets() { ((${#T_NAMES[@]})) || { lab_skip "$1" "no filesystem to test (see the setup steps)"; return 1; }; }

# ---- the copy, as UnixBench runs it ---------------------------------------------------

group_copy() {
  need_bin copy || return 0
  need_targets copy || return 0
  local rep setting b m i only claimed="tmpfs xfs-on-tmpfs xfs-on-disk"
  # Quick mode copies on the filesystems the claims compare (fewer cases, the same repetitions).
  only=$(lab_quick "$claimed" "")
  for i in "${!T_NAMES[@]}"; do
    [[ -z $only || " $only " == *" ${T_NAMES[$i]} "* ]] ||
      lab_skip --case experiment=copy --case "target=${T_NAMES[$i]}" "copy.${T_NAMES[$i]}" \
        "quick mode copies only on $only (the filesystems the claims compare); the full run adds this one"
  done
  # Interleaved: each repetition runs every setting on every filesystem once, so a slow
  # drift of the host spreads over all cases instead of posing as an effect. Past REPS, only
  # the cases the claims compare (1 KiB buffers on the filesystems in $claimed) run on.
  for ((rep = 1; rep <= CLAIM_REPS; rep++)); do
    for setting in $SETTINGS; do
      b=${setting%/*} m=${setting#*/}
      for i in "${!T_NAMES[@]}"; do
        [[ -z $only || " $only " == *" ${T_NAMES[$i]} "* ]] || continue
        ((rep <= REPS)) || [[ $b == 1024 && " $claimed " == *" ${T_NAMES[$i]} "* ]] || continue
        lab_run --case experiment=copy --case tool=fstime --case "target=${T_NAMES[$i]}" --case "fs=${T_FS[$i]}" \
          --case "bufsize=$b" --case "max_blocks=$m" --case "rep=$rep" \
          "copy.${T_NAMES[$i]}.b$b.$rep" -- "$BIN" -c -t "$T" -s "$S" -p "$P" -d "${T_DIRS[$i]}" -b "$b" -m "$m"
      done
    done
  done
}

# ---- watching one copy phase ----------------------------------------------------------

# cpu_ticks PID: user + system clock ticks the process has used (fields 14, 15 of its stat).
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null; }

# wait_copy PID OUT: wait until fstime PID has finished its read phase (its JSON line is in
# OUT) and is busy again: its copy phase. Busy = at least half a CPU in two 0.1 s intervals.
wait_copy() {
  local pid=$1 out=$2 a b busy=0 tries
  lab_wait_for "$out" '"phase":"read"' 60 || return 1
  for ((tries = 0; tries < 300; tries++)); do
    a=$(cpu_ticks "$pid") || return 1
    sleep 0.1
    b=$(cpu_ticks "$pid") || return 1
    [[ -n $a && -n $b ]] || return 1
    if ((b - a >= 5)); then busy=$((busy + 1)); else busy=0; fi
    ((busy >= 2)) && return 0
  done
  return 1
}

# observe NAME TARGET [SECONDS]: start fstime -c on TARGET in the background (copy phase of
# SECONDS, default 600: it is stopped by the caller's lab_unwind) and wait for its copy
# phase. Sets OBS_PID.
observe() {
  local name=$1 dir
  dir=$(target_dir "$2") || { lab_skip "$name" "no $2 filesystem (see the setup steps)"; return 1; }
  lab_spawn --case "target=$2" --case "fs=$(target_fs "$2")" --case bufsize=1024 \
    "$name" -- "$BIN" -c -t "${3:-600}" -s "$S" -p "$P" -d "$dir" -b 1024 -m 2000
  OBS_PID=$LAB_SPAWNED
  wait_copy "$OBS_PID" "$LAB_RUN/raw/$name.out" ||
    { lab_skip "$name.copy" "fstime's copy phase did not start: $(tail -n 1 "$LAB_RUN/raw/$name.err")"; return 1; }
}

group_cpu() {
  need_bin cpu || return 0
  local t mark rep case
  t=$(first_target disk tmpfs) || { lab_skip cpu "no filesystem to test (see the setup steps)"; return 0; }
  # The block device under the target (findmnt's source, e.g. /dev/vda1 -> vda1), if it is one.
  local dev src; src=$(findmnt -no SOURCE --target "$(target_dir "$t")" | head -n 1)
  dev=${src#/dev/}
  if [[ $src != /dev/* ]] || ! grep -qw "$dev" /proc/diskstats; then
    lab_skip cpu.io "the $t filesystem is on $src, not on a block device /proc/diskstats lists"; dev=""
  fi
  for ((rep = 1; rep <= REPS; rep++)); do
    mark=$(lab_mark)
    observe "cpu.fstime.$rep" "$t" || { lab_unwind "$mark"; return 0; }
    case=(--case experiment=cpu --case "target=$t" --case "fs=$(target_fs "$t")" --case "rep=$rep" --case "pid=$OBS_PID")
    # Two readings D seconds apart of every CPU's ticks per mode and of fstime's own ticks.
    lab_run "${case[@]}" --case tool=proc-stat "cpu.stat.$rep" -- sh "$LAB_DIR/cpusample.sh" "$OBS_PID" "$D"
    # What the device under the filesystem did in the same copy phase (the original looked with
    # iotop): its /proc/diskstats line D seconds apart (reads and writes completed, sectors).
    if [[ -n $dev ]]; then
      lab_run "${case[@]}" --case tool=diskstats --case "device=$dev" "cpu.io.$rep" -- \
        sh -c 'grep -w "$1" /proc/diskstats; sleep "$2"; grep -w "$1" /proc/diskstats' diskstats "$dev" "$D"
    fi
    lab_unwind "$mark"
    lab_run "${case[@]}" --case tool=cpushare "cpu.htop.$rep" -- "$LAB_PY" "$LAB_DIR/cpushare.py" "$LAB_RUN/raw/cpu.stat.$rep.out" "$OBS_PID"
  done
}

group_perf() {
  need_bin perf || return 0
  lab_require perf perf inferno || return 0
  local t mark data
  for t in tmpfs xfs-on-tmpfs; do
    mark=$(lab_mark)
    observe "perf.$t.fstime" "$t" || { lab_unwind "$mark"; continue; }
    data="$LAB_SCRATCH/perf-$t.data"
    # -p: only the running fstime, for as long as `sleep` runs (inside its copy phase).
    # -F 997: an odd rate, so sampling does not run in lockstep with periodic kernel work.
    # --no-buildid-cache: nothing written to ~/.debug.
    lab_run --case experiment=perf --case tool=perf --case "target=$t" --case "fs=$(target_fs "$t")" "perf.$t.record" -- perf record --no-buildid-cache -g -F 997 -o "$data" -p "$OBS_PID" -- sleep "$D"
    lab_unwind "$mark"
    [[ -s $data ]] || continue
    lab_run "perf.$t.report" -- perf report -i "$data" --stdio --no-children --sort sym -g none --percent-limit 2
    lab_run --stdout "$LAB_SCRATCH/perf-$t.script" "perf.$t.script" -- perf script -F "$LAB_PERF_STACKS" -i "$data" || continue
    # The raw samples as perf script prints them (the perf card reads them): the first 60 lines.
    [[ $t != tmpfs ]] || lab_run "perf.$t.script-head" -- head -n 60 "$LAB_SCRATCH/perf-$t.script"
    lab_run --case experiment=perf --case tool=inferno --case "target=$t" --case "fs=$(target_fs "$t")" \
      "perf.$t.flame" -- "$LAB_PY" -m labkit flame --perf-script "$LAB_SCRATCH/perf-$t.script" \
      --folded "$LAB_RUN/flame-$t.folded" --svg "$LAB_RUN/flame-$t.svg" \
      --title "fstime copy phase (1 KiB buffers) on $t" || continue
    # Audit functions on the copy loop's stacks: stdout empty unless this boot had audit
    # enabled before fstime started (the audit group, which enables it, runs last).
    lab_run --case experiment=perf --case tool=auditframes --case "target=$t" "perf.$t.audit" -- "$LAB_PY" "$LAB_DIR/auditframes.py" "$LAB_RUN/flame-$t.folded"
  done
  if [[ -f "$LAB_RUN/flame-tmpfs.folded" && -f "$LAB_RUN/flame-xfs-on-tmpfs.folded" ]]; then
    lab_run perf.diff -- "$LAB_PY" -m labkit diff-flame --before "$LAB_RUN/flame-tmpfs.folded" \
      --after "$LAB_RUN/flame-xfs-on-tmpfs.folded" --folded "$LAB_RUN/flame-diff.folded" \
      --svg "$LAB_RUN/flame-diff.svg" --title "xfs image on tmpfs vs tmpfs: red = more samples on xfs, blue = fewer"
    # The same diff drawn on the tmpfs profile's stacks: tmpfs's own paths (shmem_*), which the
    # xfs profile never runs and so the diff above cannot draw, show in blue.
    lab_run perf.diff-negated -- "$LAB_PY" -m labkit diff-flame --negate --before "$LAB_RUN/flame-tmpfs.folded" \
      --after "$LAB_RUN/flame-xfs-on-tmpfs.folded" --folded "$LAB_RUN/flame-diff-negated.folded" \
      --svg "$LAB_RUN/flame-diff-negated.svg" \
      --title "tmpfs's stacks: red = more samples on the xfs image, blue = fewer (tmpfs-only paths)"
  fi
}

group_strace() {
  need_bin strace || return 0
  lab_require strace cmd:strace || return 0
  local t mark scope
  # strace -p attaches to a process it did not start: Yama (ptrace_scope >= 1) allows that
  # only to root.
  scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)
  if [[ $EUID -ne 0 && $scope -ge 1 ]]; then
    lab_skip strace "strace -p needs root here (kernel.yama.ptrace_scope=$scope)"; return 0
  fi
  t=$(first_target tmpfs disk) || { lab_skip strace "no filesystem to test (see the setup steps)"; return 0; }
  mark=$(lab_mark)
  # strace attaches once the copy phase runs and is stopped after D seconds as a reader stops it
  # (SIGINT: it detaches and prints its table; timeout(1) then exits 124). The copy phase outlasts
  # it however slow the host is (an emulated CPU takes seconds to attach); cleanup stops fstime.
  observe strace.fstime "$t" || { lab_unwind "$mark"; return 0; }
  # The table goes to standard error (kept as raw/strace.err).
  lab_run --case experiment=strace --case "target=$t" --case "fs=$(target_fs "$t")" \
    --ok-status 124 strace -- timeout -s INT "$D" strace -c -p "$OBS_PID"
  lab_unwind "$mark"
}

# ---- dd: the same copy by another program ---------------------------------------------

group_dd() {
  need_targets dd || return 0
  lab_require dd cmd:dd || return 0
  local i rep
  for i in "${!T_NAMES[@]}"; do
    # The source is written (so it is in the page cache), the destination exists at full
    # size: conv=notrunc then overwrites it in place, as fstime's copy does.
    lab_run "dd.${T_NAMES[$i]}.src" -- dd if=/dev/zero of="${T_DIRS[$i]}/dd-src" bs=1M count="$DD_MIB" status=none &&
      lab_run "dd.${T_NAMES[$i]}.dst" -- dd if=/dev/zero of="${T_DIRS[$i]}/dd-dst" bs=1M count="$DD_MIB" status=none
  done
  for ((rep = 1; rep <= REPS; rep++)); do
    # As fstime before each phase: write the dirty pages back first, then copy cached pages.
    lab_run "dd.sync.$rep" -- sync
    for i in "${!T_NAMES[@]}"; do
      [[ -f "${T_DIRS[$i]}/dd-dst" ]] || continue
      lab_run --case experiment=dd --case tool=dd --case "target=${T_NAMES[$i]}" --case "fs=${T_FS[$i]}" \
        --case bufsize=1024 --case "rep=$rep" \
        "dd.${T_NAMES[$i]}.$rep" -- env LC_ALL=C dd if="${T_DIRS[$i]}/dd-src" of="${T_DIRS[$i]}/dd-dst" bs=1k conv=notrunc
    done
  done
  for i in "${!T_NAMES[@]}"; do
    rm -f "${T_DIRS[$i]}/dd-src" "${T_DIRS[$i]}/dd-dst"
  done
}

# ---- audit ----------------------------------------------------------------------------

# audit_try_delete ARGS...: auditctl -d ARGS, quietly; success if the rule is gone either way
# (the cleanup stack calls it after the step that deleted the rule already ran).
audit_try_delete() { auditctl -d "$@" >/dev/null 2>&1 || true; }

# audit_delete_pid_rule ARCH PIDFILE: delete the every-syscall rule audit_exec.sh added.
audit_delete_pid_rule() {
  [[ -s $2 ]] || return 0
  audit_try_delete always,exit -F "arch=$1" -S all -F "pid=$(cat "$2")"
}

# audit_daemon_pid: the PID of the audit daemon the kernel talks to (0: none).
audit_daemon_pid() { auditctl -s 2>/dev/null | awk '$1 == "pid" { print $2 }'; }

# audit_put_back WORD...: load the rule that `auditctl -l` listed as WORD... ("-a never,task
# ...") unless it is loaded (the undo of task_never_out).
audit_put_back() { auditctl -l 2>/dev/null | grep -qxF -- "$*" || auditctl "$@"; }

# task_never_out NAME: take out the task,never rules that would keep processes started now
# without an audit context: this run's own (labkit/run/auditctx.py: "-F pid!=<the supervisor's
# PID>", this shell's parent; it covers every process not forked by the supervisor itself, so
# every command of this shell) and the host's plain one, each put back on cleanup (registered
# first). Another run's rule (a lab running beside this one, which removes it when it ends) is
# not this run's to take out or put back: NAME is skipped with the reason, status 1.
task_never_out() {
  local r w k=0 own="-a never,task -F pid!=$PPID" others
  others=$(auditctl -l | grep -e '^-a never,task ' | grep -vxF -e "$own" | paste -sd ';' || true)
  if [[ -n $others ]]; then
    # A rule whose run is gone is a killed run's: its --recover (labkit recover) deletes it.
    [[ ! $others =~ pid!=([0-9]+) || -e /proc/${BASH_REMATCH[1]} ]] || others+="; pid ${BASH_REMATCH[1]} is gone: labkit recover, or auditctl -d task,never -F pid!=${BASH_REMATCH[1]}"
    lab_skip "$1" "another run's task,never rule is loaded ($others): processes started now would carry no audit context"
    return 1
  fi
  while IFS= read -r r; do
    [[ $r == "-a never,task" || $r == "$own" ]] || continue
    read -ra w <<< "$r"
    lab_defer "put back the audit rule '$r'" audit_put_back "${w[@]}"
    k=$((k + 1))
    lab_run "$1.$k" -- auditctl -d "${w[@]:1}" || return 1
  done < <(auditctl -l)
}

# task_never_in NAME: add the lab's own task,never rule, -F pid=<this shell>; deleted on
# cleanup (registered first). The task filter runs in audit_alloc(), which copy_process()
# (kernel/fork.c) calls before the child has a PID of its own, so the PID it sees is the forking
# parent's: this rule matches exactly the processes this shell starts (every lab_run command),
# nothing else on the host. (A "pid!=<this shell>" rule would miss exactly those.)
task_never_in() {
  lab_defer "delete the audit rule '-a never,task -F pid=$$'" audit_try_delete task,never -F "pid=$$"
  lab_run "$1" -- auditctl -a task,never -F "pid=$$"
}

group_audit() {
  need_bin audit || return 0
  lab_require audit root cmd:auditctl cmd:auditd cmd:ausyscall || return 0
  local dir enabled apid rules arch pidmax i mark adir pidfile
  dir=$(target_dir tmpfs) || { lab_skip audit "no tmpfs (see the setup steps)"; return 0; }
  if ! auditctl -s >/dev/null 2>&1; then
    lab_skip audit "auditctl -s failed: $(auditctl -s 2>&1 | tail -n 1) (kernel without audit support?)"; return 0
  fi
  # The state before, to restore exactly and to compare with the state after.
  lab_run audit.before.status -- auditctl -s || return 0
  lab_run audit.before.rules -- auditctl -l || return 0
  enabled=$(awk '$1 == "enabled" { print $2 }' "$LAB_RUN/raw/audit.before.status.out")
  apid=$(awk '$1 == "pid" { print $2 }' "$LAB_RUN/raw/audit.before.status.out")
  # task,never rules (the supervisor's own, labkit/run/auditctx.py, or the host's) audit nothing.
  rules=$(grep -v -e '^No rules' -e '^-a never,task$' -e '^-a never,task ' "$LAB_RUN/raw/audit.before.rules.out" | grep -c . || true)
  if [[ $enabled != 0 || $apid != 0 || $rules != 0 ]]; then
    lab_skip audit "audit is in use on this host (enabled $enabled, audit daemon pid $apid, $rules rules besides task,never): the lab leaves a live audit configuration alone"
    return 0
  fi
  # auditctl's name for the system-call table of our fstime (a native program): b64 on a
  # 64-bit system (x86_64, aarch64, ...), b32 on a 32-bit one. Checked, not assumed.
  arch="b$(getconf LONG_BIT)"
  if ! ausyscall "$arch" read >/dev/null 2>&1; then
    lab_skip audit "ausyscall does not know arch $arch on $(uname -m)"; return 0
  fi
  echo "$arch" > "$LAB_RUN/audit.arch"

  mark=$(lab_mark)
  # The enabled flag is restored after auditd is stopped (the stack runs newest first).
  lab_defer "restore the audit enabled flag to $enabled" auditctl -e "$enabled"
  # The audited states measure processes that carry an audit context: no task,never rule.
  task_never_out audit.task-never.out || { lab_unwind "$mark"; return 0; }
  adir="$LAB_SCRATCH/audit"
  mkdir -p "$adir/plugins.d"
  lab_run --stdout "$adir/auditd.conf" audit.auditd.conf -- sed "s|@DIR@|$adir|g" "$LAB_DIR/auditd.conf.in" ||
    { lab_unwind "$mark"; return 0; }
  # -n: stay in the foreground (we stop it by PID); -c: our config directory. On start
  # auditd sets the enabled flag to 1 and registers with the kernel as its audit daemon.
  lab_spawn audit.auditd -- auditd -n -c "$adir"
  for ((i = 0; i < 50; i++)); do
    [[ $(audit_daemon_pid) == "$LAB_SPAWNED" ]] && break
    sleep 0.1
  done
  if [[ $(audit_daemon_pid) != "$LAB_SPAWNED" ]]; then
    lab_skip audit.auditd.status "auditd did not register with the kernel: $(tail -n 1 "$LAB_RUN/raw/audit.auditd.err")"
    lab_unwind "$mark"
    return 0
  fi
  lab_run audit.auditd.status -- auditctl -s

  # The four states in turn in each repetition, so that a drift of the machine reaches them
  # all alike (the claims pair them by repetition).
  local rmark pidfile pidmax
  pidmax=$(cat /proc/sys/kernel/pid_max)
  for ((i = 1; i <= CLAIM_REPS; i++)); do
    # 1. Off: started under a task,never rule, the process has no audit context
    #    (audit_alloc() in kernel/auditsc.c), whatever the daemon and the rules.
    rmark=$(lab_mark)
    task_never_in "audit.task-never.in.$i" || { lab_unwind "$mark"; return 0; }
    lab_run --case experiment=audit --case audit=off --case tool=fstime --case target=tmpfs --case fs=tmpfs \
      --case "rep=$i" "audit.off.$i" -- "$BIN" -c -t "$T" -s "$S" -p "$P" -d "$dir" -b 1024 -m 2000
    lab_unwind "$rmark"

    # 2. auditd running, no audit rule loaded: a new process gets a "dummy" context (audit_n_rules
    #    is 0), which takes the slow system-call entry and exit but runs no filter.
    lab_run --case experiment=audit --case audit=norules --case tool=fstime --case target=tmpfs --case fs=tmpfs \
      --case "rep=$i" "audit.norules.$i" -- "$BIN" -c -t "$T" -s "$S" -p "$P" -d "$dir" -b 1024 -m 2000

    # 3. A rule for every system call of a PID that cannot exist (pid_max): every system
    #    call of every process is checked against it, none matches.
    rmark=$(lab_mark)
    lab_defer "delete the audit rule for pid $pidmax" audit_try_delete always,exit -F "arch=$arch" -S all -F "pid=$pidmax"
    lab_run "audit.nomatch.rule.$i" -- auditctl -a always,exit -F "arch=$arch" -S all -F "pid=$pidmax" &&
      lab_run --case experiment=audit --case audit=nomatch --case tool=fstime --case target=tmpfs --case fs=tmpfs \
        --case "rep=$i" "audit.nomatch.$i" -- "$BIN" -c -t "$T" -s "$S" -p "$P" -d "$dir" -b 1024 -m 2000
    lab_unwind "$rmark"

    # 4. Every system call of the fstime process audited: audit_exec.sh adds the rule for
    #    its own PID, then execs fstime (same PID). The delete is registered first.
    pidfile="$adir/every.$i.pid"
    rmark=$(lab_mark)
    lab_defer "delete the audit rule for the pid in $pidfile" audit_delete_pid_rule "$arch" "$pidfile"
    lab_run --case experiment=audit --case audit=every --case tool=fstime --case target=tmpfs --case fs=tmpfs \
      --case "rep=$i" "audit.every.$i" -- sh "$LAB_DIR/audit_exec.sh" "$arch" "$pidfile" \
      "$BIN" -c -t "$T" -s "$S" -p "$P" -d "$dir" -b 1024 -m 2000
    lab_unwind "$rmark"
  done
  lab_run --case experiment=audit audit.during.log -- du -b "$adir"
  lab_unwind "$mark"
  audit_suppression
  # The state after: must equal the state before (the test suite checks it too).
  lab_run audit.after.status -- auditctl -s
  lab_run audit.after.rules -- auditctl -l
}

# audit_suppression: what a task,never rule removes, on this boot where audit has now been
# enabled for certain (auditd ran above) and is back as found: a system-call loop, dd copying
# one byte at a time from /dev/zero to /dev/null (one read and one write a byte), started
# without any task,never rule (an audit context) and under the lab's own, in turn.
audit_suppression() {
  local i mark count
  count=$(lab_quick 1000000 3000000)
  for ((i = 1; i <= CLAIM_REPS; i++)); do
    mark=$(lab_mark)
    task_never_out "audit.suppress.out.$i" || { lab_unwind "$mark"; return 0; }
    lab_run --case experiment=suppress --case audit=contexts --case tool=dd --case bufsize=1 --case "rep=$i" \
      "audit.suppress.contexts.$i" -- env LC_ALL=C dd if=/dev/zero of=/dev/null bs=1 count="$count"
    lab_unwind "$mark"
    mark=$(lab_mark)
    task_never_in "audit.suppress.in.$i" || { lab_unwind "$mark"; return 0; }
    lab_run --case experiment=suppress --case audit=task-never --case tool=dd --case bufsize=1 --case "rep=$i" \
      "audit.suppress.task-never.$i" -- env LC_ALL=C dd if=/dev/zero of=/dev/null bs=1 count="$count"
    lab_unwind "$mark"
  done
}

lab_main "$@"
