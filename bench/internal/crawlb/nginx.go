package crawlb

import (
	"fmt"
	"os/exec"
	"strings"

	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/internal/realsite"
)

// EnsureTools installs nginx (nginx-light, else nginx) and wget from
// Debian's packages when they are missing.
func EnsureTools(logf func(string, ...any)) error {
	var missing []string
	if realsite.NginxBin() == "" {
		missing = append(missing, "nginx-light")
	}
	if _, err := exec.LookPath("wget"); err != nil {
		missing = append(missing, "wget")
	}
	if len(missing) == 0 {
		return nil
	}
	if err := sys.AptInstall(logf, missing...); err != nil {
		if missing[0] != "nginx-light" {
			return err
		}
		// nginx-light is gone from newer Debian releases: plain nginx.
		missing[0] = "nginx"
		if err2 := sys.AptInstallNoUpdate(missing...); err2 != nil {
			return fmt.Errorf("%v; then %v", err, err2)
		}
	}
	if realsite.NginxBin() == "" {
		return fmt.Errorf("nginx installed but not found in PATH or /usr/sbin")
	}
	return nil
}

func tailStr(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// StartNginx serves the generated site at root with a private nginx
// (internal/realsite's, with the site's own robots.txt and text/html for
// its extensionless pages), its configuration and logs under dir.
func StartNginx(dir, root string) (*realsite.Server, error) {
	return realsite.Start(dir, root, realsite.TreeRobots(), realsite.DefaultType("text/html"))
}

// LogStats are the figures of one tool's run from the access log.
type LogStats struct {
	Requests   int // all requests
	Pages      int // distinct /p/ URIs answered 200
	Duplicates int // requests of a /p/ URI beyond its first
	Other      int // requests outside /p/ (robots.txt, ...)
	Non200     int // /p/ requests not answered 200
}

// Stats counts the log's requests.
func Stats(es []realsite.Request) LogStats {
	var s LogStats
	seen := map[string]bool{}
	for _, e := range es {
		s.Requests++
		if !strings.HasPrefix(e.URI, "/p/") {
			s.Other++
			continue
		}
		if e.Status != 200 {
			s.Non200++
		}
		if seen[e.URI] {
			s.Duplicates++
			continue
		}
		seen[e.URI] = true
		if e.Status == 200 {
			s.Pages++
		}
	}
	return s
}
