# shellcheck shell=bash
# labs/lib/lab.sh: the lab contract (DESIGN.md, "The lab contract"), sourced by every labs/<lab>/run.sh.
#
#   run.sh [--quick] [--out DIR] [--scratch DIR] [--only GROUP,..] [--host LABEL] [--guest ARCH] [--help]
#   run.sh --recover [--out DIR] [--scratch DIR]
#
# A lab declares itself and its groups of steps, then calls lab_main:
#
#   source "$(dirname "$0")/../lib/lab.sh"
#   lab_define lat_tcp "TCP round-trip latency" gcc taskset perf   # name, title, tools to version
#   lab_group build "compile lat_tcp.c" always                      # 'always' runs even with --only
#   lab_group pinned "server and client pinned to every CPU pair"
#   group_build()  { lab_run build -- gcc -O2 -o "$LAB_SCRATCH/lat_tcp" "$LAB_DIR/lat_tcp.c"; }
#   group_pinned() { lab_require pinned cmd:taskset || return 0; ...; }
#   lab_main "$@"
#
# Each step prints a progress line, runs ONE command a reader could type, and keeps
# <run>/raw/<step>.cmd (the exact command), .out and .err. A step whose capability is
# missing is recorded as skipped with the reason. When the groups are done, `labkit record`
# turns the run directory into <out>/<lab>.json.
#
# Host changes are undone whatever happens, in two layers:
#   - the journal <out>/.<lab>.journal: every undo action is written there (lab_defer) BEFORE the
#     change it undoes is made (a mount, a loop device, a knob with its old value, a tracefs
#     instance, a network namespace, ...). Every process the lab starts carries
#     PCB_LAB_RUN=<run tag> in its environment (the tag is in the journal's first line before
#     any process starts) and background processes are journalled by PID and start time.
#   - the undo itself: on exit, error, SIGINT, SIGTERM, SIGHUP and on a write error (a closed
#     terminal or a pipe whose reader is gone: SIGPIPE, EIO), the lab stops its processes and
#     runs the journal's pending actions newest first. During the undo these signals are
#     ignored and progress is written to <out>/.<lab>.log as well as to stderr (which may be
#     gone). A failed undo action is reported and makes the exit status 3; the journal then
#     stays, and `run.sh --recover` retries.
# After SIGKILL (or a power cut of the shell: OOM, kill -9, a closed CI job) the journal stays:
# `run.sh --recover` (or `labkit recover`, for every lab) reads it and undoes everything in it,
# and a normal run refuses to start while a killed run's journal is there (exit 2, with the
# --recover command to type). One run per lab at a time: the lab holds a lock (flock on its
# own run.sh, no file of its own) and a second run names the PID that holds it.
# Nothing is written outside the scratch and out directories: every perf record runs with
# --no-buildid-cache (perf ignores PERF_BUILDID_DIR and would fill ~/.debug), Python writes no
# bytecode, tools' temporary files go to the scratch directory (TMPDIR), /run/netns is put back as it was found, and the scratch directory is
# removed with --one-file-system after unmounting what is mounted inside it.
#
# Exit status: 0 done (some steps may be skipped), 1 a step failed (or the scratch or out disk
# is full), 2 bad usage or refused to start (one line on stderr: another run in progress, a
# killed run to recover first), 3 a host change could not be undone (see the message),
# 4 the shell itself failed and stopped (everything undone; see lab__on_exit: most likely a
# signal whose trap bash 5.2 could not parse), 128+N stopped by signal N (130 SIGINT,
# 143 SIGTERM, 129 SIGHUP, 141 write error).

set -Eeuo pipefail

LAB_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
LAB_DIR="$(cd "$(dirname "$0")" && pwd)"
LAB_SCRIPT="$LAB_DIR/$(basename "$0")"
LAB_NAME="" LAB_TITLE="" LAB_TOOLS=""
LAB_GROUPS=() LAB_GROUP_DESC=() LAB_GROUP_ALWAYS=()
LAB_QUICK=0 LAB_OUT="" LAB_SCRATCH_PARENT="" LAB_ONLY="" LAB_HOST="" LAB_GUEST="" LAB_RECOVER=0
LAB_SCRATCH="" LAB_RUN="" LAB_FAILED=0 LAB_CHILD="" LAB_START=0 LAB_START_US=0 LAB_GROUP=""
LAB_ARGS=""
# The journal and its in-memory mirror (ids of pending undo actions, for lab_mark/lab_unwind).
LAB_JOURNAL="" LAB_LOG="" LAB_TAG="" LAB_SEQ=0 LAB_PENDING=()
# $! before a background start whose PID is not yet in LAB_CHILD or the journal ("": none).
LAB_LAUNCH=""
declare -A LAB_UNDO=() LAB_UNDO_DESC=()
LAB_UNDOING=0 LAB_QUIET_UNDO=0 LAB_FINISHING=0 LAB_EXIT2=0 LAB_LOCK="" LAB_ERR="" LAB_COLOR=0

# Python with labkit importable: the project venv, else python3 with the repo on PYTHONPATH.
if [[ -x "$LAB_ROOT/.venv/bin/python" ]]; then
  LAB_PY="$LAB_ROOT/.venv/bin/python"
else
  LAB_PY="python3"
fi
export PYTHONPATH="$LAB_ROOT${PYTHONPATH:+:$PYTHONPATH}"
# No __pycache__ written into the checkout (outside scratch and out); cached bytecode is still read.
export PYTHONDONTWRITEBYTECODE=1
# inferno (flame graphs) installed by `make setup` into the project.
export PATH="$LAB_ROOT/.tools/bin:$PATH"

# ---- output ---------------------------------------------------------------------------

# lab__elapsed VAR: set VAR to the seconds since the start, one decimal (no subshell).
lab__elapsed() {
  local now=${EPOCHREALTIME//[.,]/} d
  d=$(( now - ${LAB_START_US:-now} ))
  ((d >= 0)) || d=0
  printf -v "$1" '%d.%d' $((d / 1000000)) $(((d % 1000000) / 100000))
}

# lab__emit LINE: write LINE to the lab's stderr (LAB_ERR, saved at start, so a signal handler
# that runs while a command's output is redirected is still heard) and to the run's log. A
# write error on stderr (reader gone, terminal closed) stops the lab, except during the undo.
lab__emit() {
  [[ -z "$LAB_LOG" ]] || printf '%s\n' "$1" 2>/dev/null >> "$LAB_LOG" || true
  local out=$1
  if ((${LAB_COLOR:-0})); then  # a terminal without NO_COLOR: headers bold, failures red, figures cyan
    case $1 in
      *"] == ["*) out=$'\e[1m'$1$'\e[0m' ;;
      *": FAILED ("*|*"stopped: "*) out=$'\e[31m'$1$'\e[0m' ;;
      *"]   "*) out=$'\e[36m'$1$'\e[0m' ;;
    esac
  fi
  if ! printf '%s\n' "$out" 2>/dev/null 1>&"${LAB_ERR:-2}"; then
    ((LAB_UNDOING)) || lab__stop PIPE
  fi
  return 0
}

# lab__say TEXT: one progress line, "[lab  12.3s] TEXT".
lab__say() {
  local e line
  lab__elapsed e
  printf -v line '[%s %6s] %s' "$LAB_NAME" "${e}s" "$*"
  lab__emit "$line"
}

