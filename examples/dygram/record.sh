#!/usr/bin/env bash
# Records the answers in recordings/ again, by answering each machine by hand (manual mode of
# `dygram execute -i`, with --record). Run from this folder with `dygram` on the PATH:
#   ./record.sh
# The recordings replay with `dygram execute MACHINE --playback recordings/NAME` (or with -i).
set -euo pipefail
cd "$(dirname "$0")"
here=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset ANTHROPIC_API_KEY OPENAI_API_KEY OPENAI_BASE_URL

# Runs `dygram execute -i MACHINE` until it asks for an answer (exit 3), then gives it ANSWER.
answer() {
  local machine=$1 name=$2 answer=$3 code=0
  while :; do
    code=0
    (cd "$work" && dygram e -i "$machine" --id "$name" --record "$here/recordings/$name" -q </dev/null >/dev/null) || code=$?
    case $code in
      0) ;;
      3) break ;;
      *) echo "unexpected exit $code before an answer for $name" >&2; exit 1 ;;
    esac
  done
  code=0
  (cd "$work" && printf '%s' "$answer" | dygram e -i "$machine" --id "$name" -q >/dev/null) || code=$?
  case $code in
    0 | 2) ;;
    *) echo "the answer for $name was refused (exit $code)" >&2; exit 1 ;;
  esac
}

# Runs the execution to its end (exit 2).
finish() {
  local machine=$1 name=$2 code=0
  while :; do
    code=0
    (cd "$work" && dygram e -i "$machine" --id "$name" -q </dev/null >/dev/null) || code=$?
    case $code in
      0) ;;
      2) return ;;
      *) echo "unexpected exit $code while finishing $name" >&2; exit 1 ;;
    esac
  done
}

rm -rf recordings
cp order.dy review.dy trip.dy "$work/"

answer order.dy order '{"response": "Charging 42.00 to the card on file.", "tools": [{"name": "write_order", "input": {"data": {"total": 42}}}]}'
answer order.dy order '{"response": "Charged; the order can ship.", "tools": [{"name": "transition_to_shipped", "input": {"reason": "the card was charged 42.00"}}]}'
finish order.dy order

answer review.dy review '{"response": "First draft.", "tools": [{"name": "write_draft", "input": {"data": {"text": "Lisbon has hills. It has trams. It is nice."}}}, {"name": "transition_to_review", "input": {"reason": "written"}}]}'
answer review.dy review '{"response": "Too plain: 5.", "tools": [{"name": "write_draft", "input": {"data": {"score": 5}}}, {"name": "transition_to_scored", "input": {"reason": "scored"}}]}'
answer review.dy review '{"response": "Second draft.", "tools": [{"name": "write_draft", "input": {"data": {"text": "Lisbon climbs seven hills above the Tagus. Yellow trams rattle through Alfama at dawn. Evenings end with fado and grilled sardines."}}}, {"name": "transition_to_review", "input": {"reason": "rewritten"}}]}'
answer review.dy review '{"response": "Vivid and concrete: 8.", "tools": [{"name": "write_draft", "input": {"data": {"score": 8}}}, {"name": "transition_to_scored", "input": {"reason": "scored"}}]}'
finish review.dy review

answer trip.dy trip '{"response": "Flight chosen.", "tools": [{"name": "write_plan", "input": {"data": {"flight": "TP 1351 on 3 May, 08:10"}}}, {"name": "transition_to_booked", "input": {"reason": "flight chosen"}}]}'
answer trip.dy trip '{"response": "Hotel chosen.", "tools": [{"name": "write_plan", "input": {"data": {"hotel": "Casa do Rio, 3 to 6 May"}}}, {"name": "transition_to_booked", "input": {"reason": "hotel chosen"}}]}'
answer trip.dy trip 'A morning flight to Lisbon on 3 May (TP 1351) and three nights at Casa do Rio.'
finish trip.dy trip

echo "recorded: $(ls recordings/*/turn-*.json | wc -l) answers in recordings/"
