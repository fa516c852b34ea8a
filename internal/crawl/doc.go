// Package crawl is the durable model of a crawl: its configuration and
// state (crawl.json), the domains it knows (seed 004's entities, with
// their legal-transitions map), the per-domain queues of discovered URLs,
// the job IDs and prompts of the URL and robots.txt jobs, the artifacts the
// fetcher leaves, the outcome log, and the locks that serialise the few
// writers. The frontier (internal/frontier, inside managerd), the fetcher
// (internal/fetch, inside agentd) and farroctl (internal/ctl) share it.
//
// Everything of a crawl lives below the spool, in crawls/<name>/:
//
//	crawl.json              configuration and state (running, paused,
//	                        cancelled, done); written atomically, under
//	                        crawl.lock, by farroctl and the frontier
//	crawl.lock              flock(2) serialising crawl.json's writers and
//	                        the frontier's releases (shared)
//	frontier.lock           flock(2) held by the one frontier driving the
//	                        crawl; its content names the holder
//	frontier.json           the frontier's own progress (seeds ingested)
//	domains/<domain>.json   one entity per canonical domain: status,
//	                        counters, cooldowns, robots cache, in-flight
//	                        jobs and the cursors of its queue
//	queues/<domain>/<depth>_<priority>.jsonl
//	                        append-only queue segments of discovered URLs
//	seen/<xxx>              the seen-set: 4096 buckets of 8-byte URL hashes
//	deep/<xxx>              hashes of URLs found only beyond max_depth
//	outcomes.jsonl          one line per URL finished (fetched, failed,
//	                        robots-denied, ...), appended by the frontier
//	links.jsonl             one line per ingested job that found links:
//	                        how they fared (recount.go)
//	requests/<ts>-<op>.json operator requests the frontier applies (domain
//	                        reset)
//	bodies/<ab>/<sha256>    response bodies, content-addressed, written
//	                        by the fetcher
//	gates/                  no longer used (crawls made by older versions
//	                        kept their own politeness gates there; the
//	                        spool's politeness/ is the one gate now)
//
// Every URL to fetch is a job of kind crawl.fetch whose ID is derived from
// the crawl and the normalized URL (FetchJobID), so a URL can be released
// at most once, whatever the frontier forgets in a crash: the spool refuses
// a second job with the same ID in any state.
package crawl
