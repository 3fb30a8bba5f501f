# shellcheck shell=bash
# labs/lib/lab.sh: the step language of a lab (DESIGN.md, "The lab contract"), sourced by every
# labs/<lab>/run.sh, which declares the lab and its groups of steps, then calls lab_main:
#
#   source "$(dirname "$0")/../lib/lab.sh"
#   lab_define lat_tcp "TCP round-trip latency" gcc taskset perf   # name, title, tools to version
#   lab_group build "compile lat_tcp.c" always                      # 'always' runs even with --only
#   group_build() { lab_run build -- gcc -O2 -o "$LAB_SCRATCH/lat_tcp" "$LAB_DIR/lat_tcp.c"; }
#   lab_main "$@"
#
# lab_main hands the run to labkit.run.supervisor (Python: options, lock, journal, signals, undo,
# --recover, --guest, probe, record), which runs this script again in a role (PCB_LAB_ROLE):
#   body  the selected groups in order; exit 0 (all steps as expected), 1 (a step failed: the
#         result is still recorded) or 100 (stopped, reason said: disk full, internal error);
#   undo  one "ID<TAB>COMMAND" a line on stdin, each answered "ID<TAB>STATUS<TAB>LAST ERROR LINE".
# A step prints a progress line, runs ONE command a reader could type, and keeps raw/<step>.cmd,
# .out, .err and .case (what it measures, KEY=VALUE lines); one whose capability is missing is
# recorded as skipped with the reason. A host change is registered with lab_defer BEFORE it is
# made: whatever ends the run, the supervisor (or --recover) undoes the journal, newest first.

set -Eeuo pipefail

LAB_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
LAB_DIR="$(cd "$(dirname "$0")" && pwd)"
LAB_SCRIPT="$LAB_DIR/$(basename "$0")"
LAB_ARGV=("$@")   # run.sh's own arguments (a sourced file sees its caller's)
LAB_NAME=""
LAB_TITLE=""
LAB_TOOLS=""
LAB_GROUPS=()
LAB_GROUP_DESC=()
LAB_GROUP_ALWAYS=()
# Set by the supervisor for the body.
LAB_QUICK=${PCB_LAB_QUICK:-0}
LAB_OUT=${PCB_LAB_OUT:-}
LAB_RUN=${PCB_LAB_RUN_DIR:-}
# shellcheck disable=SC2034 # for the labs' run.sh
LAB_HOST=${PCB_LAB_HOST:-}
LAB_SCRATCH=${PCB_LAB_SCRATCH:-}
LAB_START_US=${PCB_LAB_START_US:-}
LAB_JOURNAL=${PCB_LAB_JOURNAL:-}
LAB_JOURNAL_COPY=${PCB_LAB_JOURNAL_COPY:-}
LAB_SEQ=${PCB_LAB_SEQ:-0}
LAB_FAILED=0
# shellcheck disable=SC2034 # read by case.sh (a step's line in steps.tsv)
LAB_GROUP=""
LAB_PENDING=()
declare -A LAB_UNDO=() LAB_UNDO_DESC=()
# A step's record (steps.tsv, raw/NAME.case) and the checks of its --case fields.
# shellcheck source=case.sh
source "$LAB_ROOT/labs/lib/case.sh"

# Python with labkit importable: the project venv, else python3 with the repo on PYTHONPATH.
# PYTHONSAFEPATH: `python -m` would put the current directory first, so a run started in another
# checkout's folder would run that checkout's labkit; this checkout's comes first instead.
LAB_PY=python3
[[ ! -x "$LAB_ROOT/.venv/bin/python" ]] || LAB_PY="$LAB_ROOT/.venv/bin/python"
export PYTHONPATH="$LAB_ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONSAFEPATH=1
# No __pycache__ written into the checkout (outside scratch and out); cached bytecode is still read.
# inferno (flame graphs) installed by `make setup` into the project.
export PYTHONDONTWRITEBYTECODE=1 PATH="$LAB_ROOT/.tools/bin:$PATH"

# ---- declaring a lab ------------------------------------------------------------------

# lab_define NAME TITLE [TOOL...]: name the lab, a one-line title and the tools whose versions are recorded.
lab_define() {
  LAB_NAME=$1
  LAB_TITLE=$2
  shift 2
  LAB_TOOLS="$*"
}

