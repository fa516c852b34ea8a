#!/usr/bin/env bash
# farro demo: builds the binaries, starts watchdogd, managerd and two agents
# on the spool (default ./spool), submits a batch of jobs — among them a
# flaky job that fails once and is retried, a broken one that runs out of
# attempts, and a slow one whose agent is SIGKILLed mid-job and recovered —
# waits until every job of the batch is terminal, prints what happened and
# stops the daemons.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${DEMO_JOBS:-200}
export FARRO_SPOOL=${FARRO_SPOOL:-./spool}
LOGS=${DEMO_LOGS:-./demo-logs}
BIN=./bin
mkdir -p "$LOGS"

say() { printf '\n== %s\n' "$*"; }
now_ms() { date +%s%3N; }

say "building"
go build -o "$BIN/" ./cmd/...

pids=()
declare -A agent_pid
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT

start() { # name, command...
	local name=$1
	shift
	"$@" >>"$LOGS/$name.log" 2>>"$LOGS/$name.stderr" &
	pids+=($!)
	echo "$name: pid $! (log $LOGS/$name.log)"
}
start_agent() { # id
	start "agentd-$1" "$BIN/agentd" --id "$1" --concurrency 2 --heartbeat 1s --exec "$PWD/scripts/demo-handler.sh"
	agent_pid[$1]=$!
}

say "starting daemons on $FARRO_SPOOL"
"$BIN/farroctl" init >/dev/null
start watchdogd "$BIN/watchdogd"
start managerd "$BIN/managerd" --backoff-base 200ms --backoff-max 2s
start_agent demo-a
start_agent demo-b

say "submitting $N jobs plus a flaky, a broken and a slow one"
t0=$(now_ms)
ids=()
slow=$(echo '{"slow":true}' | "$BIN/farroctl" submit --priority 10)
ids+=("$slow")
flaky=$(echo '{"flaky":true}' | "$BIN/farroctl" submit)
ids+=("$flaky")
broken=$(echo '{"broken":true}' | "$BIN/farroctl" submit --max-attempts 3)
ids+=("$broken")
batch=$(for i in $(seq 1 "$N"); do printf '{"prompt":{"n":%d}}\n' "$i"; done | "$BIN/farroctl" submit --batch)
mapfile -t -O "${#ids[@]}" ids <<<"$batch"
echo "submitted ${#ids[@]} jobs in $(($(now_ms) - t0)) ms"

say "waiting for the slow job $slow to start, then SIGKILLing its agent"
holder=""
for _ in $(seq 1 300); do
	for a in demo-a demo-b; do
		[ -d "$FARRO_SPOOL/in-progress/$a/$slow" ] && holder=$a
	done
	[ -n "$holder" ] && break
	sleep 0.02
done
[ -n "$holder" ] || { echo "the slow job never started" >&2; exit 1; }
sleep 0.5
victim_pid=${agent_pid[$holder]}
kill -KILL "$victim_pid"
killed=$(now_ms)
echo "killed agentd $holder (pid $victim_pid) while it ran $slow"
requeued() { # the slow job is queued again, or claimed by the other agent
	[ -d "$FARRO_SPOOL/incoming/$slow" ] && return 0
	for d in "$FARRO_SPOOL"/in-progress/*/"$slow"; do
		[ -d "$d" ] && [ "$d" != "$FARRO_SPOOL/in-progress/$holder/$slow" ] && return 0
	done
	return 1
}
until requeued; do sleep 0.01; done
echo "recovered: $slow was back in the queue $(($(now_ms) - killed)) ms after the kill"
start_agent "$holder"

say "waiting for all ${#ids[@]} jobs to be terminal"
terminal() {
	local n=0
	for id in "${ids[@]}"; do
		[ -d "$FARRO_SPOOL/completed/succeeded/$id" ] || [ -d "$FARRO_SPOOL/completed/killed/$id" ] && n=$((n + 1))
	done
	echo "$n"
}
for _ in $(seq 1 600); do
	[ "$(terminal)" -eq "${#ids[@]}" ] && break
	sleep 0.2
done
elapsed=$(($(now_ms) - t0))
done_n=$(terminal)
echo "$done_n/${#ids[@]} jobs terminal after $elapsed ms ($((done_n * 1000 / (elapsed > 0 ? elapsed : 1))) jobs/s, including the slow job's recovery)"

say "farroctl stats"
"$BIN/farroctl" stats
say "farroctl history $flaky   (the flaky job: failed once, retried, succeeded)"
"$BIN/farroctl" history "$flaky"
say "farroctl history $broken   (the broken job: out of attempts)"
"$BIN/farroctl" history "$broken"
say "farroctl logs --attempt 1 $broken   (what its first attempt printed)"
"$BIN/farroctl" logs --attempt 1 "$broken" || true
say "farroctl history $slow   (the slow job: its agent was SIGKILLed, watchdogd recovered it)"
"$BIN/farroctl" history "$slow"

[ "$done_n" -eq "${#ids[@]}" ] || { echo "demo: not every job finished" >&2; exit 1; }
say "done; daemons stop now (logs in $LOGS)"
echo "Next, on this spool (export FARRO_SPOOL=$FARRO_SPOOL; the daemons are stopped, start them as in the README):"
next_cmd() { printf '  %-72s # %s\n' "$1" "$2"; }
next_cmd "$BIN/farroctl ls --state killed" "what died, and why"
next_cmd "$BIN/farroctl retry $broken" "run it again: same ID, attempts reset"
next_cmd "$BIN/farroctl events --job $flaky" "the spool-wide event stream, one job"
next_cmd "$BIN/farroctl rm --state succeeded" "a dry run: how many would go (--all does it)"
next_cmd "$BIN/farroctl top" "the live view, once the daemons run"
