# shellcheck shell=bash
# labs/lib/case.sh: a step's record, the one writer of it: sourced by labs/lib/lab.sh on the host
# and, in a labkit guest, by labkit/guest/step.sh (the job disk holds this file as
# /job/.pcb/case.sh). A step's line in steps.tsv, its case in raw/NAME.case and its command in
# raw/NAME.cmd, all under $LAB_RUN (labkit/steps.py and labkit.record.read_steps read them). Every
# --case field is checked when the step is called, against the case keys the lab declares in
# lab.toml's [case] table and their types, which the supervisor exports as PCB_LAB_CASE
# ("KEY=TYPE ...", TYPE: str, int, float, bool). A lab author's mistake in a call of the step
# language (an unknown option, a malformed or undeclared --case) stops the run at once with one
# line, and the run exits 2.

# The body's exit status for such a mistake (labkit/run/supervisor.py BODY_USAGE: the run exits 2;
# labkit/guest/step.sh, which no supervisor wraps, sets 2 after sourcing this file), and who says so.
LAB_USAGE_EXIT=101
LAB_USAGE_WHO=lab.sh

# LAB_CASE_TYPE: each declared case key's type.
declare -A LAB_CASE_TYPE=()
for lab__w in ${PCB_LAB_CASE:-}; do
  LAB_CASE_TYPE[${lab__w%%=*}]=${lab__w#*=}
done
unset lab__w

# LAB_ONE_REPETITION: 1 when the run keeps one repetition of each step (PCB_ONE_REPETITION=1 in
# its environment: the full fault matrix, tests/fault_matrix.py --full, sets it). A repetition
# runs the same command with the same resources as the first; such a run leaves out every step
# whose case has rep > 1 (lab__later_rep), records it as skipped with LAB_ONE_REPETITION_WHY and
# says so under the progress kind "repetition" (labkit/run/events.py), which is not a step
# boundary for the matrix. A reader's run never sets it.
LAB_ONE_REPETITION=${PCB_ONE_REPETITION:-0}
# shellcheck disable=SC2034  # read by lab.sh and labkit/guest/step.sh, which source this file
LAB_ONE_REPETITION_WHY="not run: a repetition after the first (PCB_ONE_REPETITION=1: one repetition per step, a fault-matrix run)"

# lab__later_rep FIELD...: true when LAB_ONE_REPETITION is 1 and the KEY=VALUE fields hold rep=N
# with N > 1 (rep is an int case key in every lab that repeats a step).
lab__later_rep() {
  [[ $LAB_ONE_REPETITION == 1 ]] || return 1
  local f
  for f; do
    [[ $f =~ ^rep=([0-9]+)$ ]] && ((BASH_REMATCH[1] > 1)) && return 0
  done
  return 1
}

# lab__usage MESSAGE: say what the lab's code got wrong, in one line, and stop the run.
lab__usage() {
  printf '%s: %s\n' "$LAB_USAGE_WHO" "$1" >&2 || true
  exit "$LAB_USAGE_EXIT"
}

# lab__case_check NAME FIELD: refuse step NAME's --case FIELD when it is not KEY=VALUE, when the
# lab does not declare KEY, or when VALUE is not of KEY's declared type (labkit/steps.py TYPES).
lab__case_check() {
  local at="step $1: --case '$2'" key=${2%%=*} value=${2#*=} type toml=${LAB_DIR#"$LAB_ROOT"/}/lab.toml
  if [[ $2 != *=* || ! $key =~ ^[a-z_][a-z0-9_]*$ ]]; then
    lab__usage "$at: not KEY=VALUE (KEY: a-z, 0-9 and _)"
  fi
  type=${LAB_CASE_TYPE[$key]:-}
  [[ -n $type ]] || lab__usage "$at: $key is not a case key of $toml [case]"
  case $type in
    int) [[ $value =~ ^-?[0-9]+$ ]] ;;
    float) [[ $value =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]] ;;
    bool) [[ $value == true || $value == false ]] ;;
    *) [[ $value != *$'\n'* ]] ;;
  esac || lab__usage "$at: not of type $type, $key's type in $toml [case]"
}

# lab__case NAME KEY=VALUE...: check a step's case fields and keep them in raw/NAME.case, one
# KEY=VALUE a line; labkit record puts them in the step's record as "case", typed.
lab__case() {
  local name=$1 f
  local -A seen=()
  shift
  for f in "$@"; do
    lab__case_check "$name" "$f"
    [[ -z ${seen[${f%%=*}]:-} ]] || lab__usage "step $name: --case '$f': ${f%%=*} given twice"
    seen[${f%%=*}]=1
  done
  (($#)) || return 0
  printf '%s\n' "$@" > "$LAB_RUN/raw/$name.case"
}

# lab__record_step NAME STATUS EXIT SECONDS EXPECT REASON: the step's line in steps.tsv (the
# columns of labkit/steps.py COLUMNS, the group between NAME and STATUS; no tab or newline in REASON).
lab__record_step() {
  local reason=${6//$'\t'/ }
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "${LAB_GROUP:-main}" "$2" "$3" "$4" "$5" "${reason//$'\n'/ }" \
    >> "$LAB_RUN/steps.tsv"
}

# lab__cmd NAME CMD...: keep the command in raw/NAME.cmd, each word quoted as bash's printf %q
# quotes it (a shell reads the line back as the same words); LAB_CMD holds the line.
lab__cmd() {
  local name=$1
  shift
  printf -v LAB_CMD '%q ' "$@"
  LAB_CMD=${LAB_CMD% }
  printf '%s' "$LAB_CMD" > "$LAB_RUN/raw/$name.cmd"
}

# lab__seconds T0 T1: LAB_SECS, the seconds from T0 to T1 (microseconds, ${EPOCHREALTIME//[.,]/}),
# with three decimals.
lab__seconds() {
  # shellcheck disable=SC2034 # read by the caller (lab_run, the guest's step)
  printf -v LAB_SECS '%d.%03d' $((($2 - $1) / 1000000)) $(((($2 - $1) % 1000000) / 1000))
}