# lab_group NAME DESCRIPTION [always]: declare a group of steps, run in declaration order by group_NAME.
# The declaration reaches the supervisor as PCB_LAB_GROUPS, one NAME<TAB>DESCRIPTION<TAB>always?
# line per group (labkit/run/supervisor.py Lab.from_env): a NAME that is not a-z, 0-9 and _, a tab
# or a newline in DESCRIPTION, or a third word other than "always" is refused (one line, exit 2).
lab_group() {
  local bad=""
  if [[ ! ${1:-} =~ ^[a-z0-9_]+$ ]]; then
    bad="group name '${1:-}' (a-z, 0-9 and _: it names the function group_NAME)"
  elif [[ ${2:-} == *[$'\t\n']* || -z ${2:-} ]]; then
    bad="group $1: its description must be one line without tabs"
  elif [[ -n ${3:-} && $3 != always ]]; then
    bad="group $1: third word '$3' (only 'always' is known)"
  fi
  [[ -z $bad ]] || { echo "lab.sh: lab_group: $bad" >&2; exit 2; }
  LAB_GROUPS+=("$1")
  LAB_GROUP_DESC+=("$2")
  LAB_GROUP_ALWAYS+=("${3:-}")
}

# lab__supervisor exec|call ARG...: run labkit.run.supervisor with this lab's declaration.
lab__supervisor() {
  local groups="" i how=$1
  shift
  [[ -n "$LAB_NAME" ]] || { echo "lab.sh: lab_define was not called" >&2; exit 2; }
  for i in "${!LAB_GROUPS[@]}"; do
    groups+="${LAB_GROUPS[$i]}"$'\t'"${LAB_GROUP_DESC[$i]}"$'\t'"${LAB_GROUP_ALWAYS[$i]}"$'\n'
  done
  export PCB_LAB_NAME=$LAB_NAME PCB_LAB_TITLE=$LAB_TITLE PCB_LAB_TOOLS=$LAB_TOOLS PCB_LAB_GROUPS=$groups
  if [[ $how == exec ]]; then
    exec "$LAB_PY" -m labkit.run.supervisor "$LAB_SCRIPT" "${#LAB_ARGV[@]}" ${LAB_ARGV[@]+"${LAB_ARGV[@]}"} "$@"
  fi
  "$LAB_PY" -m labkit.run.supervisor "$LAB_SCRIPT" 0 "$@"
}

# lab_usage: print the --help text (for a lab that parses options of its own first).
lab_usage() { lab__supervisor call --help; }

# ---- output -------------------------------------------------------------------------------

