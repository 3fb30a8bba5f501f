# labkit/guest/step.sh: the step writer of a job inside a labkit guest, in POSIX sh (the guests'
# dash). labkit.guest puts it on every job disk as /job/.pcb/step.sh; a job sources it:
#
#     . /job/.pcb/step.sh
#     OUT=$PCB_OUT
#     step NAME [KEY=VALUE...] -- CMD...
#
# Every KEY=VALUE field is checked when the step is called, as lab.sh checks a --case on the host:
# against the case keys and types the lab declares in lab.toml's [case] table, which labkit.guest
# puts beside this file as /job/.pcb/case-types (KEY=TYPE words, from the lab run's PCB_LAB_CASE;
# $PCB_CASE_TYPES names another file). A field that is not KEY=VALUE, an undeclared key, a value
# not of its type or a key given twice stops the job at once: one line on stderr, exit 2. A job
# booted outside a lab run has no such file, and its fields are checked for form only.
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

# pcb_types: " KEY=TYPE ... " as the lab declares them (empty: no declaration to check against).
pcb_types=
if [ -r "${PCB_CASE_TYPES:-/job/.pcb/case-types}" ]; then
  while read -r pcb_w; do pcb_types="$pcb_types $pcb_w"; done < "${PCB_CASE_TYPES:-/job/.pcb/case-types}"
  pcb_types="$pcb_types "
fi
pcb_nl='
'

# pcb_digits TEXT: true when TEXT is one or more of 0-9.
pcb_digits() {
  case $1 in ''|*[!0-9]*) return 1 ;; esac
}

# pcb_typed TYPE VALUE: true when VALUE is of TYPE (int, float, bool, str), as labkit/steps.py reads it.
pcb_typed() {
  pcb_v=${2#-}
  case $1 in
    int) pcb_digits "$pcb_v" ;;
    float)
      case $pcb_v in
        *[eE]*) pcb_m=${pcb_v%%[eE]*} pcb_e=${pcb_v#*[eE]}; pcb_e=${pcb_e#[-+]} ;;
        *) pcb_m=$pcb_v pcb_e=0 ;;
      esac
      case $pcb_m in
        *.*) pcb_digits "${pcb_m%%.*}" && pcb_digits "${pcb_m#*.}" ;;
        *) pcb_digits "$pcb_m" ;;
      esac && pcb_digits "$pcb_e" ;;
    bool) [ "$2" = true ] || [ "$2" = false ] ;;
    *) case $2 in *"$pcb_nl"*) return 1 ;; esac ;;
  esac
}

# pcb_refuse NAME FIELD WHY: the job's mistake in one line, and the job stops (exit 2).
pcb_refuse() {
  printf "step.sh: step %s: case '%s': %s\n" "$1" "$2" "$3" >&2
  exit 2
}

# pcb_case_check NAME FIELD SEEN: refuse FIELD of step NAME when it is not KEY=VALUE, when its key
# is in SEEN (" KEY ... ") or undeclared, or when its value is not of the key's type.
pcb_case_check() {
  pcb_k=${2%%=*}
  case $2 in *=*) ;; *) pcb_refuse "$1" "$2" "not KEY=VALUE" ;; esac
  case $pcb_k in ''|[!a-z_]*|*[!a-z0-9_]*) pcb_refuse "$1" "$2" "not KEY=VALUE (KEY: a-z, 0-9 and _)" ;; esac
  case $3 in *" $pcb_k "*) pcb_refuse "$1" "$2" "$pcb_k given twice" ;; esac
  [ -n "$pcb_types" ] || return 0
  pcb_t=${pcb_types#* "$pcb_k"=}
  [ "$pcb_t" != "$pcb_types" ] || pcb_refuse "$1" "$2" "$pcb_k is not a case key of the lab's lab.toml [case]"
  pcb_t=${pcb_t%% *}
  pcb_typed "$pcb_t" "${2#*=}" || pcb_refuse "$1" "$2" "not of type $pcb_t, $pcb_k's type in the lab's lab.toml [case]"
}

step() {
  pcb_name=$1; shift
  pcb_seen=" "
  for pcb_w in "$@"; do
    [ "$pcb_w" != -- ] || break
    pcb_case_check "$pcb_name" "$pcb_w" "$pcb_seen"
    pcb_seen="$pcb_seen${pcb_w%%=*} "
  done
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
