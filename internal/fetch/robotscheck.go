package fetch

import (
	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/robots"
)

type parsedRobots struct {
	r *robots.Robots
}

// allowed checks pathAndQuery against the robots.txt the frontier released
// the URL under (parsed once per body and cached).
func (c *robotsCache) allowed(st *crawl.Store, ref *crawl.RobotsRef, ua, pathAndQuery string) (bool, string, error) {
	key := st.Name + "\x00" + ref.Verdict + "\x00" + ref.BodySHA256
	c.mu.Lock()
	p := c.m[key]
	c.mu.Unlock()
	if p == nil {
		r, err := st.LoadRobots(ref.Verdict, ref.BodySHA256)
		if err != nil {
			return false, "", err
		}
		p = &parsedRobots{r: r}
		c.mu.Lock()
		if c.m == nil || len(c.m) > 1024 {
			c.m = map[string]*parsedRobots{}
		}
		c.m[key] = p
		c.mu.Unlock()
	}
	ok, rule := p.r.Allowed(ua, pathAndQuery)
	return ok, crawl.DescribeRule(rule, ref.Verdict), nil
}
