package ctl

import (
	"fmt"
	"strings"

	"github.com/farro-dev/farro/internal/crawl"
)

// WhyFiltered: a URL filter dropped the URL when it was found, or the
// content-type filter left its body out.
const WhyFiltered = "filtered"

// filterWhy answers for a URL the crawl's URL filters reject (seeds are
// exempt); it returns false when no filter decided.
func filterWhy(a *WhyAnswer, cr *crawl.Crawl, u string) bool {
	for _, s := range cr.Seeds {
		if s.URL == u {
			return false
		}
	}
	uf, err := crawl.NewURLFilter(cr.Filters, cr.Normalize.Options())
	if err != nil {
		a.Verdict, a.Message = WhyInvalid, "the crawl's URL filters do not compile: "+err.Error()
		return true
	}
	if ok, reason := uf.Allowed(u); !ok {
		a.Verdict, a.Message = WhyFiltered, "filtered: "+reason+" (links to it are dropped when found)"
		return true
	}
	return false
}

// artifactWhy answers for a fetched URL whose artifact says a filter or
// the page's robots directives decided something; false otherwise.
func artifactWhy(a *WhyAnswer, art *crawl.Artifact, jobID string) bool {
	at := art.FetchedAt.Format(whyTimeLayout)
	switch {
	case art.Outcome == crawl.OutcomeFetched && art.ErrorCode == crawl.ErrCodeContentType:
		a.Verdict, a.Message = WhyFiltered, fmt.Sprintf("filtered: http_status %d at %s, %s (job %s)", art.HTTPStatus, at, art.Error, jobID)
	case art.Outcome == crawl.OutcomeFetched && (art.Noindex || art.Nofollow || art.NofollowLinks > 0):
		a.Verdict, a.Message = WhyDone, fmt.Sprintf("done: http_status %d, fetched at %s in %d ms, %d links; %s (job %s)",
			art.HTTPStatus, at, art.DurationMS, len(art.Links), directivesNote(art.PageDirectives), jobID)
	default:
		return false
	}
	return true
}

// outcomeWhy is artifactWhy for a URL known only from the outcome log.
func outcomeWhy(a *WhyAnswer, o *crawl.Outcome, jobID string) bool {
	if o.Outcome != crawl.OutcomeFetched {
		return false
	}
	at := o.Time.Format(whyTimeLayout)
	switch {
	case strings.Contains(o.Detail, "not in the crawl's content types"):
		a.Verdict, a.Message = WhyFiltered, fmt.Sprintf("filtered: http_status %d at %s, %s (job %s no longer in the spool)", o.HTTPStatus, at, o.Detail, jobID)
	case o.Noindex || o.Nofollow || o.NofollowLinks > 0:
		a.Verdict, a.Message = WhyDone, fmt.Sprintf("done: fetched, http_status %d, at %s; %s (job %s no longer in the spool)", o.HTTPStatus, at, directivesNote(o.PageDirectives), jobID)
	default:
		return false
	}
	return true
}

func directivesNote(d crawl.PageDirectives) string {
	var parts []string
	if d.Nofollow {
		parts = append(parts, "nofollow: its links were not followed")
	}
	if d.Noindex {
		parts = append(parts, "noindex: archived, marked not to be indexed")
	}
	if d.RobotsDirectives != "" {
		parts = append(parts, "robots directives "+d.RobotsDirectives)
	}
	if d.NofollowLinks > 0 {
		parts = append(parts, fmt.Sprintf("%d rel=nofollow links not followed", d.NofollowLinks))
	}
	return strings.Join(parts, "; ")
}
