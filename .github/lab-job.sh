#!/usr/bin/env bash
# .github/lab-job.sh STEP: one step of the workflow's lab job (.github/workflows/labs.yml), the
# same on a GitHub runner and on any Linux machine (.github/run-lab-job.py runs them all, in the
# workflow's order). Root is taken with `sudo env PATH=... XDG_CACHE_HOME=...` where needed, so
# that tools installed for the runner's user (.tools/bin, cargo, go) are found and caches land
# where actions/cache saves them; when already root, commands run as they are.
#
#   tools           inferno (cargo) and actionlint (go) into .tools, as the runner's user
#   debs            Debian packages (make debs, as root); .deb archives from and to $PCB_APT_CACHE
#   venv            the Python venv (make's .venv/.stamp), as the runner's user
#   kernel          modprobe kyber-iosched, and whether perf runs for this kernel: a notice with
#                   the reason when not (the labs then record those steps as skipped)
#   auditd-stop     stop a running auditd service for a lab that uses audit (it leaves a live audit
#                   configuration alone and would skip its audit group); state kept for:
#   auditd-restore  start it again and restore the audit enabled flag, if auditd-stop stopped it
#   run             make ci-labs LABS=$LAB HOST=gha-<arch> (FULL=1: full runs), as root
#   apt-save        copy the downloaded .deb archives to $PCB_APT_CACHE (for actions/cache)
#
# Environment: LAB (a lab, or empty: all), FULL (1: full runs), PCB_CI_HOST (default
# gha-<arch>), PCB_CI_OUT (default ci-results), PCB_APT_CACHE (default ~/.cache/pcb-apt),
# PCB_JOB_STATE (default ${RUNNER_TEMP:-${TMPDIR:-/tmp}}/pcb-lab-job: state between steps).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
STATE=${PCB_JOB_STATE:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}/pcb-lab-job}
APT_CACHE=${PCB_APT_CACHE:-$HOME/.cache/pcb-apt}
mkdir -p "$STATE"

say() { printf '[lab-job %s] %s\n' "$STEP" "$*" >&2; }
# notice MESSAGE: a GitHub annotation on a runner, a plain line elsewhere.
notice() { if [[ -n "${GITHUB_ACTIONS:-}" ]]; then echo "::notice::$*"; else say "notice: $*"; fi; }

# as_root CMD...: CMD as root with this user's PATH and cache directory.
as_root() {
  if [[ $EUID -eq 0 ]]; then "$@"; return; fi
  sudo env "PATH=$PATH" "XDG_CACHE_HOME=${XDG_CACHE_HOME:-$HOME/.cache}" "$@"
}

step_tools() { make inferno actionlint; }

step_debs() {
  local n=0
  if [[ -d "$APT_CACHE" ]]; then
    n=$(find "$APT_CACHE" -name '*.deb' | wc -l)
    ((n == 0)) || as_root cp -n "$APT_CACHE"/*.deb /var/cache/apt/archives/ 2>/dev/null || true
  fi
  say "$n cached .deb archives"
  as_root make debs
}

step_venv() { make venv; }

step_kernel() {
  if as_root modprobe kyber-iosched 2>/dev/null || grep -qw kyber /sys/block/*/queue/scheduler 2>/dev/null; then
    say "kyber I/O scheduler available"
  else
    notice "kyber-iosched is not available on kernel $(uname -r): optane_kyber records its kyber steps as skipped"
  fi
  local err
  if ! command -v perf >/dev/null; then
    notice "perf is not installed: the labs record their perf steps as skipped"
  elif ! err=$(perf --version 2>&1); then
    notice "perf does not run on kernel $(uname -r) (linux-tools-$(uname -r) missing?): $(head -n 1 <<<"$err"); the labs record their perf steps as skipped"
  else
    say "$err"
  fi
}

step_auditd_stop() {
  # Only a lab that uses audit itself (auditd among its manifest's packages) needs the service off.
  if [[ -n "${LAB:-}" ]] && ! grep -q '"auditd"' "$ROOT/labs/$LAB/lab.toml" 2>/dev/null; then
    say "not needed for $LAB"; return 0
  fi
  rm -f "$STATE/auditd"
  if command -v systemctl >/dev/null && systemctl is-active --quiet auditd 2>/dev/null; then
    local enabled
    enabled=$(as_root auditctl -s | awk '$1 == "enabled" { print $2 }')
    as_root systemctl stop auditd
    as_root auditctl -D >/dev/null
    as_root auditctl -e 0 >/dev/null
    echo "$enabled" > "$STATE/auditd"
    say "auditd stopped, its rules deleted and audit disabled (was enabled=$enabled); auditd-restore undoes it"
  else
    say "no auditd service running: nothing to stop"
  fi
}

step_auditd_restore() {
  [[ -f "$STATE/auditd" ]] || { say "nothing to restore"; return 0; }
  local enabled; enabled=$(cat "$STATE/auditd")
  as_root systemctl start auditd
  as_root auditctl -e "$enabled" >/dev/null
  rm -f "$STATE/auditd"
  say "auditd started again (its rules reloaded), audit enabled=$enabled"
}

step_run() {
  local host=${PCB_CI_HOST:-gha-$(uname -m)}
  as_root make ci-labs LABS="${LAB:-}" HOST="$host" FULL="${FULL:-}" CI_OUT="${PCB_CI_OUT:-}"
}

step_apt_save() {
  mkdir -p "$APT_CACHE"
  cp -n /var/cache/apt/archives/*.deb "$APT_CACHE"/ 2>/dev/null || true
  say "$(find "$APT_CACHE" -name '*.deb' | wc -l) .deb archives in $APT_CACHE"
}

STEP=${1:-}
case "$STEP" in
  tools|debs|venv|kernel|run) "step_$STEP" ;;
  auditd-stop) step_auditd_stop ;;
  auditd-restore) step_auditd_restore ;;
  apt-save) step_apt_save ;;
  *) echo "usage: $0 tools|debs|venv|kernel|auditd-stop|run|auditd-restore|apt-save" >&2; exit 2 ;;
esac
