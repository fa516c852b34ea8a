package crawl

import (
	"fmt"

	"github.com/farro-dev/farro/internal/robots"
	"github.com/farro-dev/farro/pkg/fsq"
)

// LoadRobots builds the rules of a stored robots.txt verdict: allow all,
// disallow all, or the parsed body kept in bodies/.
func (st *Store) LoadRobots(verdict string, bodySHA string) (*robots.Robots, error) {
	switch verdict {
	case RobotsAllowAll:
		return robots.AllowAll(), nil
	case RobotsDisallowAll:
		return robots.DisallowAll(), nil
	case RobotsRules:
		body, err := fsq.ReadFileCapped(st.BodyPath(bodySHA), MaxBodyFileSize)
		if err != nil {
			return nil, fmt.Errorf("robots.txt body %s: %w", bodySHA, err)
		}
		return robots.Parse(body), nil
	}
	return nil, fmt.Errorf("robots verdict %q unknown", verdict)
}

// DescribeRule renders the rule that decided a robots.txt check, e.g.
// "Disallow: /private (line 3)".
func DescribeRule(r *robots.Rule, verdict string) string {
	if r == nil {
		if verdict == RobotsDisallowAll {
			return "robots.txt unreachable: disallow all"
		}
		return "no matching rule"
	}
	kind := "Disallow"
	if r.Allow {
		kind = "Allow"
	}
	if r.Line == 0 {
		if verdict == RobotsDisallowAll {
			return "robots.txt unreachable (5xx, 429 or network failure): disallow all"
		}
		return kind + ": " + r.Pattern
	}
	return fmt.Sprintf("%s: %s (line %d)", kind, r.Pattern, r.Line)
}
