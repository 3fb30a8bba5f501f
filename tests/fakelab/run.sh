#!/usr/bin/env bash
# tests/fakelab/run.sh: a test double of a lab for the lab contract's tests (tests/test_lab_contract.py):
# every kind of undo action without root and without touching the host. Its "knob" is a file
# ($FAKELAB_DIR/knob), its "tracefs instance" a directory in $FAKELAB_DIR, its server `sleep`.
#
#   FAKELAB_DIR=DIR tests/fakelab/run.sh [lab options]      (FAKELAB_SLEEP: seconds per work step)
# shellcheck source=../../labs/lib/lab.sh disable=SC2317 # group_* functions are called by lab_main
source "$(dirname "$0")/../../labs/lib/lab.sh"

lab_define fakelab "fakelab: the lab contract's test double (no root, no host change)" sleep
lab_group setup "a knob file set, a background process, a directory made" always
lab_group work "three short steps"
lab_group fill "write a file of FAKELAB_FILL_MIB MiB in the scratch directory"
lab_group stuck "an undo action that fails while \$FAKELAB_DIR/stuck exists"
lab_group chatty "a knob, then a helper of the lab (as labkit record is) that prints many lines"
lab_group zombie "a knob, a background process whose child is a zombie, then a step of FAKELAB_SLEEP seconds"
lab_group badtrap "a knob, then (FAKELAB_BADTRAP=1) bash fails to parse a signal's trap, as bash 5.2 may inside \$(...)"
lab_group typed "a step with FAKELAB_OPTS (default: a case of every type lab.toml declares), FAKELAB_REQUIRE's capability"
lab_group perf "perf record without --no-buildid-cache, where perf can record here"

group_setup() {
  local dir=${FAKELAB_DIR:?FAKELAB_DIR: a directory standing for the host}
  lab_set_knob setup.knob "$dir/knob" changed || return 0
  lab_spawn setup.server -- sleep 300
  lab_rmdir_later "$dir/instance"
  lab_run setup.instance -- mkdir "$dir/instance"
}

group_work() {
  local i
  for i in 1 2 3; do lab_run "work.$i" -- sleep "${FAKELAB_SLEEP:-0.1}"; done
}

group_fill() {
  lab_run fill.write -- dd if=/dev/zero of="$LAB_SCRATCH/fill" bs=1M count="${FAKELAB_FILL_MIB:-1}" status=none
  lab_run fill.after -- true
}

group_chatty() {
  lab_set_knob chatty.knob "$FAKELAB_DIR/knob" changed || return 0
  lab__say note "chatty helper starts"
  # shellcheck disable=SC2016 # the helper's own shell expands $i
  lab__quietly /dev/null sh -c 'for i in $(seq 200); do echo "helper line $i" >&2; sleep 0.002; done' || true
}

group_zombie() {
  lab_set_knob zombie.knob "$FAKELAB_DIR/knob" changed || return 0
  # sh forks `true`, then becomes sleep, which never waits for it: a zombie until sleep dies.
  lab_spawn zombie.parent -- sh -c 'true & exec sleep 300'
  lab_run zombie.wait -- sleep "${FAKELAB_SLEEP:-0.1}"
}

# bash 5.2 can fail to parse a trap's text when the signal arrives while it expands a $(...),
# and then exits with status 2 without running the trap (labs/lib/lab.sh lab__on_exit). A trap
# whose text does not parse fails the same way, every time.
group_badtrap() {
  lab_set_knob badtrap.knob "$FAKELAB_DIR/knob" changed || return 0
  if [[ ${FAKELAB_BADTRAP:-0} == 1 ]]; then
    local never_parses='x=$'
    # shellcheck disable=SC2064 # expanded now on purpose: a trap text that never parses
    trap "$never_parses(" USR1
    kill -USR1 $$
  fi
  lab_run badtrap.after -- true
}

group_stuck() {
  lab_defer "an undo that fails while $FAKELAB_DIR/stuck exists" test ! -e "$FAKELAB_DIR/stuck"
  lab_run stuck.step -- true
}

# A lab author's typos for the contract's tests: FAKELAB_OPTS, lab_run's options as words;
# FAKELAB_REQUIRE, a capability for lab_require.
group_typed() {
  local opts
  read -ra opts <<< "${FAKELAB_OPTS:---case rep=2 --case ratio=0.5 --case label=5.10 --case warm=true}"
  if [[ -n ${FAKELAB_REQUIRE:-} ]]; then
    lab_require typed.require "$FAKELAB_REQUIRE" || return 0
  fi
  lab_run "${opts[@]}" typed.step -- true
}

# perf record's build-id cache (~/.debug by default) must stay in the scratch directory.
group_perf() {
  lab_require perf perf || return 0
  lab_run perf.record -- perf record -q -o "$LAB_SCRATCH/perf.data" -- true
}

lab_main "$@"
