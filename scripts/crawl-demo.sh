#!/usr/bin/env bash
# farro crawl demo: builds the binaries and the test site server, serves a
# generated site on 127.0.0.1 under several host names (a.site.test,
# b.site.test, ... reached through --resolve), starts watchdogd, managerd
# (with its crawl frontier) and two agents on a fresh spool, crawls the
# site politely, and prints what the crawl did. No internet needed.
#
#   CRAWL_DEMO_DIR   where the spool and logs go (default ./crawl-demo, emptied)
#   CRAWL_DEMO_DELAY politeness interval per domain (default 100ms)
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${CRAWL_DEMO_DIR:-./crawl-demo}
DELAY=${CRAWL_DEMO_DELAY:-100ms}
BIN=./bin
rm -rf "$DIR"
mkdir -p "$DIR/logs"
export FARRO_SPOOL=$DIR/spool

say() { printf '\n== %s\n' "$*"; }

say "building"
go build -o "$BIN/" ./cmd/... ./test/crawl/siteserver

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT
start() { # name, command...
	local name=$1
	shift
	"$@" >>"$DIR/logs/$name.log" 2>&1 &
	pids+=($!)
}

say "serving the test site on 127.0.0.1"
"$BIN/siteserver" --log "$DIR/access.jsonl" >"$DIR/site.txt" 2>"$DIR/logs/siteserver.log" &
pids+=($!)
for _ in $(seq 1 100); do
	[ "$(wc -l <"$DIR/site.txt")" -ge 10 ] && break
	sleep 0.05
done
port=$(sed -n 's/^port=//p' "$DIR/site.txt")
resolve=()
while read -r r; do resolve+=(--resolve "$r"); done < <(grep -v '^port=' "$DIR/site.txt")
echo "site on port $port: $(grep -vc '^port=' "$DIR/site.txt") host names, robots.txt variants, redirects, errors, a URL trap"

say "starting watchdogd, managerd and 2 agents on $FARRO_SPOOL (logs in $DIR/logs)"
"$BIN/farroctl" init >/dev/null
start watchdogd "$BIN/watchdogd"
start managerd "$BIN/managerd" --backoff-base 100ms --backoff-max 1s
start agentd-w1 "$BIN/agentd" --id w1 --concurrency 4
start agentd-w2 "$BIN/agentd" --id w2 --concurrency 4

say "farroctl crawl start demo --seed http://a.site.test:$port/ --scope domain --max-depth 3 --delay $DELAY ..."
t0=$(date +%s%3N)
"$BIN/farroctl" crawl start demo --seed "http://a.site.test:$port/" --scope domain --max-depth 3 \
	--delay "$DELAY" --max-in-flight-per-domain 2 --timeout 2s --max-body-bytes 1048576 --max-attempts 2 \
	--block-cooldown 2s --unreachable-cooldown 2s --max-domain-retries 1 --unreachable-threshold 2 --allow-private "${resolve[@]}"

for _ in $(seq 1 1200); do
	grep -q '"state": "done"' "$FARRO_SPOOL/crawls/demo/crawl.json" && break
	sleep 0.1
done
t1=$(date +%s%3N)
grep -q '"state": "done"' "$FARRO_SPOOL/crawls/demo/crawl.json" || { echo "the crawl did not finish" >&2; exit 1; }
echo "crawl done in $((t1 - t0)) ms (as this script waited); the site served $(wc -l <"$DIR/access.jsonl") requests"
# The rate is the crawl's own: pages fetched over its duration from start to
# done (created_at to finished_at, elapsed_ms in crawl status --json).
status=$("$BIN/farroctl" crawl status demo --json)
fetched=$(printf '%s' "$status" | sed -n 's/.*"fetched":\([0-9]*\).*/\1/p')
elapsed_ms=$(printf '%s' "$status" | sed -n 's/.*"elapsed_ms":\([0-9]*\).*/\1/p')
{ [ -n "$fetched" ] && [ -n "$elapsed_ms" ]; } || { echo "crawl status --json lacks fetched or elapsed_ms" >&2; exit 1; }
awk -v n="$fetched" -v ms="$elapsed_ms" 'BEGIN {
	printf "crawl rate: %d pages in %.3f s from start to done = %.1f pages/s\n", n, ms / 1000, (ms > 0 ? n * 1000 / ms : 0) }'

say "farroctl crawl status demo"
"$BIN/farroctl" crawl status demo

say "why (farroctl why demo URL)"
for u in "http://a.site.test:$port/p/1" "http://a.site.test:$port/private/secret" "http://a.site.test:$port/p/1/1/1/1" \
	"http://out.other.test:$port/" "http://d.site.test:$port/" "http://slow.site.test:$port/"; do
	"$BIN/farroctl" why demo "$u"
done

say "farroctl crawl export demo | head -c 600"
"$BIN/farroctl" crawl export demo | head -c 600 || true # head closes the pipe early: SIGPIPE is expected
echo
echo "($("$BIN/farroctl" crawl export demo | wc -l) artifacts; bodies in $FARRO_SPOOL/crawls/demo/bodies/)"
