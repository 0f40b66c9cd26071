#!/usr/bin/env bash
# A fake `claude -p --output-format stream-json --verbose --include-partial-messages` for the fault
# suite (faults/), for resume mode: it keeps its "sessions" as files, answers `--resume <id>` of an
# unknown id the way Claude Code does (docs/CLI_FORMATS.md), and streams text deltas slowly enough
# that a kill -9 of the bridge lands mid-turn.
#
# Environment (set by the harness through the backend's `env` option; children inherit it):
#   FAULTS_DIR    bookkeeping: `cli.log` (start / end / overlap lines), `keys/<key>`, `sessions/<id>`
#   FAULTS_MARK   marker the harness finds every process of a run by (/proc/<pid>/environ)
#
# Directives in the prompt (stdin): FAULTKEY-<key>, FAULTN-<n> text deltas (default 3),
# FAULTMS-<ms> between them (default 0), FAULTLINGER-<ms> after the result line before exiting
# (default 0: a CLI that takes its time to exit after its turn; stdout stays open), FAULTMODE-<mode>:
#   stream (default)  dies of SIGPIPE at its next write once the bridge is gone (like a real CLI)
#   helper            also starts a helper (`sleep FAULTHELPER`, default 30 s, stdio on /dev/null)
#                     that stays in the process group when the leader dies
#   stubborn          helper + ignores SIGTERM and SIGPIPE: only SIGKILL of the group ends it
#   slowterm          helper + ignores SIGPIPE (outlives the bridge) and takes 0.5 s to exit on
#                     SIGTERM, as a CLI that cleans up does
# Every pause is bounded: a fake lives at most N*MS + LINGER ms, its helper FAULTHELPER s.
if [ "${1:-}" = "--version" ]; then echo "2.1.197 (Claude Code, faults fake)"; exit 0; fi

resume=
while [ $# -gt 0 ]; do
  case $1 in --resume) resume=${2:-}; shift ;; esac
  shift
done

prompt=$(cat)
directive() { # name default -> $REPLY
  REPLY=$2
  case $prompt in *"$1"-*) local rest=${prompt#*"$1"-}; REPLY=${rest%%[!A-Za-z0-9_.:-]*} ;; esac
}
directive FAULTKEY unknown; key=$REPLY
directive FAULTMODE stream; mode=$REPLY
directive FAULTN 3; n=$REPLY
directive FAULTMS 0; ms=$REPLY
directive FAULTHELPER 30; helper=$REPLY
directive FAULTLINGER 0; linger=$REPLY

dir=${FAULTS_DIR:-/tmp}
log=$dir/cli.log
mkdir -p "$dir/keys" "$dir/sessions"
holder=$dir/keys/$key
prev=
[ -f "$holder" ] && read -r prev <"$holder"
if [ "$key" != unknown ] && [ -n "$prev" ] && [ "$prev" != "$$" ] && kill -0 "$prev" 2>/dev/null; then
  echo "overlap $key $$ $prev $EPOCHREALTIME" >>"$log"
fi
echo $$ >"$holder"
echo "start $key $$ $EPOCHREALTIME $mode" >>"$log"
trap 'echo "end $key $$ $EPOCHREALTIME" >>"$log"' EXIT
case $mode in
  stubborn) trap '' TERM PIPE ;;
  slowterm) trap '' PIPE; trap 'sleep 0.5; exit 143' TERM ;;
  *) trap 'exit 143' TERM ;;
esac

if [ -n "$resume" ]; then
  if [ ! -f "$dir/sessions/$resume" ]; then
    echo '{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":0,"session_id":"'$resume'","errors":["No conversation found with session ID: '$resume'"]}'
    echo "No conversation found with session ID: $resume" >&2
    exit 1
  fi
  sid=$resume
else
  sid=$(</proc/sys/kernel/random/uuid)
fi
echo "$key $$ $EPOCHREALTIME" >>"$dir/sessions/$sid"

if [ "$mode" != stream ]; then
  sleep "$helper" </dev/null >/dev/null 2>&1 &
fi

ev() { echo "$1"; }
tail=',"session_id":"'$sid'","parent_tool_use_id":null}'
ev '{"type":"system","subtype":"init","cwd":"'"$PWD"'","session_id":"'$sid'","tools":["Read"],"model":"fake","permissionMode":"default","apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.197"}'
ev '{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_faults'$$'","type":"message","role":"assistant","model":"fake","content":[],"usage":{"input_tokens":12,"output_tokens":0}}'"$tail"
ev '{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'"$tail"
printf -v pause '%d.%03d' $((ms / 1000)) $((ms % 1000))
i=1
while [ "$i" -le "$n" ]; do
  [ "$ms" -gt 0 ] && [ "$i" -gt 1 ] && sleep "$pause"
  ev '{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"FAULTS-OK '$key' '$i'. "}}'"$tail"
  i=$((i + 1))
done
ev '{"type":"stream_event","event":{"type":"content_block_stop","index":0}'"$tail"
ev '{"type":"stream_event","event":{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":'$n'}}'"$tail"
ev '{"type":"stream_event","event":{"type":"message_stop"}'"$tail"
ev '{"type":"result","subtype":"success","is_error":false,"api_error_status":null,"num_turns":1,"result":"","stop_reason":"end_turn","session_id":"'$sid'","usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":'$n'}}'
if [ "$linger" -gt 0 ]; then
  printf -v pause '%d.%03d' $((linger / 1000)) $((linger % 1000))
  sleep "$pause"
fi
exit 0
