package crawl

// MaxReferrerBytes bounds the referrer (the page a URL was found on)
// recorded with each queue entry, in-flight job and outcome line: a page
// URL has no length limit of its own, and it is copied once per link.
const MaxReferrerBytes = 2048

// referrerCut ends a referrer cut at MaxReferrerBytes.
const referrerCut = "..."

// BoundReferrer returns from, cut to at most MaxReferrerBytes (ending in
// "...") when longer. Normalized URLs are ASCII, so the cut never splits
// a character.
func BoundReferrer(from string) string {
	if len(from) <= MaxReferrerBytes {
		return from
	}
	return from[:MaxReferrerBytes-len(referrerCut)] + referrerCut
}
