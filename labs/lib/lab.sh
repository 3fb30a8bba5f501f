# shellcheck shell=bash
# labs/lib/lab.sh: the lab contract (DESIGN.md, "The lab contract"), sourced by every labs/<lab>/run.sh.
#
#   run.sh [--quick] [--out DIR] [--scratch DIR] [--only GROUP,..] [--host LABEL] [--guest ARCH] [--help]
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
# missing is recorded as skipped with the reason. Every host change is pushed on a
# cleanup stack (lab_defer) that runs on EXIT, ERR, INT and TERM. When the groups are
# done, `labkit record` turns the run directory into <out>/<lab>.json.
#
# Exit status: 0 done (some steps may be skipped), 1 a step failed, 2 bad usage.

set -Eeuo pipefail

LAB_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
LAB_DIR="$(cd "$(dirname "$0")" && pwd)"
LAB_NAME="" LAB_TITLE="" LAB_TOOLS=""
LAB_GROUPS=() LAB_GROUP_DESC=() LAB_GROUP_ALWAYS=()
LAB_QUICK=0 LAB_OUT="" LAB_SCRATCH_PARENT="" LAB_ONLY="" LAB_HOST="" LAB_GUEST=""
LAB_SCRATCH="" LAB_RUN="" LAB_FAILED=0 LAB_CHILD="" LAB_START=0 LAB_GROUP=""
LAB_CLEANUP=() LAB_CLEANUP_DESC=()
LAB_ARGS=""

# Python with labkit importable: the project venv, else python3 with the repo on PYTHONPATH.
if [[ -x "$LAB_ROOT/.venv/bin/python" ]]; then
  LAB_PY="$LAB_ROOT/.venv/bin/python"
else
  LAB_PY="python3"
fi
export PYTHONPATH="$LAB_ROOT${PYTHONPATH:+:$PYTHONPATH}"
# inferno (flame graphs) installed by `make setup` into the project.
export PATH="$LAB_ROOT/.tools/bin:$PATH"

# Progress goes to the lab's own stderr (saved in LAB_ERR at start), so a signal handler that
# runs while a cleanup command's output is redirected to /dev/null is still heard.
lab__say() { printf '[%s %6.1fs] %s\n' "$LAB_NAME" "$(lab__elapsed)" "$*" >&"${LAB_ERR:-2}"; }
lab__elapsed() { local now; now=$(date +%s.%N); awk -v a="$now" -v b="${LAB_START:-$now}" 'BEGIN{printf "%.1f", a-b}'; }
lab__die_usage() { printf '%s: %s\n' "$(basename "$0")" "$1" >&2; lab_usage >&2; exit 2; }

# lab_define NAME TITLE [TOOL...]: name the lab, a one-line title and the tools whose versions are recorded.
lab_define() { LAB_NAME=$1; LAB_TITLE=$2; shift 2; LAB_TOOLS="$*"; }

# lab_group NAME DESCRIPTION [always]: declare a group of steps, run in declaration order by group_NAME.
lab_group() {
  LAB_GROUPS+=("$1"); LAB_GROUP_DESC+=("$2"); LAB_GROUP_ALWAYS+=("${3:-}")
}

lab_usage() {
  cat <<EOF
usage: $(basename "$(dirname "$0")")/run.sh [--quick] [--out DIR] [--scratch DIR] [--only GROUP,..] [--host LABEL] [--guest ARCH] [--help]

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
  --help          this text

groups, in order:
EOF
  local i
  for i in "${!LAB_GROUPS[@]}"; do
    printf '  %-10s %s%s\n' "${LAB_GROUPS[$i]}" "${LAB_GROUP_DESC[$i]}" "${LAB_GROUP_ALWAYS[$i]:+ *}"
  done
  cat <<EOF

Steps that need something this host lacks (root, perf, a tool, ...) are recorded as
skipped with the reason. Exit status: 0 done, 1 a step failed, 2 bad usage.
EOF
}

