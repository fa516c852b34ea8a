package crawl

// Caps of the reads of the crawl's files (fsq.ReadFileCapped). Like every
// read of the spool, they bound what a file planted there (or grown by a
// bug) can make a daemon load; a file over its cap is refused with
// fsq.ErrTooLarge. They sit far above what farro itself writes, so that a
// legitimate file is never refused.
const (
	// MaxConfigFileSize caps crawl.json, whose bulk is the seed list.
	MaxConfigFileSize = 16 << 20
	// MaxStateFileSize caps domains/<domain>.json (its queue segment list
	// grows with the domain) and frontier.json (counters).
	MaxStateFileSize = 64 << 20
	// MaxResultFileSize caps a fetch's result.json: at most MaxLinks
	// (internal/fetch) links found in a body of at most the crawl's
	// max_body_bytes (10 MiB by default), plus a few headers.
	MaxResultFileSize = 64 << 20
	// MaxBodyFileSize caps a stored body read back (robots.txt bodies):
	// bodies are stored truncated at max_body_bytes, or at robots.MaxBytes
	// (512 KiB) and the crawl's limit for a robots.txt. 64 MiB is generous
	// for any sensible max_body_bytes and still bounds the memory a body
	// file planted in bodies/ can take.
	MaxBodyFileSize = 64 << 20
	// MaxRequestFileSize caps an operator request in requests/ (a few
	// fields).
	MaxRequestFileSize = 64 << 10
)
