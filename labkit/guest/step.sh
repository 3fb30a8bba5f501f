# shellcheck shell=bash
# labkit/guest/step.sh: the step language of a job inside a labkit guest, in bash (every guest
# profile has it). labkit.guest puts it on every job disk as /job/.pcb/step.sh, with lab.sh's own
# step record writer, labs/lib/case.sh, beside it as /job/.pcb/case.sh; a job sources it:
#
#     . /job/.pcb/step.sh
#     step NAME [KEY=VALUE...] -- CMD...
#
# A step is recorded as lab.sh's lab_run records one on the host, by the same functions: the guest's
# out directory ($PCB_OUT) is a run directory, with steps.tsv (one line a step, group "guest") and
# raw/NAME.cmd, raw/NAME.case, raw/NAME.out, raw/NAME.err; labkit.record.read_steps reads it as it
# reads a host run's. Every KEY=VALUE field is checked when the step is called, as a --case is on
# the host (case.sh lab__case), against the keys and types the lab declares in lab.toml's [case]
# table, which labkit.guest puts beside this file as /job/.pcb/case-types (KEY=TYPE lines, from the
# lab run's PCB_LAB_CASE) with the lab's name in /job/.pcb/lab. A field that is not KEY=VALUE, an
# undeclared key (every key, in a job booted outside a lab run), a value not of its type or a key
# given twice stops the job at once: one line on stderr, exit 2.
#
# It prints "NAME: CMD" before and "NAME: ok (1.234s)" or "NAME: exit N: <last line of stderr>"
# after, and always returns 0: a failed step is recorded, not fatal. No process is started but the
# command itself (and tail on a failure): under an emulated CPU every process costs tens of
# milliseconds.

LAB_RUN=${PCB_OUT:?the out directory of the job}
LAB_GROUP=guest
LAB_ROOT=
LAB_DIR=labs/unknown
[[ ! -r ${PCB_JOB:-/job}/.pcb/lab ]] || LAB_DIR=labs/$(< "${PCB_JOB:-/job}/.pcb/lab")
PCB_LAB_CASE=
[[ ! -r ${PCB_JOB:-/job}/.pcb/case-types ]] || PCB_LAB_CASE=$(< "${PCB_JOB:-/job}/.pcb/case-types")
# One repetition per step (case.sh LAB_ONE_REPETITION) when the lab run that booted the guest
# keeps one: labkit.guest then puts /job/.pcb/one-repetition (holding 1) beside this file.
[[ ! -r ${PCB_JOB:-/job}/.pcb/one-repetition ]] || PCB_ONE_REPETITION=$(< "${PCB_JOB:-/job}/.pcb/one-repetition")
# shellcheck source=SCRIPTDIR/../../labs/lib/case.sh
. "${PCB_JOB:-/job}/.pcb/case.sh"
LAB_USAGE_EXIT=2
LAB_USAGE_WHO=step.sh
mkdir -p "$LAB_RUN/raw"

# step NAME [KEY=VALUE...] -- CMD...: run CMD as a step of the guest's run (see above).
step() {
  local name=$1 fields=() raw rc=0 t0 t1
  shift
  while (($#)) && [[ $1 != -- ]]; do fields+=("$1"); shift; done
  (($#)) || lab__usage "step $name: no -- before the command"
  shift
  lab__case "$name" ${fields[@]+"${fields[@]}"}
  if lab__later_rep ${fields[@]+"${fields[@]}"}; then
    printf '%s: %s\n' "$name" "$LAB_ONE_REPETITION_WHY"
    lab__record_step "$name" skipped "" 0 success "$LAB_ONE_REPETITION_WHY"
    return 0
  fi
  raw=$LAB_RUN/raw/$name
  lab__cmd "$name" "$@"
  printf '%s: %s\n' "$name" "$LAB_CMD"
  t0=${EPOCHREALTIME//[.,]/}
  "$@" > "$raw.out" 2> "$raw.err" < /dev/null || rc=$?
  t1=${EPOCHREALTIME//[.,]/}
  lab__seconds "$t0" "$t1"
  if ((rc == 0)); then
    printf '%s: ok (%ss)\n' "$name" "$LAB_SECS"
    lab__record_step "$name" ok 0 "$LAB_SECS" success ""
  else
    local last
    last=$(tail -n 1 "$raw.err")
    printf '%s: exit %s: %s\n' "$name" "$rc" "$last"
    lab__record_step "$name" failed "$rc" "$LAB_SECS" success "exit $rc: $last"
  fi
  return 0
}
