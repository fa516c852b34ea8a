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