# lab__sigint_note: say so when SIGINT was ignored before this shell started (a script that ran
# the lab with `&`, nohup-like wrappers): bash cannot trap a signal ignored on entry, so Ctrl-C
# would not stop the run. SIGTERM still does, with the full cleanup.
lab__sigint_note() {
  local ign
  ign=$(awk '/^SigIgn:/ {print $2}' /proc/$$/status 2>/dev/null) || return 0
  [[ $ign =~ ^[0-9a-fA-F]+$ ]] || return 0
  if (( 16#$ign & 2 )); then
    lab__say "note: SIGINT is ignored in this process (started in the background by a script?): Ctrl-C will not stop it; kill -TERM $$ stops it and undoes everything"
  fi
}

# lab__usage_error MESSAGE: one line on stderr, exit 2 (nothing has been started).
lab__usage_error() {
  printf '%s: %s (see %s --help)\n' "$(basename "$0")" "$1" "$(basename "$0")" >&2 || true
  LAB_EXIT2=1; exit 2
}

# lab__refuse MESSAGE: one line on stderr, exit 2, before any host change (lock, stale journal).
lab__refuse() {
  printf '%s: %s\n' "$(basename "$0")" "$1" >&2 || true
  LAB_EXIT2=1; exit 2
}

# lab_define NAME TITLE [TOOL...]: name the lab, a one-line title and the tools whose versions are recorded.
lab_define() { LAB_NAME=$1; LAB_TITLE=$2; shift 2; LAB_TOOLS="$*"; }

# lab_group NAME DESCRIPTION [always]: declare a group of steps, run in declaration order by group_NAME.
lab_group() {
  LAB_GROUPS+=("$1"); LAB_GROUP_DESC+=("$2"); LAB_GROUP_ALWAYS+=("${3:-}")
}

lab_usage() {
  cat <<EOF
usage: $(basename "$(dirname "$0")")/run.sh [--quick] [--out DIR] [--scratch DIR] [--only GROUP,..] [--host LABEL] [--guest ARCH] [--help]
       $(basename "$(dirname "$0")")/run.sh --recover [--out DIR] [--scratch DIR]

$LAB_TITLE

  --quick         short run (under 2 minutes on 2 cores): fewer cases and repetitions
  --out DIR       host results directory (default: local-results/<host label>);
                  writes DIR/$LAB_NAME.json and DIR/$LAB_NAME/ (raw outputs, artifacts)
  --scratch DIR   parent of the scratch directory (default: \${TMPDIR:-/tmp}); the lab
                  writes only in a fresh directory under it and removes it on exit
  --only G1,G2    run only these groups of steps (groups marked * always run)
  --host LABEL    host label in the result (default: <hostname>-<arch>)
  --guest ARCH    run the whole lab inside a QEMU guest of ARCH (arm64, x86_64) that
                  labkit.guest boots (Debian kernel and userspace, cached); the result's host
                  is the guest (default label qemu-ARCH-tcg or qemu-ARCH-kvm)
  --recover       undo what a killed run of this lab left behind (mounts, loop devices,
                  knobs, tracefs, namespaces, processes), from its journal DIR/.$LAB_NAME.journal
                  (with --out DIR; also found through --scratch DIR); \`labkit recover\` does
                  it for every lab
  --help          this text

groups, in order:
EOF
  local i
  for i in "${!LAB_GROUPS[@]}"; do
    printf '  %-10s %s%s\n' "${LAB_GROUPS[$i]}" "${LAB_GROUP_DESC[$i]}" "${LAB_GROUP_ALWAYS[$i]:+ *}"
  done
  cat <<EOF

Steps that need something this host lacks (root, perf, a tool, ...) are recorded as
skipped with the reason. Every host change is undone on exit, error, Ctrl-C, SIGTERM,
SIGHUP and a closed output; after a kill -9, run this script with --recover.
Exit status: 0 done, 1 a step failed, 2 bad usage or refused to start, 3 a host change
could not be undone, 4 the shell failed (everything undone), 128+N stopped by signal N.
EOF
}

lab__parse() {
  LAB_ARGS="$*"
  LAB_SEEN=" "
  while (($#)); do
    case "$1" in --out*|--scratch*|--only*|--host*|--guest*) LAB_SEEN+="${1%%=*} " ;; esac
    case "$1" in
      --quick) LAB_QUICK=1 ;;
      --recover) LAB_RECOVER=1 ;;
      --out) (($# >= 2)) || lab__usage_error "--out needs a directory"; LAB_OUT=$2; shift ;;
      --out=*) LAB_OUT=${1#*=} ;;
      --scratch) (($# >= 2)) || lab__usage_error "--scratch needs a directory"; LAB_SCRATCH_PARENT=$2; shift ;;
      --scratch=*) LAB_SCRATCH_PARENT=${1#*=} ;;
      --only) (($# >= 2)) || lab__usage_error "--only needs a list of groups"; LAB_ONLY=$2; shift ;;
      --only=*) LAB_ONLY=${1#*=} ;;
      --host) (($# >= 2)) || lab__usage_error "--host needs a label"; LAB_HOST=$2; shift ;;
      --host=*) LAB_HOST=${1#*=} ;;
      --guest) (($# >= 2)) || lab__usage_error "--guest needs an architecture (arm64 or x86_64)"; LAB_GUEST=$2; shift ;;
      --guest=*) LAB_GUEST=${1#*=} ;;
      -h|--help) lab_usage; exit 0 ;;
      *) lab__usage_error "unknown option: $1" ;;
    esac
    shift
  done
  lab__check_options
}

# lab__check_options: every option value that cannot work is one line and exit 2, before
# anything is created (--out and --scratch are checked again when they are created).
lab__check_options() {
  local g
  if [[ "$LAB_SEEN" == *" --only "* ]]; then
    [[ -n "${LAB_ONLY//[, ]/}" ]] || lab__usage_error "--only: empty list of groups (groups: ${LAB_GROUPS[*]})"
    for g in ${LAB_ONLY//,/ }; do
      lab__is_group "$g" || lab__usage_error "--only: unknown group $g (groups: ${LAB_GROUPS[*]})"
    done
  fi
  if [[ "$LAB_SEEN" == *" --host "* ]] && [[ ! "$LAB_HOST" =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ ]]; then
    lab__usage_error "--host: bad label '$LAB_HOST' (1 to 64 letters, digits, . _ -, not starting with . _ -)"
  fi
  if [[ -n "$LAB_GUEST" && ! "$LAB_GUEST" =~ ^(arm64|x86_64)$ ]]; then
    lab__usage_error "--guest: unknown architecture $LAB_GUEST (arm64 or x86_64)"
  fi
  if [[ "$LAB_SEEN" == *" --out "* && -z "$LAB_OUT" ]]; then lab__usage_error "--out: empty directory name"; fi
  if [[ -n "$LAB_OUT" ]]; then
    local up=$LAB_OUT
    while [[ ! -e "$up" && "$up" == */* ]]; do up=${up%/*}; [[ -n "$up" ]] || up=/; done
    [[ -e "$up" ]] || up=.
    if [[ -e "$LAB_OUT" && ! -d "$LAB_OUT" ]]; then lab__usage_error "--out $LAB_OUT: not a directory"; fi
    if [[ ! -d "$up" ]]; then lab__usage_error "--out $LAB_OUT: $up is not a directory"; fi
    case "$(realpath -m -- "$LAB_OUT")/" in
      /proc/*|/sys/*) lab__usage_error "--out $LAB_OUT: a kernel filesystem, not a place for results" ;;
    esac
  fi
  if [[ "$LAB_SEEN" == *" --scratch "* && -z "$LAB_SCRATCH_PARENT" ]]; then lab__usage_error "--scratch: empty directory name"; fi
  if [[ -n "$LAB_SCRATCH_PARENT" ]]; then
    [[ -e "$LAB_SCRATCH_PARENT" ]] || lab__usage_error "--scratch $LAB_SCRATCH_PARENT: no such directory"
    [[ -d "$LAB_SCRATCH_PARENT" ]] || lab__usage_error "--scratch $LAB_SCRATCH_PARENT: not a directory"
    case "$(realpath -m -- "$LAB_SCRATCH_PARENT")/" in
      /proc/*|/sys/*) lab__usage_error "--scratch $LAB_SCRATCH_PARENT: a kernel filesystem, not a place for scratch files" ;;
    esac
    [[ -w "$LAB_SCRATCH_PARENT" && -x "$LAB_SCRATCH_PARENT" ]] ||
      lab__usage_error "--scratch $LAB_SCRATCH_PARENT: not writable by this user"
  fi
  if ((LAB_RECOVER)) && [[ -n "$LAB_GUEST$LAB_ONLY" || $LAB_QUICK -eq 1 ]]; then
    lab__usage_error "--recover takes only --out, --scratch and --host"
  fi
}

lab__is_group() { local g; for g in "${LAB_GROUPS[@]}"; do [[ "$g" == "$1" ]] && return 0; done; return 1; }

lab__selected() {
  local i=$1
  [[ -z "$LAB_ONLY" || -n "${LAB_GROUP_ALWAYS[$i]}" ]] && return 0
  [[ ",$LAB_ONLY," == *",${LAB_GROUPS[$i]},"* ]]
}

# ---- the journal and the undo ------------------------------------------------------------
#
# <out>/.<lab>.journal, one tab-separated line per event, appended (a line is written by one
# builtin printf: a signal cannot split it):
#   run   LAB PID STARTTIME TAG OUT SCRATCH-PARENT SCRIPT   the run (first line, before any change)
#   do    ID DESCRIPTION COMMAND             an undo action, registered before its change
#   done  ID                                 the action ran (or is no longer needed)
#   fail  ID MESSAGE                         the action failed (it stays pending)
# COMMAND is shell words (printf %q) naming a function of lab.sh or of the lab's run.sh.

lab__journal() {
  local IFS=$'\t'
  if ! printf '%s\n' "$*" 2>/dev/null >> "$LAB_JOURNAL"; then
    ((LAB_UNDOING)) && return 1
    lab__say "cannot write the journal $LAB_JOURNAL: $(lab__space_note "$LAB_OUT")stopping"
    exit 1
  fi
}

# lab_defer DESCRIPTION CMD [ARG...]: register an undo action (journal, then memory). Call it
# BEFORE making the change it undoes; the action must be harmless when the change was never
# made or was already undone (it may run twice: once in lab_unwind, once more after a signal).
lab_defer() {
  local desc=${1//[$'\t\n']/ } cmd id; shift
  printf -v cmd '%q ' "$@"
  id=$((LAB_SEQ + 1))
  lab__journal "do" "$id" "$desc" "${cmd% }"
  LAB_SEQ=$id
  LAB_UNDO[$id]=${cmd% }
  LAB_UNDO_DESC[$id]=$desc
  LAB_PENDING+=("$id")
}

# lab_mark: print the current depth of the undo stack (for lab_unwind).
lab_mark() { echo "$LAB_SEQ"; }

# lab__undo_one ID DESCRIPTION COMMAND: run one undo action; on success journal it as done.
# Returns 1 (and reports the action and its error) when it failed.
lab__undo_one() {
  local id=$1 desc=$2 cmd=$3 err rc=0
  if ((LAB_QUIET_UNDO)); then
    [[ -z "$LAB_LOG" ]] || printf '%s\n' "[$LAB_NAME] cleanup: $desc" 2>/dev/null >> "$LAB_LOG" || true
  else
    lab__say "cleanup: $desc"
  fi
  err=$(eval "$cmd" 2>&1 >/dev/null) || rc=$?
  if ((rc == 0)); then
    lab__journal "done" "$id" || true
    return 0
  fi
  err=${err//[$'\t']/ }; err=${err##*$'\n'}
  lab__say "cleanup FAILED: $desc (exit $rc${err:+: $err})"
  lab__journal fail "$id" "exit $rc${err:+: $err}" || true
  return 1
}

# lab_unwind [MARK]: run and pop undo actions down to MARK (default: all), newest first.
# A failed action stays in the journal: it is tried again when the lab exits.
lab_unwind() {
  local mark=${1:-0} k id keep=()
  for ((k = ${#LAB_PENDING[@]} - 1; k >= 0; k--)); do
    id=${LAB_PENDING[$k]}
    if ((id > mark)); then
      lab__undo_one "$id" "${LAB_UNDO_DESC[$id]}" "${LAB_UNDO[$id]}" || true
      unset "LAB_UNDO[$id]" "LAB_UNDO_DESC[$id]"
    else
      keep=("$id" ${keep[@]+"${keep[@]}"})
    fi
  done
  LAB_PENDING=(${keep[@]+"${keep[@]}"})
}

# lab__replay JOURNAL: run every pending action of JOURNAL newest first (the journal, not the
# memory, is the truth: it also holds what was registered just before a signal). Prints the
# number of failed actions; status 1 when there was any.
lab__replay() {
  local j=$1 kind id desc cmd i failed=0
  local -a ids=()
  local -A dcmd=() ddesc=() isdone=()
  while IFS=$'\t' read -r kind id desc cmd; do
    case "$kind" in
      do) ids+=("$id"); ddesc[$id]=$desc; dcmd[$id]=$cmd ;;
      done) isdone[$id]=1 ;;
    esac
  done < "$j"
  for ((i = ${#ids[@]} - 1; i >= 0; i--)); do
    id=${ids[$i]}
    [[ -z "${isdone[$id]:-}" ]] || continue
    lab__undo_one "$id" "${ddesc[$id]}" "${dcmd[$id]}" || failed=$((failed + 1))
  done
  LAB_PENDING=()
  ((failed == 0))
}

# lab__starttime PID: the process's start time (clock ticks after boot, /proc/PID/stat field 22).
lab__starttime() {
  local t
  lab__starttime_v t "$1" || return 1
  echo "$t"
}

# lab__starttime_v VAR PID: the same into VAR, without a subshell (used at step boundaries, where a
# signal must reach the lab shell's traps and not a command substitution's child).
lab__starttime_v() {
  local s f
  { read -r s < "/proc/$2/stat"; } 2>/dev/null || return 1
  read -ra f <<< "${s##*) }"
  printf -v "$1" '%s' "${f[19]}"
}

# lab_kill_group PID [STARTTIME]: TERM a process group started by lab_run/lab_spawn, then KILL
# if it lingers. With STARTTIME, a live process PID that started at another time is another
# process (the PID was reused): it is left alone.
lab_kill_group() {
  local pid=$1 start=${2:-} now i
  if [[ -n "$start" ]] && now=$(lab__starttime "$pid") && [[ "$now" != "$start" ]]; then
    return 0
  fi
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM -- "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 20; i++)); do
    kill -0 -- "-$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
  for ((i = 0; i < 20; i++)); do
    kill -0 -- "-$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  echo "process group $pid does not die" >&2
  return 1
}

# lab__tagged TAG: PIDs of processes whose environment holds PCB_LAB_RUN=TAG.
lab__tagged() {
  local f pid
  while IFS= read -r f; do
    pid=${f#/proc/}; pid=${pid%%/*}
    [[ $pid == "$$" || $pid == "${BASHPID:-}" ]] || echo "$pid"
  done < <(grep -lzxF "PCB_LAB_RUN=$1" /proc/[0-9]*/environ 2>/dev/null)
}

# lab__kill_tagged TAG: stop every process the run started (they carry its tag): TERM, then KILL.
lab__kill_tagged() {
  local tag=$1 pids sig i
  for sig in TERM KILL; do
    pids=$(lab__tagged "$tag")
    [[ -n "$pids" ]] || return 0
    # shellcheck disable=SC2086 # a list of PIDs
    kill "-$sig" $pids 2>/dev/null || true
    for ((i = 0; i < 20; i++)); do
      [[ -n "$(lab__tagged "$tag")" ]] || return 0
      sleep 0.1
    done
  done
  echo "processes still running: $(lab__tagged "$tag" | tr '\n' ' ')" >&2
  return 1
}

# lab__undo_all: stop the run's processes, then undo everything the journal still holds. A
# journal that is gone (its out dir removed under the running lab) leaves the memory's record:
# what is still pending there is undone, newest first.
# Status 1 when something could not be undone (the journal then stays for --recover).
lab__undo_all() {
  local failed=0 lost=0 k id
  if [[ -z "$LAB_JOURNAL" || ! -f "$LAB_JOURNAL" ]]; then
    ((${#LAB_PENDING[@]})) || return 0
    lost=1
  fi
  # A signal between `cmd &` and the next command: bash has set $! (the child exists) but no
  # variable or journal entry holds it, and until it execs it carries no run tag (its
  # /proc/PID/environ is still the lab shell's own). Seen in the fault matrix as a strace and
  # its fio left running after SIGHUP (fio_engines-strace-1-SIGHUP).
  if [[ -n "$LAB_LAUNCH" && "${!:-0}" != "$LAB_LAUNCH" ]]; then lab_kill_group "$!" >/dev/null 2>&1 || true; fi
  LAB_LAUNCH=""
  export -n PCB_LAB_RUN 2>/dev/null || true
  if [[ -n "$LAB_CHILD" ]]; then lab_kill_group "$LAB_CHILD" >/dev/null 2>&1 || true; LAB_CHILD=""; fi
  if [[ -n "$LAB_TAG" ]] && [[ -n "$(lab__tagged "$LAB_TAG")" ]]; then
    lab__undo_one 0 "stop every process of this run" "lab__kill_tagged $(printf '%q' "$LAB_TAG")" || failed=1
  fi
  if ((lost)); then
    lab__say "the journal $LAB_JOURNAL is gone: undoing what this run still holds in memory"
    for ((k = ${#LAB_PENDING[@]} - 1; k >= 0; k--)); do
      id=${LAB_PENDING[$k]}
      lab__undo_one "$id" "${LAB_UNDO_DESC[$id]}" "${LAB_UNDO[$id]}" || failed=1
    done
    LAB_PENDING=()
  else
    lab__replay "$LAB_JOURNAL" || failed=1
  fi
  if ((failed)); then
    if ((lost)); then
      lab__say "some host changes could not be undone (above), and without the journal --recover cannot retry them: undo them by hand"
    else
      lab__say "some host changes could not be undone (above); once their cause is fixed: $(lab__recover_cmd)"
    fi
    return 1
  fi
  rm -f "$LAB_JOURNAL"
  return 0
}

lab__recover_cmd() {
  local sudo=""
  [[ $EUID -ne 0 ]] || sudo="sudo "
  printf '%s%s --recover --out %q' "$sudo" "$(lab__script_for_humans)" "$LAB_OUT"
}

lab__script_for_humans() {
  local p=$LAB_SCRIPT
  [[ "$p" != "$PWD/"* ]] || p=${p#"$PWD/"}
  printf '%s' "$p"
}

# lab__stop SIG: a signal (or a write error, PIPE) stops the lab: exit 128+N after the undo. The
# undo runs here, not only from the EXIT trap: bash does not always run that trap when exit is
# called from a signal trap (seen with SIGPIPE trapped during a command substitution).
lab__stop() {
  local sig=$1 code
  # A subshell that caught the signal before resetting its traps: it only ends; the lab shell
  # itself got the same signal and does the undo.
  if [[ $BASHPID != "$$" ]]; then exit 1; fi
  trap '' INT TERM HUP PIPE QUIT
  case "$sig" in INT) code=130 ;; TERM) code=143 ;; HUP) code=129 ;; QUIT) code=131 ;; *) code=141 ;; esac
  LAB_UNDOING=1
  if [[ $sig == PIPE ]]; then
    lab__say "write error on standard output or error (reader gone, terminal closed?): stopping, undoing host changes"
  else
    lab__say "interrupted by SIG$sig: undoing host changes"
  fi
  lab__finish "$code"
}

# lab__on_exit: the EXIT trap. Exit status 2 that no deliberate exit 2 (bad usage, a refusal:
# LAB_EXIT2) explains is bash failing on its own. The known cause: bash 5.2 finds the end of a
# $(...) by re-entering its parser when it expands it, and runs a signal's trap from inside that
# parser; the trap's own text then fails to parse ("trap: line 2: unexpected EOF while looking
# for matching `)'"), the shell exits with status 2, and only this trap runs. The signal is
# lost, so the lab says what happened and exits 4 after the full undo. Seen once in 653 cases of
# the full fault matrix (optane_kyber-sched-8-SIGHUP), and with any trapped signal in a loop of
# $(...) (about 1 in 600 signals sent at random moments); the same bash failure is described in
# tigerblue77/Dell_iDRAC_fan_controller_Docker#188.
lab__on_exit() {
  local code=$?
  if ((code == 2 && !LAB_EXIT2 && !LAB_FINISHING)); then
    LAB_UNDOING=1
    lab__say "stopped: the shell failed (bash exit 2, its message above), most likely a signal whose trap bash could not parse while it expanded a \$(...): undoing host changes"
    code=4
  fi
  lab__finish "$code"
}

# lab__finish CODE: undo everything the journal holds (once), then exit CODE (3 if an undo failed).
lab__finish() {
  local code=$1
  if [[ $BASHPID != "$$" ]]; then exit "$code"; fi   # never the undo from a subshell
  trap '' INT TERM HUP PIPE QUIT
  trap - ERR
  set +e
  if ((LAB_FINISHING)); then exit "$code"; fi
  LAB_FINISHING=1 LAB_UNDOING=1
  if ! lab__undo_all; then code=3; fi
  # A run that ended well leaves no log (its result says everything); a stopped or failed run's
  # log stays beside the result: what ran, and what was undone.
  if ((code == 0)) && [[ -n "$LAB_LOG" ]]; then rm -f "$LAB_LOG"; fi
  exit "$code"
}

lab__on_err() {
  local line=$1 code=$2 why
  trap - ERR
  # In a subshell (a process substitution, a pipeline's side) the failure is its caller's to
  # judge: the subshell ends with the status, and the lab's own shell decides (a reader of
  # `< <(cmd)` that stopped early gives cmd a SIGPIPE, 141, which is no internal error).
  if [[ $BASHPID != "$$" ]]; then exit "$code"; fi
  why=$(lab__full_note)
  if [[ -n "$why" ]]; then
    lab__say "stopping: $why"
  else
    lab__say "internal error (line $line, exit $code): stopping, undoing host changes"
  fi
  exit 1
}

lab__traps() {
  trap 'lab__on_exit' EXIT
  trap 'lab__stop INT' INT
  trap 'lab__stop TERM' TERM
  trap 'lab__stop HUP' HUP
  trap 'lab__stop QUIT' QUIT
  trap 'lab__stop PIPE' PIPE
  trap 'lab__on_err $LINENO $?' ERR
}

# ---- disk space -------------------------------------------------------------------------

# lab__free_kib DIR: free KiB on DIR's filesystem for this user.
lab__free_kib() { df -Pk -- "$1" 2>/dev/null | awk 'NR == 2 { print $4 }'; }

# lab__space_note DIR: "DIR's filesystem is full (N KiB free); " when under 1 MiB is free.
lab__space_note() {
  local free; free=$(lab__free_kib "$1")
  [[ -n "$free" ]] && ((free < 1024)) && printf '%s is full (%s KiB free); ' "$1" "$free"
  return 0
}

# lab__full_note: a one-line reason when the scratch or the out filesystem is full, else nothing.
lab__full_note() {
  local d free
  for d in "$LAB_SCRATCH" "$LAB_OUT"; do
    [[ -n "$d" && -d "$d" ]] || continue
    free=$(lab__free_kib "$d")
    if [[ -n "$free" ]] && ((free < 1024)); then
      printf 'no space left on the filesystem of %s (%s KiB free)' "$d" "$free"
      return 0
    fi
  done
}

# ---- steps ----------------------------------------------------------------------------

lab__record_step() { # name status exit seconds expect reason
  local reason=${6//$'\t'/ }
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "${LAB_GROUP:-main}" "$2" "$3" "$4" "$5" "${reason//$'\n'/ }" \
    >> "$LAB_RUN/steps.tsv"
}

# lab__case NAME KEY=VALUE...: keep a step's case (what it measures, as data) in raw/NAME.case,
# one KEY=VALUE a line; labkit record puts it in the step's record as "case".
lab__case() {
  local name=$1; shift
  (($#)) || return 0
  printf '%s\n' "$@" > "$LAB_RUN/raw/$name.case"
}

# lab_run [--expect-fail] [--ok-status N] [--stdout FILE] [--case KEY=VALUE]... NAME -- CMD [ARG...]:
# run one step, keep its command and output (stdout to FILE instead of raw/NAME.out for bulky
# output kept in scratch). --ok-status N: exit status N is a success too (timeout(1)'s 124 when
# it ends a tracer after the time asked for). --case: what the step measures (the lab's record.py
# reads these fields, never the step's name). Returns 0 when the step did what was expected, 1
# otherwise (and the lab will exit 1). A step that fails because the scratch or out filesystem
# is full stops the lab.
lab_run() {
  local expect=success stdout="" okst=0 fields=()
  while [[ "$1" == --* ]]; do
    case "$1" in
      --expect-fail) expect=failure ;;
      --ok-status) okst=$2; shift ;;
      --stdout) stdout=$2; shift ;;
      --case) fields+=("$2"); shift ;;
    esac
    shift
  done
  local name=$1; shift; [[ "$1" == -- ]] && shift
  local raw="$LAB_RUN/raw/$name" rc=0 t0 t1 secs status cmd full
  lab__case "$name" "${fields[@]}"
  [[ -n "$stdout" ]] || stdout="$raw.out"
  printf -v cmd '%q ' "$@"
  printf '%s' "${cmd% }" > "$raw.cmd"
  lab__say "$name: ${cmd% }"
  t0=${EPOCHREALTIME//[.,]/}
  LAB_LAUNCH=${!:-0}
  setsid "$@" > "$stdout" 2> "$raw.err" < /dev/null {LAB_ERR}>&- {LAB_LOCK}>&- &
  LAB_CHILD=$!
  LAB_LAUNCH=""
  wait "$LAB_CHILD" || rc=$?
  LAB_CHILD=""
  t1=${EPOCHREALTIME//[.,]/}
  printf -v secs '%d.%03d' $(((t1 - t0) / 1000000)) $((((t1 - t0) % 1000000) / 1000))
  if [[ $expect == success ]] && ((rc == okst)); then rc=0; fi
  if [[ $expect == success && $rc -eq 0 ]] || [[ $expect == failure && $rc -ne 0 ]]; then
    if [[ $expect == failure ]]; then
      lab__say "$name: failed as expected (exit $rc, ${secs}s): $(tail -n 1 "$raw.err")"
    else
      lab__say "$name: ok (${secs}s)"
    fi
    lab__record_step "$name" ok "$rc" "$secs" "$expect" ""
    return 0
  fi
  LAB_FAILED=1
  full=$(lab__full_note)
  if [[ -n "$full" ]]; then
    lab__say "stopping: $full (step $name: $(tail -n 1 "$raw.err" 2>/dev/null))"
    exit 1
  fi
  if [[ $expect == failure ]]; then
    status="succeeded but was expected to fail"
  else
    status="exit $rc"
  fi
  lab__say "$name: FAILED ($status, ${secs}s); last lines of raw/$name.err:"
  local l
  while IFS= read -r l; do lab__emit "    $l"; done < <(tail -n 5 "$raw.err")
  lab__record_step "$name" failed "$rc" "$secs" "$expect" "$status: $(tail -n 1 "$raw.err")"
  return 1
}

# lab_skip [--case KEY=VALUE]... NAME REASON: record a step as skipped (the lab goes on).
lab_skip() {
  local fields=()
  while [[ "$1" == --case ]]; do fields+=("$2"); shift 2; done
  lab__case "$1" "${fields[@]}"
  lab__say "$1: skipped: $2"
  lab__record_step "$1" skipped "" 0 success "$2"
}

# lab_spawn [--case KEY=VALUE]... NAME -- CMD [ARG...]: start a background process (e.g. a server) in its own
# process group; output to raw/NAME.out/.err; stopped on cleanup (journalled by PID and start
# time; the run's tag in its environment covers the moment between its start and that entry).
# Sets LAB_SPAWNED.
lab_spawn() {
  local fields=()
  while [[ "$1" == --case ]]; do fields+=("$2"); shift 2; done
  local name=$1; shift; [[ "$1" == -- ]] && shift
  local raw="$LAB_RUN/raw/$name" cmd start
  lab__case "$name" "${fields[@]}"
  printf -v cmd '%q ' "$@"
  printf '%s' "${cmd% }" > "$raw.cmd"
  lab__say "$name: starting in background: ${cmd% }"
  LAB_LAUNCH=${!:-0}
  setsid "$@" > "$raw.out" 2> "$raw.err" < /dev/null {LAB_ERR}>&- {LAB_LOCK}>&- &
  LAB_SPAWNED=$!
  lab__starttime_v start "$LAB_SPAWNED" || start=""
  lab_defer "stop $name (pid $LAB_SPAWNED)" lab_kill_group "$LAB_SPAWNED" "$start"
  LAB_LAUNCH=""
}

# lab_wait_for FILE REGEX [SECONDS]: wait until FILE has a line matching REGEX (default 5 s).
lab_wait_for() {
  local file=$1 re=$2 tries=$(( ${3:-5} * 20 ))
  while ((tries-- > 0)); do
    grep -qE "$re" "$file" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

# lab_require NAME CAP...: check capabilities; on the first missing one record NAME as
# skipped with the reason and return 1. CAPs: root, cmd:PROG, cpus:N, netns, loop, perf,
# tracefs (mounted at /sys/kernel/tracing for the run where the kernel has it and it is not), pmu,
# inferno.
lab_require() {
  local name=$1 cap why=""; shift
  for cap in "$@"; do
    case "$cap" in
      root) [[ $EUID -eq 0 ]] || why="needs root (run with sudo)" ;;
      cmd:*) command -v "${cap#cmd:}" >/dev/null 2>&1 || why="${cap#cmd:} not installed" ;;
      cpus:*) (( $(nproc) >= ${cap#cpus:} )) || why="needs at least ${cap#cpus:} CPUs, this host has $(nproc)" ;;
      netns|loop|pmu)
        why=$(lab__host_cap "$cap") ;;
      tracefs)
        why=$(lab__host_cap tracefs)
        [[ -z "$why" ]] || ! lab__mount_tracefs || why="" ;;
      perf)
        if ! command -v perf >/dev/null 2>&1; then why="perf not installed"
        elif ! perf --version >/dev/null 2>&1; then
          # e.g. Ubuntu's /usr/bin/perf wrapper without linux-tools-$(uname -r)
          why="perf does not run on this kernel: $(perf --version 2>&1 | head -n 1)"
        elif ! perf record --no-buildid-cache -q -o /dev/null -- true >/dev/null 2>&1; then
          why="perf record not permitted (perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null))"
        fi ;;
      inferno) command -v inferno-collapse-perf >/dev/null 2>&1 || why="inferno not installed (make setup installs it with cargo)" ;;
      *) lab__say "internal error: unknown capability $cap"; exit 1 ;;
    esac
    [[ -z "$why" ]] || { lab_skip "$name" "$why"; return 1; }
  done
  return 0
}

