package job

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// IDPattern is the pattern job IDs match, for messages.
const IDPattern = `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`

// matchName reports whether s is a first byte for which first is true,
// then up to max-1 bytes for which rest is true. It is the ID and kind
// check without a regexp, which costs a compile of a large program at
// every process start and is slower per call on the claim path.
func matchName(s string, max int, first, rest func(c byte) bool) bool {
	if len(s) == 0 || len(s) > max || !first(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !rest(s[i]) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isIDByte(c byte) bool { return isAlnum(c) || c == '.' || c == '_' || c == '-' }

// ValidateID checks that id is safe to use as a directory name: a letter or
// digit, then up to 127 of letters, digits, '.', '_' and '-', and no
// ".lock" suffix (that name belongs to the claim lock). "/" and ".." can
// therefore never appear.
func ValidateID(id string) error {
	if !matchName(id, 128, isAlnum, isIDByte) {
		return fmt.Errorf("invalid job id %q: must match %s", id, IDPattern)
	}
	if strings.HasSuffix(id, ".lock") {
		return fmt.Errorf("invalid job id %q: the .lock suffix is reserved", id)
	}
	return nil
}

// NewID returns a fresh job ID that sorts by creation time, e.g.
// 20261121T114512.123456Z-9f3a1c.
func NewID() string {
	return time.Now().UTC().Format("20060102T150405.000000Z") + "-" + randHex(3)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// IDTime is the creation time a NewID id carries (to the microsecond,
// never after the job's created_at); ok is false for an id of another
// form. It reads the name alone: agentd orders a default-priority job by
// it before reading its job.json.
func IDTime(id string) (t time.Time, ok bool) {
	// 20261121T114512.123456Z-...
	if len(id) < 24 || id[8] != 'T' || id[15] != '.' || id[22] != 'Z' || id[23] != '-' {
		return time.Time{}, false
	}
	num := func(from, to int) (int, bool) {
		n := 0
		for i := from; i < to; i++ {
			c := id[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	var v [7]int
	for i, r := range [7][2]int{{0, 4}, {4, 6}, {6, 8}, {9, 11}, {11, 13}, {13, 15}, {16, 22}} {
		n, ok := num(r[0], r[1])
		if !ok {
			return time.Time{}, false
		}
		v[i] = n
	}
	if v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[3] > 23 || v[4] > 59 || v[5] > 60 {
		return time.Time{}, false
	}
	return time.Date(v[0], time.Month(v[1]), v[2], v[3], v[4], v[5], v[6]*1000, time.UTC), true
}
