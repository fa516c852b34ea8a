package job

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidateID checks that id is safe to use as a directory name: a letter or
// digit, then up to 127 of letters, digits, '.', '_' and '-', and no
// ".lock" suffix (that name belongs to the claim lock). "/" and ".." can
// therefore never appear.
func ValidateID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("invalid job id %q: must match %s", id, idPattern)
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