lab__parse() {
  LAB_ARGS="$*"
  while (($#)); do
    case "$1" in
      --quick) LAB_QUICK=1 ;;
      --out) (($# >= 2)) || lab__die_usage "--out needs a directory"; LAB_OUT=$2; shift ;;
      --out=*) LAB_OUT=${1#*=} ;;
      --scratch) (($# >= 2)) || lab__die_usage "--scratch needs a directory"; LAB_SCRATCH_PARENT=$2; shift ;;
      --scratch=*) LAB_SCRATCH_PARENT=${1#*=} ;;
      --only) (($# >= 2)) || lab__die_usage "--only needs a list of groups"; LAB_ONLY=$2; shift ;;
      --only=*) LAB_ONLY=${1#*=} ;;
      --host) (($# >= 2)) || lab__die_usage "--host needs a label"; LAB_HOST=$2; shift ;;
      --host=*) LAB_HOST=${1#*=} ;;
      --guest) (($# >= 2)) || lab__die_usage "--guest needs an architecture (arm64 or x86_64)"; LAB_GUEST=$2; shift ;;
      --guest=*) LAB_GUEST=${1#*=} ;;
      -h|--help) lab_usage; exit 0 ;;
      *) lab__die_usage "unknown option: $1" ;;
    esac
    shift
  done
  local g
  if [[ -n "$LAB_ONLY" ]]; then
    for g in ${LAB_ONLY//,/ }; do
      lab__is_group "$g" || lab__die_usage "unknown group in --only: $g (groups: ${LAB_GROUPS[*]})"
    done
  fi
  if [[ -n "$LAB_HOST" && ! "$LAB_HOST" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]]; then
    lab__die_usage "bad --host label: $LAB_HOST (letters, digits, . _ - only)"
  fi
  if [[ -n "$LAB_GUEST" && ! "$LAB_GUEST" =~ ^(arm64|x86_64)$ ]]; then
    lab__die_usage "--guest: unknown architecture $LAB_GUEST (arm64 or x86_64)"
  fi
  if [[ -n "$LAB_SCRATCH_PARENT" && ! -d "$LAB_SCRATCH_PARENT" ]]; then
    lab__die_usage "--scratch: no such directory: $LAB_SCRATCH_PARENT"
  fi
}

lab__is_group() { local g; for g in "${LAB_GROUPS[@]}"; do [[ "$g" == "$1" ]] && return 0; done; return 1; }

lab__selected() {
  local i=$1
  [[ -z "$LAB_ONLY" || -n "${LAB_GROUP_ALWAYS[$i]}" ]] && return 0
  [[ ",$LAB_ONLY," == *",${LAB_GROUPS[$i]},"* ]]
}

# ---- cleanup stack --------------------------------------------------------------------

# lab_defer DESCRIPTION CMD [ARG...]: push an undo action; runs on exit, error, Ctrl-C, TERM.
lab_defer() {
  local desc=$1; shift
  LAB_CLEANUP+=("$(printf '%q ' "$@")"); LAB_CLEANUP_DESC+=("$desc")
}

# lab_mark: print the current depth of the cleanup stack (for lab_unwind).
lab_mark() { echo "${#LAB_CLEANUP[@]}"; }

# lab_unwind [MARK]: run and pop undo actions down to MARK (default: all), newest first.
lab_unwind() {
  local mark=${1:-0} i
  for ((i = ${#LAB_CLEANUP[@]} - 1; i >= mark; i--)); do
    [[ -n "${LAB_QUIET_CLEANUP:-}" ]] || lab__say "cleanup: ${LAB_CLEANUP_DESC[$i]}"
    eval "${LAB_CLEANUP[$i]}" >/dev/null 2>&1 || lab__say "cleanup FAILED: ${LAB_CLEANUP_DESC[$i]}"
    unset 'LAB_CLEANUP[i]' 'LAB_CLEANUP_DESC[i]'
  done
  LAB_CLEANUP=("${LAB_CLEANUP[@]}"); LAB_CLEANUP_DESC=("${LAB_CLEANUP_DESC[@]}")
}

# lab_kill_group PID: TERM a process group started by lab_run/lab_spawn, then KILL if it lingers.
lab_kill_group() {
  local pid=$1 i
  kill -TERM -- "-$pid" 2>/dev/null || return 0
  for i in 1 2 3 4 5 6 7 8 9 10; do
    kill -0 -- "-$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
}

lab__on_signal() {
  trap '' INT TERM
  lab__say "interrupted by SIG$1: undoing host changes"
  [[ -n "$LAB_CHILD" ]] && lab_kill_group "$LAB_CHILD"
  lab_unwind 0
  [[ "$1" == INT ]] && exit 130
  exit 143
}

lab__on_exit() {
  local rc=$?
  trap '' INT TERM
  [[ -n "$LAB_CHILD" ]] && lab_kill_group "$LAB_CHILD"
  lab_unwind 0
  exit "$rc"
}

lab__on_err() {
  lab__say "internal error (line $1, exit $2): stopping"
  exit 1
}

# ---- steps ----------------------------------------------------------------------------

lab__record_step() { # name status exit seconds expect reason
  local reason=${6//$'\t'/ }
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "${LAB_GROUP:-main}" "$2" "$3" "$4" "$5" "${reason//$'\n'/ }" \
    >> "$LAB_RUN/steps.tsv"
}

# lab_run [--expect-fail] [--stdout FILE] NAME -- CMD [ARG...]: run one step, keep its
# command and output (stdout to FILE instead of raw/NAME.out for bulky output kept in scratch).
# Returns 0 when the step did what was expected, 1 otherwise (and the lab will exit 1).
lab_run() {
  local expect=success stdout=""
  while [[ "$1" == --* ]]; do
    case "$1" in
      --expect-fail) expect=failure ;;
      --stdout) stdout=$2; shift ;;
    esac
    shift
  done
  local name=$1; shift; [[ "$1" == -- ]] && shift
  local raw="$LAB_RUN/raw/$name" rc=0 t0 t1 secs status
  [[ -n "$stdout" ]] || stdout="$raw.out"
  printf '%q ' "$@" | sed 's/ $//' > "$raw.cmd"
  lab__say "$name: $(cat "$raw.cmd")"
  t0=$(date +%s.%N)
  setsid "$@" > "$stdout" 2> "$raw.err" < /dev/null {LAB_ERR}>&- &
  LAB_CHILD=$!
  wait "$LAB_CHILD" || rc=$?
  LAB_CHILD=""
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t1" -v b="$t0" 'BEGIN{printf "%.3f", a-b}')
  if [[ $expect == success && $rc -eq 0 ]] || [[ $expect == failure && $rc -ne 0 ]]; then
    status=ok
    if [[ $expect == failure ]]; then
      lab__say "$name: failed as expected (exit $rc, ${secs}s): $(tail -n 1 "$raw.err")"
    else
      lab__say "$name: ok (${secs}s)"
    fi
    lab__record_step "$name" ok "$rc" "$secs" "$expect" ""
    return 0
  fi
  LAB_FAILED=1
  if [[ $expect == failure ]]; then
    status="succeeded but was expected to fail"
  else
    status="exit $rc"
  fi
  lab__say "$name: FAILED ($status, ${secs}s); last lines of raw/$name.err:"
  tail -n 5 "$raw.err" | sed 's/^/    /' >&2
  lab__record_step "$name" failed "$rc" "$secs" "$expect" "$status: $(tail -n 1 "$raw.err")"
  return 1
}

# lab_skip NAME REASON: record a step as skipped (the lab goes on).
lab_skip() {
  lab__say "$1: skipped: $2"
  lab__record_step "$1" skipped "" 0 success "$2"
}

# lab_spawn NAME -- CMD [ARG...]: start a background process (e.g. a server) in its own
# process group; output to raw/NAME.out/.err; killed by PID on cleanup. Sets LAB_SPAWNED.
lab_spawn() {
  local name=$1; shift; [[ "$1" == -- ]] && shift
  local raw="$LAB_RUN/raw/$name"
  printf '%q ' "$@" | sed 's/ $//' > "$raw.cmd"
  lab__say "$name: starting in background: $(cat "$raw.cmd")"
  setsid "$@" > "$raw.out" 2> "$raw.err" < /dev/null {LAB_ERR}>&- &
  LAB_SPAWNED=$!
  lab_defer "stop $name (pid $LAB_SPAWNED)" lab_kill_group "$LAB_SPAWNED"
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
# tracefs, pmu, inferno.
lab_require() {
  local name=$1 cap why=""; shift
  for cap in "$@"; do
    case "$cap" in
      root) [[ $EUID -eq 0 ]] || why="needs root (run with sudo)" ;;
      cmd:*) command -v "${cap#cmd:}" >/dev/null 2>&1 || why="${cap#cmd:} not installed" ;;
      cpus:*) (( $(nproc) >= ${cap#cpus:} )) || why="needs at least ${cap#cpus:} CPUs, this host has $(nproc)" ;;
      netns|loop|tracefs|pmu)
        why=$(lab__host_cap "$cap") ;;
      perf)
        if ! command -v perf >/dev/null 2>&1; then why="perf not installed"
        elif ! perf record -q -o /dev/null -- true >/dev/null 2>&1; then
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

# lab_loop_attach NAME FILE [LOSETUP-OPTION...]: attach FILE to a free loop device as step
# NAME (e.g. --direct-io=on); every loop device backed by FILE is detached on cleanup.
# Sets LAB_LOOP to the device path.
lab_loop_attach() {
  local name=$1 file=$2; shift 2
  LAB_LOOP=""
  lab_defer "detach loop devices backed by $file" lab__loop_detach "$file"
  lab_run "$name" -- losetup --find --show "$@" "$file" || return 1
  LAB_LOOP=$(tail -n 1 "$LAB_RUN/raw/$name.out")
}
lab__loop_detach() {
  local dev
  for dev in $(losetup -j "$1" -O NAME -n 2>/dev/null); do losetup -d "$dev"; done
}

# lab_mount NAME TARGET -- MOUNT-ARGS...: run `mount MOUNT-ARGS... TARGET` as step NAME;
# TARGET is unmounted on cleanup (registered before mounting, so Ctrl-C cannot leak it).
lab_mount() {
  local name=$1 target=$2; shift 2; [[ "$1" == -- ]] && shift
  mkdir -p "$target"
  lab_defer "unmount $target" lab__umount "$target"
  lab_run "$name" -- mount "$@" "$target"
}
lab__umount() { if mountpoint -q "$1"; then umount "$1" || umount -l "$1"; fi; }

# lab_quick A B: print A in quick mode, B otherwise.
lab_quick() { if ((LAB_QUICK)); then echo "$1"; else echo "$2"; fi; }

# ---- main -----------------------------------------------------------------------------

lab__init() {
  [[ -n "$LAB_NAME" ]] || { echo "lab.sh: lab_define was not called" >&2; exit 2; }
  lab__parse "$@"
  if ! "$LAB_PY" -c 'import labkit.record, jsonschema' 2>/dev/null; then
    echo "$(basename "$0"): labkit is not importable with $LAB_PY: run 'make setup' first" >&2
    exit 1
  fi
  LAB_START=$(date +%s.%N)
  exec {LAB_ERR}>&2
  [[ -n "$LAB_HOST" ]] || LAB_HOST=$("$LAB_PY" -m labkit label)
  [[ -n "$LAB_OUT" ]] || LAB_OUT="$LAB_ROOT/local-results/$LAB_HOST"
  mkdir -p "$LAB_OUT"
  LAB_OUT=$(cd "$LAB_OUT" && pwd)
  trap 'lab__on_exit' EXIT
  trap 'lab__on_signal INT' INT
  trap 'lab__on_signal TERM' TERM
  trap 'lab__on_err $LINENO $?' ERR
  LAB_RUN="$LAB_OUT/.$LAB_NAME.partial"
  rm -rf "$LAB_RUN"
  mkdir -p "$LAB_RUN/raw"
  lab_defer "remove unfinished run directory" rm -rf "$LAB_RUN"
  # Not "perf-*": perf treats binaries under /tmp/perf-* as JIT maps and resolves no symbols in them.
  LAB_SCRATCH=$(mktemp -d "${LAB_SCRATCH_PARENT:-${TMPDIR:-/tmp}}/pcb-$LAB_NAME.XXXXXX")
  lab_defer "remove scratch directory $LAB_SCRATCH" rm -rf "$LAB_SCRATCH"
  : > "$LAB_RUN/steps.tsv"
  lab__say "$LAB_TITLE: host $LAB_HOST, $( ((LAB_QUICK)) && echo quick || echo full) run, scratch $LAB_SCRATCH"
  "$LAB_PY" -m labkit probe --scratch "$LAB_SCRATCH" --label "$LAB_HOST" > "$LAB_RUN/host.json"
}

# lab__guest_main: the whole lab inside a QEMU guest (--guest ARCH). The guest gets a copy of
# the checkout (the files git tracks, as they are in the work tree) and runs the lab there as
# root with the same options, through .github/ci-labs.sh (so the run is recorded with asciinema,
# as on a CI runner); its own probe, gcc, python3 and tools do everything, and labkit record
# writes the result inside the guest. The result and its artifacts come back to --out.
lab__guest_main() {
  LAB_START=$(date +%s.%N)
  exec {LAB_ERR}>&2
  local accel
  accel=$("$LAB_PY" -m labkit.guest accel --arch "$LAB_GUEST" 2>/dev/null) || accel=tcg
  [[ -n "$LAB_HOST" ]] || LAB_HOST="qemu-$LAB_GUEST-$accel"
  [[ -n "$LAB_OUT" ]] || LAB_OUT="$LAB_ROOT/local-results/$LAB_HOST"
  mkdir -p "$LAB_OUT" 2>/dev/null || lab__die_usage "--out: cannot create $LAB_OUT"
  LAB_OUT=$(cd "$LAB_OUT" && pwd)
  trap 'lab__on_exit' EXIT
  trap 'lab__on_signal INT' INT
  trap 'lab__on_signal TERM' TERM
  LAB_SCRATCH=$(mktemp -d "${LAB_SCRATCH_PARENT:-${TMPDIR:-/tmp}}/pcb-$LAB_NAME-guest.XXXXXX")
  lab_defer "remove scratch directory $LAB_SCRATCH" rm -rf --one-file-system "$LAB_SCRATCH"
  local job="$LAB_SCRATCH/job" inner=() commit dirty=0 label
  mkdir -p "$job/repo"
  # The checkout as git tracks it (work-tree contents), without the committed results.
  (cd "$LAB_ROOT" && git ls-files -z -- . ':!:results' | tar --null -T - -cf -) | tar -xf - -C "$job/repo"
  commit=$(git -C "$LAB_ROOT" rev-parse HEAD 2>/dev/null || true)
  [[ -z "$(git -C "$LAB_ROOT" status --porcelain --untracked-files=no -- "labs/$LAB_NAME" labs/lib labkit 2>/dev/null)" ]] || dirty=1
  ((LAB_QUICK)) || inner+=(--full)
  [[ -z "$LAB_ONLY" ]] || inner+=(--only "$LAB_ONLY")
  {
    echo "# Written by labs/lib/lab.sh --guest: runs in the guest as root (labkit.guest)."
    echo "export PCB_GIT_COMMIT=$commit PCB_GIT_DIRTY=$dirty"
    echo "busybox hostname $LAB_HOST"
    echo 'for m in loop kyber-iosched xfs veth; do modprobe $m 2>/dev/null; done'
    echo "busybox mount -t tmpfs tmpfs /run"
    echo "mkdir -p /dev/shm /dev/pts && busybox mount -t tmpfs tmpfs /dev/shm && busybox mount -t devpts devpts /dev/pts"
    echo "mkdir -p /out/results && cd /job/repo"
    echo "bash .github/ci-labs.sh --labs $LAB_NAME --host $LAB_HOST --out /out/results ${inner[*]}"
  } > "$job/run"
  lab__say "$LAB_TITLE: inside a $LAB_GUEST guest ($accel), host label $LAB_HOST, $( ((LAB_QUICK)) && echo quick || echo full) run"
  label=$("$LAB_PY" -m labkit label)
  local rc=0
  "$LAB_PY" -m labkit.guest run --arch "$LAB_GUEST" --profile lab --mem 3072 --cpus 2 --job "$job" \
    --out "$LAB_SCRATCH/out" --work "$LAB_SCRATCH/work" --out-mib 2048 --host-label "$label" \
    --timeout "$(lab_quick 3600 14400)" || rc=$?
  local got="$LAB_SCRATCH/out/results/$LAB_HOST"
  if [[ ! -f "$got/$LAB_NAME.json" ]]; then
    lab__say "the guest produced no result (guest exit $rc); its console log: $LAB_OUT/.$LAB_NAME.guest-console.log"
    cp "$LAB_SCRATCH/work/console.log" "$LAB_OUT/.$LAB_NAME.guest-console.log" 2>/dev/null || true
    exit 1
  fi
  rm -rf "${LAB_OUT:?}/$LAB_NAME"
  cp -a "$got/$LAB_NAME" "$got/$LAB_NAME.json" "$LAB_OUT/"
  if [[ -f "$got/ci-labs.tsv" ]]; then cat "$got/ci-labs.tsv" >> "$LAB_OUT/ci-labs.tsv"; fi
  "$LAB_PY" -m labkit validate "$LAB_OUT/$LAB_NAME.json" >&2 || exit 1
  lab__say "result: $LAB_OUT/$LAB_NAME.json (guest $LAB_GUEST, $accel)"
  exit "$rc"
}

# lab_main "$@": parse options, run the selected groups in order, record the result.
lab_main() {
  lab__parse "$@"
  [[ -z "$LAB_GUEST" ]] || { lab__guest_main; exit $?; }
  lab__init "$@"
  local i g
  for i in "${!LAB_GROUPS[@]}"; do
    lab__selected "$i" || continue
    g=${LAB_GROUPS[$i]}
    LAB_GROUP=$g
    lab__say "== $g: ${LAB_GROUP_DESC[$i]}"
    "group_$g" || true
  done
  LAB_GROUP=""
  lab__say "recording result"
  local rc=0
  "$LAB_PY" -m labkit record --lab "$LAB_NAME" --lab-dir "$LAB_DIR" --run-dir "$LAB_RUN" \
    --out "$LAB_OUT" --start "$LAB_START" --quick "$LAB_QUICK" --tools "$LAB_TOOLS" \
    --command "labs/$LAB_NAME/run.sh${LAB_ARGS:+ $LAB_ARGS}" || rc=$?
  if ((rc != 0)); then
    lab__say "labkit record failed (exit $rc)"
    exit 1
  fi
  if [[ -n "${SUDO_UID:-}" ]]; then
    chown -R "$SUDO_UID:${SUDO_GID:-$SUDO_UID}" "$LAB_OUT" 2>/dev/null || true
  fi
  lab__say "result: $LAB_OUT/$LAB_NAME.json ($(grep -c $'\tskipped\t' "$LAB_OUT/$LAB_NAME/steps.tsv" || true) skipped, $(grep -c $'\tfailed\t' "$LAB_OUT/$LAB_NAME/steps.tsv" || true) failed steps)"
  exit "$LAB_FAILED"
}
