#!/usr/bin/env bash
# .github/ci-labs.sh: run labs on this machine exactly as a CI runner does, so `make ci-labs`
# on any Linux host produces what a runner uploads.
#
#   .github/ci-labs.sh [--full] [--host LABEL] [--out DIR] [--labs a,b]
#
# For each lab: run it under `asciinema rec` (headless; the recording is of that same run),
# attach the cast to the lab's result, and keep going when a lab fails (its exit status is
# reported at the end and in DIR/<host>/ci-labs.tsv). Output: DIR/<host>/<lab>.json + DIR/<host>/<lab>/.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY="$ROOT/.venv/bin/python"; [[ -x "$PY" ]] || PY=python3
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
MODE=--quick HOST="" OUT="$ROOT/ci-results" LABS="" ONLY=""
usage() { echo "usage: $0 [--full] [--host LABEL] [--out DIR] [--labs a,b] [--only GROUP,..]" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --full) MODE="" ;;
    --host) HOST=${2:?}; shift ;;
    --out) OUT=${2:?}; shift ;;
    --labs) LABS=${2:?}; shift ;;
    --only) ONLY=${2:?}; shift ;;
    -h|--help) usage ;;
    *) echo "$0: unknown option: $1" >&2; usage ;;
  esac
  shift
done
[[ -n "$HOST" ]] || HOST="ci-$(uname -m)"
if [[ -z "$LABS" ]]; then
  for run in "$ROOT"/labs/*/run.sh; do run=${run%/run.sh}; LABS+="${run##*/},"; done
fi
mkdir -p "$OUT/$HOST"
summary="$OUT/$HOST/ci-labs.tsv"; : > "$summary"
status=0
for lab in ${LABS//,/ }; do
  [[ -x "$ROOT/labs/$lab/run.sh" || -f "$ROOT/labs/$lab/run.sh" ]] || { echo "no lab $lab" >&2; exit 2; }
  cast="$OUT/$HOST/.$lab.cast"
  cmd="bash $ROOT/labs/$lab/run.sh $MODE --host $HOST --out $OUT/$HOST${ONLY:+ --only $ONLY}"
  echo "== $lab: $cmd" >&2
  t0=$(date +%s)
  if command -v asciinema >/dev/null; then
    # asciinema 2.x does not pass the command's exit status on: the lab writes it to a file.
    asciinema rec -q --overwrite --cols 110 --rows 30 -c "$cmd; echo \$? > $cast.rc" "$cast" < /dev/null
    rc=$(cat "$cast.rc" 2>/dev/null || echo 1); rm -f "$cast.rc"
  else
    $cmd; rc=$?
  fi
  printf '%s\t%s\t%s\n' "$lab" "$rc" "$(( $(date +%s) - t0 ))" >> "$summary"
  if [[ -f "$OUT/$HOST/$lab.json" && -f "$cast" ]]; then
    "$PY" -m labkit attach-cast --result "$OUT/$HOST/$lab.json" --cast "$cast" || rc=1
  fi
  rm -f "$cast"
  ((rc == 0)) || status=1
  echo "== $lab: exit $rc" >&2
done
exit "$status"
