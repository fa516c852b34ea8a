package crawl

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
)

// Job kinds of a crawl.
const (
	KindFetch  = "crawl.fetch"  // fetch one URL
	KindRobots = "crawl.robots" // fetch one origin's robots.txt
)

// URLHash is the identity hash of a normalized URL: its SHA-256.
func URLHash(normalized string) [32]byte { return sha256.Sum256([]byte(normalized)) }

// URLKey is the first 8 bytes of URLHash, the seen-set's key.
func URLKey(normalized string) uint64 {
	h := URLHash(normalized)
	return binary.BigEndian.Uint64(h[:8])
}

// FetchJobID is the ID of the job that fetches normalized URL u in crawl
// name: "c-<name>-<first 24 hex digits of sha256(u)>". Deterministic, so
// that the spool refuses a second release of one URL in any state.
func FetchJobID(name, u string) string {
	h := URLHash(u)
	return "c-" + name + "-" + hex.EncodeToString(h[:12])
}

// RoundJobID is the ID of the job that fetches u in refresh round round
// of its domain: FetchJobID for round 0, FetchJobID + "." + round after.
// Crawl names have no '.', so the suffix never makes another crawl's ID.
func RoundJobID(name, u string, round int) string {
	if round <= 0 {
		return FetchJobID(name, u)
	}
	return FetchJobID(name, u) + "." + strconv.Itoa(round)
}

// RobotsJobID is the ID of the gen-th fetch of origin's robots.txt in crawl
// name: "r-<name>-<first 16 hex digits of sha256(origin)>-<gen>".
func RobotsJobID(name, origin string, gen int) string {
	h := sha256.Sum256([]byte(origin))
	return "r-" + name + "-" + hex.EncodeToString(h[:8]) + "-" + strconv.Itoa(gen)
}

// ParseJobID tells whether id is a crawl job and of which kind and crawl.
func ParseJobID(id string) (kind, name string, ok bool) {
	switch {
	case strings.HasPrefix(id, "c-"):
		rest, ok := stripTry(id[2:])
		if !ok {
			return "", "", false
		}
		if i := strings.LastIndexByte(rest, '.'); i >= 0 {
			// A refresh round's suffix.
			if n, err := strconv.Atoi(rest[i+1:]); err != nil || n < 1 || rest[i+1] == '0' {
				return "", "", false
			}
			rest = rest[:i]
		}
		if len(rest) < 26 || rest[len(rest)-25] != '-' || !isHex(rest[len(rest)-24:]) {
			return "", "", false
		}
		name = rest[:len(rest)-25]
		kind = KindFetch
	case strings.HasPrefix(id, "r-"):
		rest := id[2:]
		i := strings.LastIndexByte(rest, '-')
		if i < 0 {
			return "", "", false
		}
		if _, err := strconv.Atoi(rest[i+1:]); err != nil {
			return "", "", false
		}
		rest = rest[:i]
		if len(rest) < 18 || rest[len(rest)-17] != '-' || !isHex(rest[len(rest)-16:]) {
			return "", "", false
		}
		name = rest[:len(rest)-17]
		kind = KindRobots
	default:
		return "", "", false
	}
	if ValidateName(name) != nil {
		return "", "", false
	}
	return kind, name, true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
