#!/bin/sh
# labs/fstime/audit_exec.sh: run a command with every one of its system calls audited.
#
#   audit_exec.sh ARCH PIDFILE COMMAND [ARG...]
#
# Writes its own PID to PIDFILE, adds the audit rule
#   auditctl -a always,exit -F arch=ARCH -S all -F pid=<its PID>
# and then execs COMMAND, which keeps the PID: the rule covers COMMAND from its first
# system call on, and no other process. ARCH is auditctl's name for the system-call table
# of COMMAND's architecture (b64 for 64-bit programs, b32 for 32-bit ones; auditctl(8),
# "-F arch"). The rule stays in the kernel after COMMAND exits: the caller deletes it with
#   auditctl -d always,exit -F arch=ARCH -S all -F pid=$(cat PIDFILE)
# (the fstime lab registers that delete on its cleanup stack before running this).
#
# Exit status: COMMAND's; 2 bad usage; 1 if the rule could not be added (COMMAND not run).
case "${1:-}" in
  -h|--help)
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 0 ;;
esac
if [ "$#" -lt 3 ]; then
  echo "usage: audit_exec.sh ARCH PIDFILE COMMAND [ARG...]" >&2
  exit 2
fi
arch=$1 pidfile=$2
shift 2
echo "$$" > "$pidfile" || exit 1
auditctl -a always,exit -F "arch=$arch" -S all -F "pid=$$" >&2 || exit 1
echo "audit_exec.sh: auditing every system call of pid $$ (arch=$arch): $*" >&2
exec "$@"
