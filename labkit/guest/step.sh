# labkit/guest/step.sh: the step writer of a job inside a labkit guest, in POSIX sh (the guests'
# dash). labkit.guest puts it on every job disk as /job/.pcb/step.sh; a job sources it:
#
#     . /job/.pcb/step.sh
#     OUT=$PCB_OUT
#     step NAME [KEY=VALUE...] -- CMD...
#
# It writes what labs/lib/lab.sh's lab_run writes on the host, the files a lab's record.py reads
# (labkit.record.read_case, and its own reader of the guest's steps): $OUT/NAME.cmd (the command,
# each word quoted so that a shell reads the line back as the same words), NAME.case (the
# KEY=VALUE fields, one a line; no file without fields), NAME.out and NAME.err (the command's
# output), NAME.rc (its exit status). It prints "NAME: CMD" before and "NAME: ok (1.23 s)" or
# "NAME: exit N: <last line of stderr>" after, and always returns 0: a failed step is recorded,
# not fatal. No process is started but the command itself (and tail on a failure): under an
# emulated CPU every process costs tens of milliseconds, so the time comes from /proc/uptime,
# read by the shell.

# pcb_quote WORD: sets pcb_q to WORD quoted for sh: as it is when it holds only characters no
# shell treats specially, else in single quotes, each ' written as '\''.
pcb_quote() {
  case $1 in
    '') pcb_q="''" ;;
    *[!A-Za-z0-9_./=:,+@%^-]*)
      pcb_s=$1 pcb_q=
      while :; do
        case $pcb_s in
          *\'*) pcb_q="$pcb_q${pcb_s%%\'*}'\\''"; pcb_s=${pcb_s#*\'} ;;
          *) pcb_q="'$pcb_q$pcb_s'"; break ;;
        esac
      done ;;
    *) pcb_q=$1 ;;
  esac
}

step() {
  pcb_name=$1; shift
  : > "$OUT/$pcb_name.case"
  while [ "$1" != -- ]; do printf '%s\n' "$1" >> "$OUT/$pcb_name.case"; shift; done
  shift
  [ -s "$OUT/$pcb_name.case" ] || rm -f "$OUT/$pcb_name.case"
  pcb_cmd=
  for pcb_w in "$@"; do pcb_quote "$pcb_w"; pcb_cmd="$pcb_cmd${pcb_cmd:+ }$pcb_q"; done
  printf '%s\n' "$pcb_cmd" > "$OUT/$pcb_name.cmd"
  printf '%s: %s\n' "$pcb_name" "$pcb_cmd"
  read -r pcb_t0 _ < /proc/uptime
  "$@" > "$OUT/$pcb_name.out" 2> "$OUT/$pcb_name.err"
  pcb_rc=$?
  read -r pcb_t1 _ < /proc/uptime
  echo "$pcb_rc" > "$OUT/$pcb_name.rc"
  if [ "$pcb_rc" = 0 ]; then
    pcb_cs=$(( ${pcb_t1%.*}${pcb_t1#*.} - ${pcb_t0%.*}${pcb_t0#*.} ))   # /proc/uptime: seconds, two decimals
    printf '%s: ok (%d.%02d s)\n' "$pcb_name" $((pcb_cs / 100)) $((pcb_cs % 100))
  else
    printf '%s: exit %s: %s\n' "$pcb_name" "$pcb_rc" "$(tail -n 1 "$OUT/$pcb_name.err")"
  fi
  return 0
}
