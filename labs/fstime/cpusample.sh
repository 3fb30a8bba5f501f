#!/bin/sh
# labs/fstime/cpusample.sh: two readings of the CPU time counters, SECONDS apart.
#
#   cpusample.sh PID SECONDS
#
# Prints the cpu lines of /proc/stat (ticks per mode, all CPUs and each CPU) and the
# /proc/PID/stat line of process PID (its own user and system ticks), sleeps SECONDS,
# and prints both again. The difference is what htop's CPU meters show for that interval;
# labs/fstime/cpushare.py turns it into one line (proc(5), "/proc/stat", "/proc/pid/stat").
#
# Exit status: 0 ok, 1 the process is gone, 2 bad usage.
case "${1:-}" in
  -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
if [ "$#" -ne 2 ] || ! [ "$1" -gt 0 ] 2>/dev/null; then
  echo "usage: cpusample.sh PID SECONDS" >&2
  exit 2
fi
grep '^cpu' /proc/stat && cat "/proc/$1/stat" || exit 1
sleep "$2" || exit 2
grep '^cpu' /proc/stat && cat "/proc/$1/stat" || exit 1