# lab__say KIND TEXT: one progress line "[lab  12.3s] TEXT" on stderr, its KIND (labkit/run/progress.py
# KINDS) in a tag \x1f...\x1f that the supervisor strips (it colours by kind, and tells a harness).
lab__say() {
  local now=${EPOCHREALTIME//[.,]/} d tag=$'\x1f'$1$'\x1f'
  d=$(( now - ${LAB_START_US:-$now} ))
  ((d >= 0)) || d=0
  printf '%s[%s %6s] %s\n' "$tag" "$LAB_NAME" "$((d / 1000000)).$(((d % 1000000) / 100000))s" "${*:2}" >&2 || true
}

# lab__stop MESSAGE: say why and stop the run (the supervisor undoes everything).
lab__stop() {
  lab__say stop "$1"
  exit 100
}

# ---- the journal and the undo ------------------------------------------------------------
# <out>/.<lab>.journal and its copy <scratch>/.pcb-journal (labkit/run/journal.py): "do ID
# DESCRIPTION COMMAND" before a change, "done ID", "fail ID MESSAGE". COMMAND: shell words
# naming a command or a function of lab.sh or of the lab's run.sh.

lab__journal() {
  local IFS=$'\t'
  [[ -z "$LAB_JOURNAL_COPY" ]] || printf '%s\n' "$*" 2>/dev/null >> "$LAB_JOURNAL_COPY" || true
  printf '%s\n' "$*" 2>/dev/null >> "$LAB_JOURNAL" && return 0
  local why
  why=$(lab__full_note)
  lab__stop "cannot write the journal $LAB_JOURNAL: ${why:+$why; }stopping"
}

# lab_defer DESCRIPTION CMD [ARG...]: register an undo action (journal, then memory) BEFORE the
# change it undoes; it must be harmless when the change was never made or is already undone.
lab_defer() {
  local desc=${1//[$'\t\n']/ } cmd id
  shift
  printf -v cmd '%q ' "$@"
  id=$((LAB_SEQ + 1))
  lab__journal "do" "$id" "$desc" "${cmd% }"
  LAB_SEQ=$id LAB_UNDO[$id]=${cmd% } LAB_UNDO_DESC[$id]=$desc
  LAB_PENDING+=("$id")
}

# lab_mark: print the current depth of the undo stack (for lab_unwind).
lab_mark() { echo "$LAB_SEQ"; }

# lab_unwind [MARK]: run and pop the undo actions registered after MARK (default: all), newest
# first. A failed action stays pending in the journal: the supervisor tries it again at the end.
lab_unwind() {
  local mark=${1:-0} k id err rc keep=()
  for ((k = ${#LAB_PENDING[@]} - 1; k >= 0; k--)); do
    id=${LAB_PENDING[$k]}
    if ((id <= mark)); then keep=("$id" ${keep[@]+"${keep[@]}"}); continue; fi
    lab__say cleanup "cleanup: ${LAB_UNDO_DESC[$id]}"
    lab__undo_cmd "${LAB_UNDO[$id]}"
    if ((rc == 0)); then
      lab__journal "done" "$id"
    else
      lab__say cleanup-failed "cleanup FAILED: ${LAB_UNDO_DESC[$id]} (exit $rc${err:+: $err})"
      lab__journal fail "$id" "exit $rc${err:+: $err}"
    fi
    unset "LAB_UNDO[$id]" "LAB_UNDO_DESC[$id]"
  done
  LAB_PENDING=(${keep[@]+"${keep[@]}"})
}

# lab__undo_cmd CMD: run an undo action; sets the caller's rc and err (its last stderr line).
lab__undo_cmd() {
  rc=0
  err=$(eval "$1" 2>&1 >/dev/null) || rc=$?
  err=${err//[$'\t']/ }
  err=${err##*$'\n'}
}

# lab__undo_main: the undo role (see the top).
lab__undo_main() {
  local id cmd err rc
  set +eE
  while IFS=$'\t' read -r id cmd; do lab__undo_cmd "$cmd"; printf '%s\t%s\t%s\n' "$id" "$rc" "$err"; done
  exit 0
}

# lab__starttime_v VAR PID: the process's start time (/proc/PID/stat field 22) into VAR.
lab__starttime_v() {
  local s f
  { read -r s < "/proc/$2/stat"; } 2>/dev/null || return 1
  read -ra f <<< "${s##*) }"
  printf -v "$1" '%s' "${f[19]}"
}

# lab_kill_group PID [STARTTIME]: TERM a process group started by lab_spawn, then KILL if it
# lingers (a zombie leader, not yet reaped, is gone); a PID that started at another time than
# STARTTIME was reused: it is left alone.
lab_kill_group() {
  local pid=$1 start=${2:-} now i sig s
  if [[ -n "$start" ]] && lab__starttime_v now "$pid" && [[ "$now" != "$start" ]]; then return 0; fi
  for sig in TERM KILL; do
    kill "-$sig" -- "-$pid" 2>/dev/null || kill "-$sig" -- "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 20; i++)); do
      kill -0 -- "-$pid" 2>/dev/null && { read -r s < "/proc/$pid/stat"; } 2>/dev/null || return 0
      [[ ${s##*) } != [ZX]* ]] || return 0
      sleep 0.1
    done
  done
  echo "process group $pid does not die" >&2
  return 1
}

# lab__full_note: a one-line reason when the scratch or the out filesystem has under 1 MiB free.
lab__full_note() {
  local d free
  for d in "$LAB_SCRATCH" "$LAB_OUT"; do
    [[ -n "$d" && -d "$d" ]] || continue
    free=$(df -Pk -- "$d" 2>/dev/null | awk 'NR == 2 { print $4 }')
    if [[ -n "$free" ]] && ((free < 1024)); then
      printf 'no space left on the filesystem of %s (%s KiB free)' "$d" "$free"
      return 0
    fi
  done
}

lab__on_err() {
  local line=$1 code=$2 why
  trap - ERR
  # In a subshell (a process substitution, a pipeline's side) the failure is its caller's to judge.
  if [[ $BASHPID != "$$" ]]; then exit "$code"; fi
  why=$(lab__full_note)
  lab__stop "${why:+stopping: $why}${why:-internal error (line $line, exit $code): stopping, undoing host changes}"
}

# ---- steps ----------------------------------------------------------------------------

# lab_run [--expect-fail] [--ok-status N] [--stdout FILE] [--case KEY=VALUE]... NAME -- CMD [ARG...]:
# run one step in its own session, keep its command and output (stdout to FILE, e.g. in scratch,
# for bulky output). --ok-status N: status N is a success too (timeout(1)'s 124). --case: what
# the step measures (record.py reads these fields, never the step's name), checked against the
# lab's declared case keys (case.sh). An unknown option or a bad --case stops the run at once
# (exit 2). Returns 0 when the step did what was expected, else 1 (the run will exit 1); a full
# scratch or out disk stops it.
lab_run() {
  local expect=success stdout="" okst=0 fields=()
  while [[ "$1" == --* ]]; do
    case "$1" in
      --expect-fail) expect=failure ;;
      --ok-status) okst=$2; shift ;;
      --stdout) stdout=$2; shift ;;
      --case) fields+=("$2"); shift ;;
      *) lab__usage "lab_run: unknown option $1 (--expect-fail, --ok-status N, --stdout FILE, --case KEY=VALUE)" ;;
    esac
    shift
  done
  local name=$1
  shift
  [[ "$1" == -- ]] && shift
  local raw="$LAB_RUN/raw/$name" rc=0 t0 t1 secs status full l
  lab__case "$name" ${fields[@]+"${fields[@]}"}
  if lab__later_rep ${fields[@]+"${fields[@]}"}; then
    lab__say "repetition:$name" "$name: $LAB_ONE_REPETITION_WHY"
    lab__record_step "$name" skipped "" 0 "$expect" "$LAB_ONE_REPETITION_WHY"
    return 0
  fi
  [[ -n "$stdout" ]] || stdout="$raw.out"
  lab__cmd "$name" "$@"
  lab__say "step:$name" "$name: $LAB_CMD"
  t0=${EPOCHREALTIME//[.,]/}
  setsid "$@" > "$stdout" 2> "$raw.err" < /dev/null &
  wait "$!" || rc=$?
  t1=${EPOCHREALTIME//[.,]/}
  lab__seconds "$t0" "$t1"
  secs=$LAB_SECS
  if [[ $expect == success ]] && ((rc == okst)); then rc=0; fi
  if [[ $expect == success && $rc -eq 0 ]] || [[ $expect == failure && $rc -ne 0 ]]; then
    if [[ $expect == failure ]]; then
      lab__say "expected-failure:$name" "$name: failed as expected (exit $rc, ${secs}s): $(tail -n 1 "$raw.err")"
    else
      lab__say "ok:$name" "$name: ok (${secs}s)"
    fi
    lab__record_step "$name" ok "$rc" "$secs" "$expect" ""
    return 0
  fi
  LAB_FAILED=1
  full=$(lab__full_note)
  [[ -z "$full" ]] || lab__stop "stopping: $full (step $name: $(tail -n 1 "$raw.err" 2>/dev/null))"
  status="exit $rc"
  [[ $expect == success ]] || status="succeeded but was expected to fail"
  lab__say "failed:$name" "$name: FAILED ($status, ${secs}s); last lines of raw/$name.err:"
  while IFS= read -r l; do printf '\x1fdetail:%s\x1f    %s\n' "$name" "$l" >&2 || true; done < <(tail -n 5 "$raw.err")
  lab__record_step "$name" failed "$rc" "$secs" "$expect" "$status: $(tail -n 1 "$raw.err")"
  return 1
}

# lab_skip [--case KEY=VALUE]... NAME REASON: record a step as skipped (the lab goes on).
lab_skip() {
  local fields=()
  while [[ "$1" == --case ]]; do fields+=("$2"); shift 2; done
  [[ $1 != --* ]] || lab__usage "lab_skip: unknown option $1 (--case KEY=VALUE)"
  lab__case "$1" ${fields[@]+"${fields[@]}"}
  lab__say "skipped:$1" "$1: skipped: $2"
  lab__record_step "$1" skipped "" 0 success "$2"
}

# lab_spawn [--case KEY=VALUE]... NAME -- CMD [ARG...]: start a background process (a server) in
# its own process group, output to raw/NAME.out/.err, stopped on cleanup. Sets LAB_SPAWNED.
lab_spawn() {
  local fields=()
  while [[ "$1" == --case ]]; do fields+=("$2"); shift 2; done
  [[ $1 != --* ]] || lab__usage "lab_spawn: unknown option $1 (--case KEY=VALUE)"
  local name=$1
  shift
  [[ "$1" == -- ]] && shift
  local raw="$LAB_RUN/raw/$name" start
  lab__case "$name" ${fields[@]+"${fields[@]}"}
  lab__cmd "$name" "$@"
  lab__say "spawn:$name" "$name: starting in background: $LAB_CMD"
  setsid "$@" > "$raw.out" 2> "$raw.err" < /dev/null &
  LAB_SPAWNED=$!
  lab__starttime_v start "$LAB_SPAWNED" || start=""
  lab_defer "stop $name (pid $LAB_SPAWNED)" lab_kill_group "$LAB_SPAWNED" "$start"
}

# lab_wait_for FILE REGEX [SECONDS]: wait until FILE has a line matching REGEX (default 5 s).
lab_wait_for() {
  local file=$1 re=$2 tries=$(( ${3:-5} * 20 ))
  while ((tries-- > 0)); do grep -qE "$re" "$file" 2>/dev/null && return 0; sleep 0.05; done
  return 1
}

# lab_require NAME CAP...: on the first missing capability record NAME as skipped with the reason
# and return 1. CAPs: root, cmd:PROG, cpus:N, perf, tracefs (mounted if need be), inferno, and the
# probe's capabilities (labkit/run/probe.py CAPABILITIES, named in PCB_LAB_CAPS: loop, netns, pmu, ...).
lab_require() {
  local name=$1 cap why=""
  shift
  for cap in "$@"; do
    case "$cap" in
      root) [[ $EUID -eq 0 ]] || why="needs root (run with sudo)" ;;
      cmd:*) command -v "${cap#cmd:}" >/dev/null 2>&1 || why="${cap#cmd:} not installed" ;;
      cpus:*) (( $(nproc) >= ${cap#cpus:} )) || why="needs at least ${cap#cpus:} CPUs, this host has $(nproc)" ;;
      tracefs) why=$(lab__host_cap tracefs); [[ -z "$why" ]] || ! lab__mount_tracefs || why="" ;;
      perf)
        if ! command -v perf >/dev/null 2>&1; then why="perf not installed"
        elif ! perf --version >/dev/null 2>&1; then
          # e.g. Ubuntu's /usr/bin/perf wrapper without linux-tools-$(uname -r)
          why="perf does not run on this kernel: $(perf --version 2>&1 | head -n 1)"
        elif ! perf record --no-buildid-cache "$(lab__nobpf)" -q -o /dev/null -- true >/dev/null 2>&1; then
          why="perf record not permitted (perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null))"
        fi ;;
      inferno) command -v inferno-collapse-perf >/dev/null 2>&1 || why="inferno not installed (make setup installs it with cargo)" ;;
      *)
        [[ " ${PCB_LAB_CAPS:-} " == *" $cap "* ]] || lab__usage "lab_require $name: unknown capability $cap"
        why=$(lab__host_cap "$cap") ;;
    esac
    [[ -z "$why" ]] || { lab_skip "$name" "$why"; return 1; }
  done
  return 0
}

# lab__host_cap CAP: why the probe found CAP unavailable (PCB_CAP_<CAP>, set by the supervisor
# from host.json with labkit/run/probe.py CAPABILITIES), nothing when it is available.
lab__host_cap() { local v="PCB_CAP_${1^^}"; printf '%s' "${!v:-}"; }
# perf script's fields (perf-script(1) -F), named rather than left to perf's defaults, since
# labkit/parsers/perf_script.py, the labs' record.py and inferno-collapse-perf read the text.
# Each list is perf 6.1's default for its kind of recording, so there the text is the same
# bytes as without -F (tests/test_perf_fields.py compares the two). The labs that source this
# file read them (shellcheck sees only this file: SC2034).
# shellcheck disable=SC2034
LAB_PERF_STACKS=comm,tid,time,period,event,ip,sym,symoff,dso           # perf record -g of a command or -p
# shellcheck disable=SC2034
LAB_PERF_STACKS_ALL=comm,tid,cpu,time,period,event,ip,sym,symoff,dso   # perf record -a -g: every CPU's
# shellcheck disable=SC2034
LAB_PERF_TRACE=trace:comm,tid,cpu,time,event,trace                     # perf record -a -e tracepoints
# lab__nobpf: --no-bpf-event where perf has it (else -q): no 1 s wait at perf record's exit.
lab__nobpf() { if [[ $(perf record -h 2>&1) == *--no-bpf-event* ]]; then echo --no-bpf-event; else echo -q; fi; }

# lab__mount_tracefs: mount tracefs at /sys/kernel/tracing where nothing has yet, as perf and
# libtracefs do on first use (the supervisor journalled its unmount at the start); 1 if it cannot.
lab__mount_tracefs() {
  local m=/sys/kernel/tracing
  [[ $EUID -eq 0 && -d $m ]] && grep -qw tracefs /proc/filesystems && ! mountpoint -q "$m" || return 1
  mount -t tracefs nodev "$m" 2>/dev/null || return 1
  lab__say note "mounted tracefs at $m (unmounted when the lab ends)"
}

# lab_free_port [START]: print the first TCP port from START (default 31234) with no listener.
lab_free_port() {
  local p=${1:-31234}
  while [[ -n "$(ss -Htln "sport = :$p" 2>/dev/null)" ]]; do p=$((p + 1)); done
  echo "$p"
}

# lab_quick A B: print A in quick mode, B otherwise.
lab_quick() { if ((LAB_QUICK)); then echo "$1"; else echo "$2"; fi; }

# lab__quietly OUTFILE CMD...: run a helper of the lab (not a step) with its stdout to OUTFILE;
# its stderr is relayed by the supervisor. Returns its exit status.
lab__quietly() { local out=$1; shift; "$@" > "$out" < /dev/null; }

# ---- host changes that are always undone -----------------------------------------------

# lab_set_knob NAME FILE VALUE: write VALUE to a sysfs/procfs knob as step NAME; the old value
# (the bracketed entry of "none [mq-deadline] kyber") is restored on cleanup.
lab_set_knob() {
  local name=$1 file=$2 value=$3 old
  old=$(cat "$file") || { lab_skip "$name" "cannot read $file"; return 1; }
  if [[ $old == *"["*"]"* ]]; then old=${old#*[}; old=${old%%]*}; fi
  lab_defer "restore $file to $old" lab__write_file "$file" "$old"
  lab_run "$name" -- sh -c "echo $(printf '%q' "$value") > $(printf '%q' "$file")"
}
lab__write_file() { printf '%s\n' "$2" > "$1"; }

# lab_takes_odirect FILE: status 0 when FILE's file system accepts an O_DIRECT 4 KiB read.
lab_takes_odirect() { dd if="$1" of=/dev/null bs=4096 count=1 iflag=direct status=none 2>/dev/null; }

# lab_loop_attach NAME FILE [LOSETUP-OPTION...]: attach FILE to a free loop device as step NAME;
# loop devices backed by FILE are detached on cleanup. Sets LAB_LOOP. Where FILE's file system
# refuses O_DIRECT (tmpfs before Linux 6.6), --direct-io=on is dropped and NAME.direct-io skipped.
lab_loop_attach() {
  local name=$1 file=$2 opts=() o dev ra
  shift 2
  LAB_LOOP=""
  for o in "$@"; do
    if [[ $o == --direct-io=on ]] && ! lab_takes_odirect "$file"; then
      lab_skip "$name.direct-io" "the file system of $file refuses O_DIRECT (tmpfs before Linux 6.6): loop device without --direct-io"
      continue
    fi
    opts+=("$o")
  done
  # The kernel sets a loop device's read_ahead_kb from the backing file system and keeps it after
  # the detach: the free device's value is put back after the detach (registered first).
  dev=$(losetup --find 2>/dev/null) || dev=""
  ra="/sys/block/${dev##*/}/queue/read_ahead_kb"
  if [[ -n "$dev" && -r "$ra" ]]; then
    lab_defer "restore $ra to $(cat "$ra")" lab__write_file "$ra" "$(cat "$ra")"
  fi
  lab_defer "detach loop devices backed by $file" lab__loop_detach "$file"
  if [[ -n "$dev" ]]; then
    lab_run "$name" -- losetup --show ${opts[@]+"${opts[@]}"} "$dev" "$file" || return 1
  else
    lab_run "$name" -- losetup --find --show ${opts[@]+"${opts[@]}"} "$file" || return 1
  fi
  # shellcheck disable=SC2034 # for the lab's run.sh
  LAB_LOOP=$(tail -n 1 "$LAB_RUN/raw/$name.out")
}
# lab__loop_detach FILE: detach every loop device whose backing file is FILE, read from sysfs
# (loop/backing_file), so a device is found after its file was deleted too: the kernel then
# names it "FILE (deleted)", and losetup -j, which stats FILE, no longer can.
lab__loop_detach() {
  local f back dev real
  real=$(realpath -m -- "$1")
  for f in /sys/block/loop*/loop/backing_file; do
    back=$(cat "$f" 2>/dev/null) || continue
    back=${back% (deleted)}
    [[ $back == "$1" || $back == "$real" ]] || continue
    dev=${f#/sys/block/}
    losetup -d "/dev/${dev%%/*}"
  done
}

# lab_mount NAME TARGET -- MOUNT-ARGS...: run `mount MOUNT-ARGS... TARGET` as step NAME;
# TARGET is unmounted on cleanup (registered before mounting, so Ctrl-C cannot leak it).
# A TARGET that is already a mount point is refused (status 1, step skipped).
lab_mount() {
  local name=$1 target=$2
  shift 2
  [[ "$1" == -- ]] && shift
  mkdir -p "$target"
  if mountpoint -q "$target"; then lab_skip "$name" "$target is already a mount point"; return 1; fi
  lab_defer "unmount $target" lab__umount "$target" "$(lab__mount_count "$target")"
  lab_run "$name" -- mount "$@" "$target"
}
# lab__mount_count TARGET: how many mounts are stacked on TARGET now.
lab__mount_count() { awk -v t="$1" '$5 == t { n++ } END { print n + 0 }' /proc/self/mountinfo; }
# lab__umount TARGET [COUNT]: unmount TARGET while more than COUNT (default 0) mounts are on it.
lab__umount() {
  local below=${2:-0} i
  for ((i = 0; i < 8; i++)); do
    (( $(lab__mount_count "$1") > below )) || return 0
    umount "$1" 2>/dev/null || umount -l "$1"
  done
  (( $(lab__mount_count "$1") <= below ))
}

# lab_rmdir_later DIR: rmdir DIR (a tracefs instance the lab is about to make) on cleanup.
lab_rmdir_later() { lab_defer "remove $1" lab__rmdir "$1"; }
lab__rmdir() { if [[ -d "$1" ]]; then rmdir "$1"; fi; }

# lab_netns_add NAME NETNS: `ip netns add NETNS` as step NAME; on cleanup the namespace is
# deleted and /run/netns put back as it was (ip netns makes it a directory and a mount point).
lab_netns_add() {
  local name=$1 ns=$2 existed=0 mounted=0
  [[ -d /run/netns ]] && existed=1
  mountpoint -q /run/netns 2>/dev/null && mounted=1
  lab_defer "put /run/netns back as it was (existed $existed, mount point $mounted)" lab__netns_dir_restore "$existed" "$mounted"
  lab_defer "delete network namespace $ns" lab__netns_delete "$ns"
  lab_run "$name" -- ip netns add "$ns"
}
lab__netns_delete() { if [[ -e "/run/netns/$1" ]]; then ip netns delete "$1"; fi; }
lab__netns_dir_restore() {
  local existed=$1 mounted=$2
  [[ -d /run/netns ]] || return 0
  [[ -z "$(ls -A /run/netns)" ]] || return 0   # someone else's namespaces: leave it
  if ((!mounted)); then lab__umount /run/netns 0; fi
  if ((!existed)); then rmdir /run/netns; fi
}

# lab__remove_scratch DIR: unmount what is mounted under DIR (newest first; loop devices over its
# files detached in between), then remove DIR without crossing into another filesystem.
lab__remove_scratch() {
  local dir=$1 m dev
  [[ -d "$dir" ]] || return 0
  dir=$(cd "$dir" && pwd -P)
  for m in $(awk -v d="$dir/" 'index($5, d) == 1 && $0 ~ / - [^ ]+ \/dev\/loop/ { print $5 }' /proc/self/mountinfo | tac); do
    lab__umount "$m" 0 || true
  done
  while read -r dev m; do
    [[ "$m" == "$dir/"* ]] && losetup -d "$dev" 2>/dev/null
  done < <(losetup -l -n -O NAME,BACK-FILE 2>/dev/null)
  for m in $(awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | tac); do
    lab__umount "$m" 0 || true
  done
  rm -rf --one-file-system -- "$dir"
}

# ---- main -----------------------------------------------------------------------------

# lab__group_figures GROUP: the figures GROUP measured, indented under its steps (labkit.run.progress:
# the lab's record.py on the run so far; nothing when it needs later groups' data).
lab__group_figures() {
  local fig
  while IFS= read -r fig; do
    [[ -n "$fig" ]] && lab__say "figure:$1" "  $fig"
  done < <("$LAB_PY" -m labkit.run.progress figures --lab "$LAB_NAME" --lab-dir "$LAB_DIR" --run-dir "$LAB_RUN" \
             --group "$1" --quick "$LAB_QUICK" 2>/dev/null || true)
}

# lab__body: the body role: the groups the supervisor selected (PCB_LAB_SELECTED), in order,
# each under a "== [k/n] GROUP: description (~N s left)" header (PCB_LAB_ETA: GROUP=SECONDS of
# the previous run in this mode).
lab__body() {
  trap 'lab__on_err $LINENO $?' ERR
  # perf record (and perf sched record, which runs it) copies what it sampled into ~/.debug,
  # its build-id cache, unless told not to: every perf of the run keeps that cache in the
  # scratch directory. PERF_CONFIG names the one configuration file perf reads
  # (perf-config(1), perf 5.4 and later), so a reader's ~/.perfconfig does not change what a
  # lab's perf does either.
  printf '[buildid]\n\tdir = %s\n' "$LAB_SCRATCH/perf-buildid" > "$LAB_SCRATCH/perfconfig"
  export PERF_CONFIG="$LAB_SCRATCH/perfconfig"
  local -a sel=()
  local -A eta=() desc=()
  local g i k=0 w left
  read -ra sel <<< "${PCB_LAB_SELECTED:-}"
  for w in ${PCB_LAB_ETA:-}; do eta[${w%%=*}]=${w#*=}; done
  for i in "${!LAB_GROUPS[@]}"; do desc[${LAB_GROUPS[$i]}]=${LAB_GROUP_DESC[$i]}; done
  for g in ${sel[@]+"${sel[@]}"}; do
    k=$((k + 1)) left=""
    if ((${#eta[@]})); then
      left=0
      for w in "${sel[@]:k-1}"; do left=$((left + ${eta[$w]:-0})); done
      left=" (~${left} s left, from the last run here)"
    fi
    LAB_GROUP=$g
    lab__say "group:$g" "== [$k/${#sel[@]}] $g: ${desc[$g]}$left"
    "group_$g" || true
    lab__group_figures "$g"
  done
  exit "$LAB_FAILED"
}

# lab_main "$@": the run (through the supervisor), or the role the supervisor gave this shell.
lab_main() {
  case ${PCB_LAB_ROLE:-} in
    body) lab__body ;;
    undo) lab__undo_main ;;
  esac
  lab__supervisor exec "$@"
}