# Capability from the probe (host.json): prints the reason when unavailable, nothing when available.
lab__host_cap() {
  local key=$1
  [[ $key == loop ]] && key=loop_devices
  "$LAB_PY" - "$LAB_RUN/host.json" "$key" <<'PY'
import json, sys
cap = json.load(open(sys.argv[1]))[sys.argv[2]]
if not cap["available"]:
    print(cap["reason"])
PY
}

# lab_free_port [START]: print the first TCP port from START (default 31234) with no listener.
lab_free_port() {
  local p=${1:-31234}
  while [[ -n "$(ss -Htln "sport = :$p" 2>/dev/null)" ]]; do p=$((p + 1)); done
  echo "$p"
}

# ---- host changes that are always undone -----------------------------------------------

# lab_set_knob NAME FILE VALUE: write VALUE to a sysfs/procfs knob as step NAME; the old value
# is restored on cleanup. For scheduler files ("none [mq-deadline] kyber") the bracketed
# entry is what is restored.
lab_set_knob() {
  local name=$1 file=$2 value=$3 old
  old=$(cat "$file") || { lab_skip "$name" "cannot read $file"; return 1; }
  if [[ $old == *"["*"]"* ]]; then old=${old#*[}; old=${old%%]*}; fi
  lab_defer "restore $file to $old" lab__write_file "$file" "$old"
  lab_run "$name" -- sh -c "echo $(printf '%q' "$value") > $(printf '%q' "$file")"
}
lab__write_file() { printf '%s\n' "$2" > "$1"; }

# lab_takes_odirect FILE: status 0 when FILE's file system accepts O_DIRECT reads (one 4 KiB
# read of FILE with iflag=direct). tmpfs refuses them before Linux 6.6 (EINVAL at open).
lab_takes_odirect() {
  dd if="$1" of=/dev/null bs=4096 count=1 iflag=direct status=none 2>/dev/null
}

# lab_loop_attach NAME FILE [LOSETUP-OPTION...]: attach FILE to a free loop device as step
# NAME (e.g. --direct-io=on); every loop device backed by FILE is detached on cleanup.
# Sets LAB_LOOP to the device path.
# --direct-io=on needs a backing file system that takes O_DIRECT; tmpfs does only since Linux 6.6.
# Where it does not, the option is dropped (the loop device then reads through the backing file's
# page cache) and a skipped step NAME.direct-io says so.
lab_loop_attach() {
  local name=$1 file=$2 opts=() o dev ra; shift 2
  LAB_LOOP=""
  for o in "$@"; do
    if [[ $o == --direct-io=on ]] && ! lab_takes_odirect "$file"; then
      lab_skip "$name.direct-io" "the file system of $file refuses O_DIRECT (tmpfs before Linux 6.6): loop device without --direct-io"
      continue
    fi
    opts+=("$o")
  done
  # The kernel sets a loop device's read_ahead_kb from its backing file system when the file is
  # attached (twice its optimal I/O size) and leaves it so after the detach: the free device's
  # value is read first and put back after the detach (registered first, so undone last).
  dev=$(losetup --find 2>/dev/null) || dev=""
  ra="/sys/block/${dev##*/}/queue/read_ahead_kb"
  if [[ -n "$dev" && -r "$ra" ]]; then
    lab_defer "restore $ra to $(cat "$ra")" lab__write_file "$ra" "$(cat "$ra")"
  fi
  lab_defer "detach loop devices backed by $file" lab__loop_detach "$file"
  if [[ -n "$dev" ]]; then
    lab_run "$name" -- losetup --show "${opts[@]}" "$dev" "$file" || return 1
  else
    lab_run "$name" -- losetup --find --show "${opts[@]}" "$file" || return 1
  fi
  # shellcheck disable=SC2034 # for the lab's run.sh
  LAB_LOOP=$(tail -n 1 "$LAB_RUN/raw/$name.out")
}
lab__loop_detach() {
  local dev
  [[ -e "$1" ]] || return 0
  for dev in $(losetup -j "$1" -O NAME -n 2>/dev/null); do losetup -d "$dev"; done
}

# lab_mount NAME TARGET -- MOUNT-ARGS...: run `mount MOUNT-ARGS... TARGET` as step NAME;
# TARGET is unmounted on cleanup (registered before mounting, so Ctrl-C cannot leak it).
# A TARGET that is already a mount point is refused (status 1, step skipped).
lab_mount() {
  local name=$1 target=$2; shift 2; [[ "$1" == -- ]] && shift
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

# lab_rmdir_later DIR: register the removal of DIR (an empty directory the lab is about to
# create, e.g. a tracefs instance); rmdir on cleanup if it exists.
lab_rmdir_later() { lab_defer "remove $1" lab__rmdir "$1"; }
lab__rmdir() { if [[ -d "$1" ]]; then rmdir "$1"; fi; }

# lab_netns_add NAME NETNS: `ip netns add NETNS` as step NAME. Registered first: the
# namespace's deletion, and /run/netns put back as it was found (ip netns makes it a
# directory and a mount point of its own).
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

# lab__remove_scratch DIR: unmount what is mounted under DIR (newest first; loop devices over
# files in it detached between the mounts from them and the mounts they live on), then remove
# DIR without crossing into any other filesystem.
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

# lab_quick A B: print A in quick mode, B otherwise.
lab_quick() { if ((LAB_QUICK)); then echo "$1"; else echo "$2"; fi; }

# ---- starting a run: lock, out, journal, scratch ----------------------------------------

# lab__lock [WAIT]: one run of this lab at a time (flock on its run.sh, held by this shell; closed
# in every step's process so that a killed run frees it). Refuses with the holder's PID.
# With WAIT (seconds), waits that long first: --recover right after a kill, while processes of the
# killed run that still hold the lock are on their way out. Without it, waits only when a journal
# says the run that holds it was killed (its shell gone or a zombie): up to 10 s, after which the
# journal check of lab__begin names --recover.
lab__lock() {
  [[ -z "$LAB_LOCK" ]] || return 0
  command -v flock >/dev/null || lab__refuse "flock (util-linux) is needed to keep two runs of $LAB_NAME apart"
  exec {LAB_LOCK}<"$LAB_SCRIPT"
  if [[ -n "${1:-}" ]]; then
    flock -w "$1" "$LAB_LOCK" && return 0
  else
    flock -n "$LAB_LOCK" && return 0
    local j; j=$(lab__journals | head -n 1)
    if [[ -n "$j" ]] && ! lab__journal_live "$j"; then flock -w 10 "$LAB_LOCK" && return 0; fi
  fi
  local holder; holder=$(lab__lock_holder)
  lab__refuse "another run of $LAB_NAME is in progress (pid ${holder:-unknown}); wait for it to end, or stop it with: kill ${holder:-PID}"
}

# lab__lock_holder: PID of the run holding the lock (/proc/PID/fdinfo shows the flock).
lab__lock_holder() {
  local ino f pid best=""
  ino=$(stat -Lc %i "$LAB_SCRIPT")
  while IFS= read -r f; do
    pid=${f#/proc/}; pid=${pid%%/*}
    [[ $pid != "$$" ]] || continue
    if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "run.sh"; then echo "$pid"; return 0; fi
    best=${best:-$pid}
  done < <(grep -l "FLOCK .*:$ino 0 EOF" /proc/[0-9]*/fdinfo/* 2>/dev/null)
  echo "$best"
}

# lab__make_out: create --out (or the default) and check it is writable; one line, exit 2 if not.
lab__make_out() {
  local err
  if ! err=$(mkdir -p -- "$LAB_OUT" 2>&1); then
    lab__usage_error "--out $LAB_OUT: cannot create it: ${err##*: }"
  fi
  LAB_OUT=$(cd "$LAB_OUT" && pwd)
  if ! err=$( : 2>&1 >> "$LAB_OUT/.$LAB_NAME.log"); then
    lab__usage_error "--out $LAB_OUT: cannot write in it: ${err##*: }"
  fi
}

# lab__journals: this lab's journals: in the out directory, and pointed to from scratch
# directories of this lab under the scratch parent (a run killed with another --out).
lab__journals() {
  local f p parent=${LAB_SCRATCH_PARENT:-${TMPDIR:-/tmp}}
  [[ ! -f "$LAB_OUT/.$LAB_NAME.journal" ]] || echo "$LAB_OUT/.$LAB_NAME.journal"
  for p in "$parent"/pcb-"$LAB_NAME".*/.pcb-journal "$parent"/pcb-"$LAB_NAME"-guest.*/.pcb-journal; do
    [[ -f "$p" ]] || continue
    f=$(cat "$p" 2>/dev/null) || continue
    [[ -f "$f" && "$f" != "$LAB_OUT/.$LAB_NAME.journal" ]] && echo "$f"
  done
  return 0
}

# lab__journal_field JOURNAL N: field N of the journal's run line (2 lab, 3 pid, 4 start, 5 tag, 6 out).
lab__journal_field() { awk -F'\t' -v n="$2" '$1 == "run" { print $n; exit }' "$1"; }

# lab__journal_live JOURNAL: status 0 when the run that wrote JOURNAL is still running. A killed
# run's shell is a zombie until its parent reaps it (same PID, same start time): that is not running.
lab__journal_live() {
  local pid start now s
  pid=$(lab__journal_field "$1" 3); start=$(lab__journal_field "$1" 4)
  [[ -n "$pid" ]] && now=$(lab__starttime "$pid") && [[ "$now" == "$start" ]] || return 1
  { read -r s < "/proc/$pid/stat"; } 2>/dev/null || return 1
  s=${s##*) }
  [[ ${s:0:1} != [ZX] ]]
}

# lab__begin KIND: take the lock, create the out directory, refuse a stale journal, open the
# journal, install the traps, create the scratch directory (registered before creation).
lab__begin() {
  local kind=$1 j name err
  lab__lock
  lab__make_out
  j=$(lab__journals | head -n 1)
  if [[ -n "$j" ]]; then
    if lab__journal_live "$j"; then
      lab__refuse "a run of $LAB_NAME is in progress (pid $(lab__journal_field "$j" 3), journal $j)"
    fi
    local o; o=$(dirname "$j")
    lab__refuse "a killed run of $LAB_NAME left host changes behind (journal $j): undo them first with: $( [[ $EUID -ne 0 ]] || printf 'sudo ')$(lab__script_for_humans) --recover --out $(printf '%q' "$o")"
  fi
  LAB_START=$(date +%s.%N)
  LAB_START_US=${EPOCHREALTIME//[.,]/}
  exec {LAB_ERR}>&2
  LAB_COLOR=0
  if [[ -t $LAB_ERR && -z "${NO_COLOR:-}" ]]; then LAB_COLOR=1; fi  # https://no-color.org
  LAB_JOURNAL="$LAB_OUT/.$LAB_NAME.journal"
  LAB_LOG="$LAB_OUT/.$LAB_NAME.log"
  : > "$LAB_LOG"
  LAB_TAG="$LAB_NAME.$$.$(lab__starttime $$)"
  # From here on an exit of any kind undoes what the journal holds (and --recover does after
  # SIGKILL): the traps first, then the journal's first line.
  lab__traps
  if ! printf 'run\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$LAB_NAME" "$$" "$(lab__starttime $$)" "$LAB_TAG" "$LAB_OUT" \
      "$(realpath -m -- "${LAB_SCRATCH_PARENT:-${TMPDIR:-/tmp}}")" "$LAB_SCRIPT" 2>/dev/null > "$LAB_JOURNAL"; then
    rm -f "$LAB_JOURNAL"
    lab__usage_error "--out $LAB_OUT: cannot write the journal there$(lab__space_note "$LAB_OUT" | sed 's/; $//;s/^/: /')"
  fi
  export PCB_LAB_RUN="$LAB_TAG"
  # Not "perf-*": perf treats binaries under /tmp/perf-* as JIT maps and resolves no symbols in them.
  name="pcb-$LAB_NAME${kind:+-$kind}"
  LAB_SCRATCH=$(mktemp -u "${LAB_SCRATCH_PARENT:-${TMPDIR:-/tmp}}/$name.XXXXXX")
  LAB_SCRATCH=$(realpath -m -- "$LAB_SCRATCH")
  lab_defer "remove scratch directory $LAB_SCRATCH" lab__remove_scratch "$LAB_SCRATCH"
  if ! err=$(mkdir -m 0700 -- "$LAB_SCRATCH" 2>&1); then
    LAB_QUIET_UNDO=1
    printf '%s: --scratch %s: cannot create a directory in it: %s\n' "$(basename "$0")" \
      "${LAB_SCRATCH_PARENT:-${TMPDIR:-/tmp}}" "${err##*: }" >&2 || true
    LAB_EXIT2=1; exit 2
  fi
  # Where a later run (or labkit recover) finds this journal, whatever --out it is given.
  printf '%s\n' "$LAB_JOURNAL" > "$LAB_SCRATCH/.pcb-journal"
  # Temporary files of the tools the lab runs: in the scratch directory too.
  mkdir -p "$LAB_SCRATCH/tmp"
  export TMPDIR="$LAB_SCRATCH/tmp"
}

# ---- main -----------------------------------------------------------------------------

lab__init() {
  [[ -n "$LAB_NAME" ]] || { echo "lab.sh: lab_define was not called" >&2; LAB_EXIT2=1; exit 2; }
  if ! "$LAB_PY" -c 'import labkit.record, jsonschema' 2>/dev/null; then
    echo "$(basename "$0"): labkit is not importable with $LAB_PY: run 'make setup' first" >&2
    exit 1
  fi
  [[ -n "$LAB_HOST" ]] || LAB_HOST=$("$LAB_PY" -m labkit label)
  [[ -n "$LAB_OUT" ]] || LAB_OUT="$LAB_ROOT/local-results/$LAB_HOST"
  lab__begin ""
  LAB_RUN="$LAB_OUT/.$LAB_NAME.partial"
  lab_defer "remove unfinished run directory" rm -rf -- "$LAB_RUN"
  rm -rf -- "$LAB_RUN"
  mkdir -p "$LAB_RUN/raw"
  : > "$LAB_RUN/steps.tsv"
  lab__say "$LAB_TITLE: host $LAB_HOST, $( ((LAB_QUICK)) && echo quick || echo full) run, scratch $LAB_SCRATCH"
  lab__sigint_note
  lab__guard_kernel_fs
  lab__quietly "$LAB_RUN/host.json" "$LAB_PY" -m labkit probe --scratch "$LAB_SCRATCH" --label "$LAB_HOST"
}

# lab__guard_kernel_fs: tools mount kernel file systems by themselves where they are not mounted:
# `perf stat -e block:block_rq_complete` mounts tracefs at /sys/kernel/tracing (perf's
# tools/lib/api/fs/fs.c mounts it on first use), as trace-cmd's libtracefs does. On a freshly
# booted host a lab run would leave that mount behind. As root, each of /sys/kernel/tracing and
# /sys/kernel/debug that is not a mount point when the lab starts gets its unmount journalled now,
# before any tool runs; undone last, after the lab's own mounts.
lab__guard_kernel_fs() {
  local m
  [[ $EUID -eq 0 ]] || return 0
  for m in /sys/kernel/tracing /sys/kernel/debug; do
    if [[ -d "$m" ]] && ! mountpoint -q "$m"; then
      lab_defer "unmount $m if a tool mounted it" lab__umount "$m" 0
    fi
  done
}

# lab__mount_tracefs: mount tracefs at /sys/kernel/tracing where the kernel has it and nothing
# mounted it yet, as perf and libtracefs do on first use; lab__guard_kernel_fs journalled its
# unmount when the lab started. Returns 1 where that is not possible (not root, no tracefs,
# already a mount point).
lab__mount_tracefs() {
  local m=/sys/kernel/tracing
  [[ $EUID -eq 0 && -d $m ]] && grep -qw tracefs /proc/filesystems && ! mountpoint -q "$m" || return 1
  mount -t tracefs nodev "$m" 2>/dev/null || return 1
  lab__say "mounted tracefs at $m (unmounted when the lab ends)"
}

# lab__quietly OUTFILE CMD...: run a helper of the lab (not a step: the probe, labkit record,
# the guest runner) in its own process group, interruptible like a step. Its stdout goes to
# OUTFILE; its stderr is relayed line by line as it comes (never written directly to a
# terminal or pipe that may be gone). Returns its exit status.
lab__quietly() {
  local out=$1 rc=0 err seen=0 l; shift
  local -a lines
  err="$LAB_SCRATCH/.helper.$BASHPID.$RANDOM"   # no command substitution here: a signal at this
  : > "$err"                                     # boundary must reach the lab's traps, not a subshell
  LAB_LAUNCH=${!:-0}
  setsid "$@" > "$out" 2> "$err" < /dev/null {LAB_ERR}>&- {LAB_LOCK}>&- &
  LAB_CHILD=$!
  LAB_LAUNCH=""
  while kill -0 "$LAB_CHILD" 2>/dev/null; do
    mapfile -t -s "$seen" lines < "$err"
    seen=$((seen + ${#lines[@]}))
    for l in ${lines[@]+"${lines[@]}"}; do lab__emit "$l"; done
    sleep 0.2
  done
  wait "$LAB_CHILD" || rc=$?
  LAB_CHILD=""
  mapfile -t -s "$seen" lines < "$err"
  for l in ${lines[@]+"${lines[@]}"}; do lab__emit "$l"; done
  rm -f "$err"
  return "$rc"
}

# lab__recover_main: --recover. Undo what killed runs of this lab left behind: every journal
# found (--out, or the default out directory, and pointers in scratch directories under the
# scratch parent). Exit 0 done (or nothing to do), 2 a run is still in progress, 3 an action failed.
lab__recover_main() {
  [[ -n "$LAB_NAME" ]] || { echo "lab.sh: lab_define was not called" >&2; LAB_EXIT2=1; exit 2; }
  if [[ -z "$LAB_OUT" ]]; then
    [[ -n "$LAB_HOST" ]] || LAB_HOST=$("$LAB_PY" -m labkit label)
    LAB_OUT="$LAB_ROOT/local-results/$LAB_HOST"
  fi
  if [[ -d "$LAB_OUT" ]]; then LAB_OUT=$(cd "$LAB_OUT" && pwd); fi
  lab__lock 10
  local -a journals=()
  mapfile -t journals < <(if [[ -d "$LAB_OUT" ]]; then lab__journals; else LAB_OUT=/nonexistent lab__journals; fi)
  if ((${#journals[@]} == 0)); then
    printf '%s: nothing to recover for %s (no journal in %s)\n' "$(basename "$0")" "$LAB_NAME" "$LAB_OUT" >&2
    exit 0
  fi
  LAB_START_US=${EPOCHREALTIME//[.,]/}
  exec {LAB_ERR}>&2
  trap '' INT TERM HUP PIPE QUIT
  LAB_UNDOING=1
  set +e
  local j rc=0 tag
  for j in "${journals[@]}"; do
    if lab__journal_live "$j"; then
      printf '%s: a run of %s is in progress (pid %s, journal %s): not touching it\n' "$(basename "$0")" \
        "$LAB_NAME" "$(lab__journal_field "$j" 3)" "$j" >&2
      rc=2; continue
    fi
    LAB_JOURNAL=$j
    LAB_OUT=$(dirname "$j")
    LAB_LOG="$LAB_OUT/.$LAB_NAME.log"
    tag=$(lab__journal_field "$j" 5)
    lab__say "recovering a killed run (pid $(lab__journal_field "$j" 3)) from $j"
    if [[ -n "$tag" && -n "$(lab__tagged "$tag")" ]]; then
      lab__undo_one 0 "stop every process of the killed run" "lab__kill_tagged $(printf '%q' "$tag")" || rc=3
    fi
    if lab__replay "$j" && ((rc != 3)); then
      rm -f "$j"
      lab__say "recovered: every change in $j is undone"
    else
      rc=3
      lab__say "some changes could not be undone (above): the journal stays; fix the cause and run --recover again"
    fi
  done
  exit "$rc"
}

# lab__guest_main: the whole lab inside a QEMU guest (--guest ARCH). The guest gets a copy of
# the checkout (the files git tracks, as they are in the work tree) and runs the lab there as
# root with the same options, through .github/ci-labs.sh (so the run is recorded with asciinema,
# as on a CI runner); its own probe, gcc, python3 and tools do everything, and labkit record
# writes the result inside the guest. The result and its artifacts come back to --out.
# The same guarantees as a run on the host: the lock, the journal (the scratch directory with the
# guest's disks), the run's tag on the guest runner and QEMU (which also dies with its parent,
# PR_SET_PDEATHSIG), the undo on every exit and signal, and --recover after SIGKILL.
lab__guest_main() {
  local accel
  lab__lock
  accel=$("$LAB_PY" -m labkit.guest accel --arch "$LAB_GUEST" 2>/dev/null) || accel=tcg
  [[ -n "$LAB_HOST" ]] || LAB_HOST="qemu-$LAB_GUEST-$accel"
  [[ -n "$LAB_OUT" ]] || LAB_OUT="$LAB_ROOT/local-results/$LAB_HOST"
  lab__begin guest
  local job="$LAB_SCRATCH/job" inner=() commit dirty=0 label
  mkdir -p "$job/repo"
  # The checkout as git tracks it (work-tree contents), without the committed results.
  (cd "$LAB_ROOT" && git ls-files -z -- . ':!:results' | tar --null -T - -cf -) | tar -xf - -C "$job/repo"
  # inferno built for the guest's architecture (`make inferno-arm64`: Debian has no inferno
  # package), where the lab finds its own: .tools/bin with cargo's install record beside it.
  if [[ -x "$LAB_ROOT/.tools/$LAB_GUEST/bin/inferno-flamegraph" ]]; then
    mkdir -p "$job/repo/.tools"
    cp -a "$LAB_ROOT/.tools/$LAB_GUEST/bin" "$LAB_ROOT/.tools/$LAB_GUEST/.crates.toml" "$job/repo/.tools/"
  fi
  # The commit, and whether the code that measures (labkit.record.measuring_code) differs from it.
  read -r commit dirty < <("$LAB_PY" -c 'import sys; from pathlib import Path; from labkit.record import git_commit, measuring_code
c, d = git_commit(Path(sys.argv[1]), measuring_code(sys.argv[2])); print(c or "", 1 if d else 0)' "$LAB_ROOT" "$LAB_NAME") || true
  [[ $dirty == [01] ]] || dirty=1  # unknown counts as dirty
  ((LAB_QUICK)) || inner+=(--full)
  [[ -z "$LAB_ONLY" ]] || inner+=(--only "$LAB_ONLY")
  {
    echo "# Written by labs/lib/lab.sh --guest: runs in the guest as root (labkit.guest)."
    echo "export PCB_GIT_COMMIT=$commit PCB_GIT_DIRTY=$dirty"
    echo "busybox hostname $LAB_HOST"
    echo "ip link set lo up    # no init system brings up loopback in the guest"
    # shellcheck disable=SC2016 # written for the guest's shell
    echo 'for m in loop kyber-iosched xfs veth; do modprobe $m 2>/dev/null; done'
    echo "busybox mount -t tmpfs tmpfs /run"
    echo "mkdir -p /dev/shm /dev/pts && busybox mount -t tmpfs tmpfs /dev/shm && busybox mount -t devpts devpts /dev/pts"
    echo "mkdir -p /out/results /scratch && cd /job/repo"
    echo "# the guest's own scratch disk: a block device with a scheduler under the lab's files, as on a host"
    # shellcheck disable=SC2016 # written for the guest's shell
    echo 'mkfs.ext4 -q -F "$PCB_SCRATCH_DEV" && busybox mount -t ext4 "$PCB_SCRATCH_DEV" /scratch && export TMPDIR=/scratch'
    echo "bash .github/ci-labs.sh --labs $LAB_NAME --host $LAB_HOST --out /out/results ${inner[*]}"
  } > "$job/run"
  lab__say "$LAB_TITLE: inside an $LAB_GUEST guest ($accel), host label $LAB_HOST, $( ((LAB_QUICK)) && echo quick || echo full) run, scratch $LAB_SCRATCH"
  lab__sigint_note
  label=$("$LAB_PY" -m labkit label)
  local rc=0
  lab__quietly /dev/null "$LAB_PY" -m labkit.guest run --arch "$LAB_GUEST" --profile lab --mem 3072 --cpus 2 \
    --job "$job" --out "$LAB_SCRATCH/out" --work "$LAB_SCRATCH/work" --out-mib 2048 --scratch-mib 8192 --host-label "$label" \
    --timeout "$(lab_quick 3600 14400)" || rc=$?
  local got="$LAB_SCRATCH/out/results/$LAB_HOST"
  if [[ ! -f "$got/$LAB_NAME.json" ]]; then
    # Keep what came back (the recording, the partial run directory) and the console for a look.
    rm -rf "$LAB_OUT/.$LAB_NAME.guest-failed"
    mkdir -p "$LAB_OUT/.$LAB_NAME.guest-failed"
    cp -a "$LAB_SCRATCH/out/." "$LAB_SCRATCH/work/console.log" "$LAB_OUT/.$LAB_NAME.guest-failed/" 2>/dev/null || true
    lab__say "the guest produced no result (guest exit $rc); what came back: $LAB_OUT/.$LAB_NAME.guest-failed/"
    exit 1
  fi
  rm -rf "${LAB_OUT:?}/$LAB_NAME"
  cp -a "$got/$LAB_NAME" "$got/$LAB_NAME.json" "$LAB_OUT/"
  if [[ -f "$got/ci-labs.tsv" ]]; then cat "$got/ci-labs.tsv" >> "$LAB_OUT/ci-labs.tsv"; fi
  lab__quietly /dev/null "$LAB_PY" -m labkit validate "$LAB_OUT/$LAB_NAME.json" || exit 1
  lab__say "result: $LAB_OUT/$LAB_NAME.json (guest $LAB_GUEST, $accel)"
  exit "$rc"
}

# lab__group_figures GROUP: the figures GROUP measured, indented under its steps (labkit.progress:
# the lab's record.py on the run so far; nothing when it needs later groups' data).
lab__group_figures() {
  local fig
  while IFS= read -r fig; do
    [[ -n "$fig" ]] && lab__say "  $fig"
  done < <("$LAB_PY" -m labkit.progress figures --lab "$LAB_NAME" --lab-dir "$LAB_DIR" --run-dir "$LAB_RUN" \
             --group "$1" --quick "$LAB_QUICK" 2>/dev/null || true)
}

# lab_main "$@": parse options, run the selected groups in order, record the result.
lab_main() {
  lab__parse "$@"
  ((LAB_RECOVER == 0)) || lab__recover_main
  [[ -z "$LAB_GUEST" ]] || lab__guest_main   # exits
  lab__init
  local i g n=0 k=0
  for i in "${!LAB_GROUPS[@]}"; do lab__selected "$i" && n=$((n + 1)); done
  # Seconds per group of the previous run in this mode on this host, for "~N s left" (none: no estimate).
  local -A eta=()
  local eg es left
  while IFS=$'\t' read -r eg es; do [[ -n "$eg" ]] && eta[$eg]=$es; done \
    < <("$LAB_PY" -m labkit.progress eta --lab "$LAB_NAME" --quick "$LAB_QUICK" --previous "$LAB_OUT/$LAB_NAME.json" 2>/dev/null || true)
  for i in "${!LAB_GROUPS[@]}"; do
    lab__selected "$i" || continue
    g=${LAB_GROUPS[$i]} k=$((k + 1))
    LAB_GROUP=$g
    left=""
    if ((${#eta[@]})); then
      left=0
      for j in "${!LAB_GROUPS[@]}"; do
        ((j >= i)) && lab__selected "$j" && left=$((left + ${eta[${LAB_GROUPS[$j]}]:-0}))
      done
      left=" (~${left} s left, from the last run here)"
    fi
    lab__say "== [$k/$n] $g: ${LAB_GROUP_DESC[$i]}$left"
    "group_$g" || true
    lab__group_figures "$g"
  done
  LAB_GROUP=""
  lab__say "recording result"
  local rc=0
  lab__quietly /dev/null "$LAB_PY" -m labkit record --lab "$LAB_NAME" --lab-dir "$LAB_DIR" --run-dir "$LAB_RUN" \
    --out "$LAB_OUT" --start "$LAB_START" --quick "$LAB_QUICK" --tools "$LAB_TOOLS" \
    --scratch "$LAB_SCRATCH" --checkout "$LAB_ROOT" \
    --command "labs/$LAB_NAME/run.sh${LAB_ARGS:+ $LAB_ARGS}" || rc=$?
  if ((rc != 0)); then
    lab__say "labkit record failed (exit $rc)"
    exit 1
  fi
  if [[ -n "${SUDO_UID:-}" ]]; then
    chown -R "$SUDO_UID:${SUDO_GID:-$SUDO_UID}" "$LAB_OUT" 2>/dev/null || true
  fi
  lab__say "result: $LAB_OUT/$LAB_NAME.json ($(grep -c $'\tskipped\t' "$LAB_OUT/$LAB_NAME/steps.tsv" || true) skipped, $(grep -c $'\tfailed\t' "$LAB_OUT/$LAB_NAME/steps.tsv" || true) failed steps)"
  lab__say "reload the chapter to see it beside ours, or: $LAB_PY -m labkit show $LAB_NAME"
  exit "$LAB_FAILED"
}
