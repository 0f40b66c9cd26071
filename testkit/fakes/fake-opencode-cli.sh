#!/usr/bin/env bash
# A fake `opencode run --format json` for the fault suite (faults/): cheap (bash builtins, one
# `sleep` per pause), scriptable from the prompt, and it leaves a trail the harness can check.
#
# Environment (the harness sets it through the backend's `env` option; children inherit it):
#   FAULTS_DIR    bookkeeping directory: `cli.log` (start / end / overlap lines) and `keys/<key>`
#                 (pid of the process that last started for that conversation)
#   FAULTS_MARK   marker the harness finds every process of a run by (/proc/<pid>/environ)
#
# Directives in the prompt (stdin), written by the harness into the user message:
#   FAULTKEY-<key>    conversation key (for the one-turn-at-a-time check)
#   FAULTMODE-<mode>  stream (default): N text events, MS ms apart, then step_finish
#                     linger: issue 20 #1: a child `sleep FAULTLINGER` keeps stdout open while the
#                             leader prints its answer and exits
#                     stubborn: ignores SIGTERM (and SIGPIPE): only SIGKILL ends it
#   FAULTN-<n>        text events (default 3)      FAULTMS-<ms>  pause between them (default 0)
#   FAULTLINGER-<s>   seconds the linger child sleeps (default 10)
#
# Every pause is bounded: a fake never lives longer than N*MS ms (+ FAULTLINGER s).
if [ "${1:-}" = "--version" ]; then echo "0.0.0-faults"; exit 0; fi

prompt=$(cat)
directive() { # name default -> $REPLY
  REPLY=$2
  case $prompt in *"$1"-*) local rest=${prompt#*"$1"-}; REPLY=${rest%%[!A-Za-z0-9_.:-]*} ;; esac
}
directive FAULTKEY unknown; key=$REPLY
directive FAULTMODE stream; mode=$REPLY
directive FAULTN 3; n=$REPLY
directive FAULTMS 0; ms=$REPLY
directive FAULTLINGER 10; linger=$REPLY

dir=${FAULTS_DIR:-/tmp}
log=$dir/cli.log
mkdir -p "$dir/keys"
holder=$dir/keys/$key
prev=
[ -f "$holder" ] && read -r prev <"$holder"
# Another process of the same conversation still alive: the bridge ran two turns of one
# conversation at once (or did not reap the previous one before starting the next).
if [ "$key" != unknown ] && [ -n "$prev" ] && [ "$prev" != "$$" ] && kill -0 "$prev" 2>/dev/null; then
  echo "overlap $key $$ $prev $EPOCHREALTIME" >>"$log"
fi
echo $$ >"$holder"
echo "start $key $$ $EPOCHREALTIME $mode" >>"$log"
trap 'echo "end $key $$ $EPOCHREALTIME" >>"$log"' EXIT
if [ "$mode" = stubborn ]; then trap '' TERM PIPE; else trap 'exit 143' TERM; fi

sid="ses_faults$$"
printf -v pause '%d.%03d' $((ms / 1000)) $((ms % 1000))
echo '{"type":"step_start","sessionID":"'$sid'","part":{"type":"step-start"}}'
if [ "$mode" = linger ]; then
  sleep "$linger" &
fi
i=1
while [ "$i" -le "$n" ]; do
  [ "$ms" -gt 0 ] && [ "$i" -gt 1 ] && sleep "$pause"
  echo '{"type":"text","sessionID":"'$sid'","part":{"type":"text","text":"FAULTS-OK '$key' '$i'. "}}'
  i=$((i + 1))
done
echo '{"type":"step_finish","sessionID":"'$sid'","part":{"type":"step-finish","reason":"stop","tokens":{"input":12,"output":'$n',"reasoning":0,"cache":{"read":0,"write":0}}}}'
exit 0
