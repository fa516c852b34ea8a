package fetch

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/crawl"
)

func TestExtractImages(t *testing.T) {
	t.Parallel()
	page := "http://h.test/dir/page.html"
	for _, c := range []struct {
		name, html string
		want       []string
	}{
		{"img src, relative and absolute", `<img src="a.png"><img src="/b.jpg"><img src="//cdn.test/c.gif"><img src="http://o.test/d.png">`,
			[]string{"http://h.test/dir/a.png", "http://h.test/b.jpg", "http://cdn.test/c.gif", "http://o.test/d.png"}},
		{"srcset with descriptors", `<img src="s.jpg" srcset="s-480.jpg 480w, s-800.jpg 800w,s-1x.jpg 1x, s-2x.jpg   2x">`,
			[]string{"http://h.test/dir/s.jpg", "http://h.test/dir/s-480.jpg", "http://h.test/dir/s-800.jpg", "http://h.test/dir/s-1x.jpg", "http://h.test/dir/s-2x.jpg"}},
		{"srcset without descriptors, commas ending URLs", `<img srcset="x.png, y.png 2x">`,
			[]string{"http://h.test/dir/x.png", "http://h.test/dir/y.png"}},
		// As browsers parse it: a URL runs to whitespace, commas included.
		{"srcset comma inside a URL", `<img srcset="x.png,y.png 2x">`, []string{"http://h.test/dir/x.png,y.png"}},
		{"picture and source", `<picture><source srcset="/p-wide.webp 1200w, /p-narrow.webp 600w" media="(min-width: 800px)"><source srcset="/p.avif" type="image/avif"><img src="/p.jpg"></picture>`,
			[]string{"http://h.test/p-wide.webp", "http://h.test/p-narrow.webp", "http://h.test/p.avif", "http://h.test/p.jpg"}},
		{"source outside picture is not an image", `<video><source src="/v.mp4" srcset="/v.png"></video><audio><source src="/a.mp3"></audio>`, nil},
		{"duplicates once", `<img src="/a.png"><img src="a.png" srcset="/dir/a.png 2x"><img src="http://H.test/dir/a.png"><img src="/dir/./a.png">`,
			[]string{"http://h.test/a.png", "http://h.test/dir/a.png"}},
		{"data URLs and other schemes not counted", `<img src="data:image/png;base64,iVBORw0KGgo="><img src="DATA:image/gif;base64,R0lG">
			<img srcset="data:image/gif;base64,R0lGOD,lh 1x, /real.png 2x"><img src="javascript:x()"><img src="ftp://h.test/f.png"><img src=""><img src="  ">`,
			[]string{"http://h.test/real.png"}},
		{"base href", `<head><base href="/static/"></head><img src="i.png" srcset="j.png 2x">`,
			[]string{"http://h.test/static/i.png", "http://h.test/static/j.png"}},
		{"links are not images", `<a href="/x.png">x</a><link rel="icon" href="/fav.ico"><script src="/s.js"></script>`, nil},
	} {
		got, found := ExtractImages(page, []byte(c.html), crawl.MaxPageImages)
		if !reflect.DeepEqual(got, c.want) || found != len(c.want) {
			t.Errorf("%s: %q (found %d), want %q", c.name, got, found, c.want)
		}
	}
}

// TestExtractImagesCap: a page with more distinct images than the cap
// counts them all in images_found and lists only the first ones.
func TestExtractImagesCap(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := 0; i < crawl.MaxPageImages+50; i++ {
		fmt.Fprintf(&b, `<img src="/i/%d.png"><img src="/i/%d.png">`, i, i)
	}
	r := extractRequisites("http://h.test/", []byte(b.String()), crawl.MaxPageImages, false, false)
	if r.ImagesFound != crawl.MaxPageImages+50 || len(r.Images) != crawl.MaxPageImages || !r.ImagesTruncated {
		t.Fatalf("found %d, listed %d, truncated %v", r.ImagesFound, len(r.Images), r.ImagesTruncated)
	}
	if r.Images[0] != "http://h.test/i/0.png" || r.Images[crawl.MaxPageImages-1] != fmt.Sprintf("http://h.test/i/%d.png", crawl.MaxPageImages-1) {
		t.Errorf("not the first images in document order: %s ... %s", r.Images[0], r.Images[len(r.Images)-1])
	}
	small := extractRequisites("http://h.test/", []byte(`<img src="/a.png">`), crawl.MaxPageImages, false, false)
	if small.ImagesTruncated {
		t.Error("a page under the cap is marked truncated")
	}
}

// TestExtractRequisites: stylesheets and scripts only when asked for.
func TestExtractRequisites(t *testing.T) {
	t.Parallel()
	html := []byte(`<link rel="stylesheet" href="/a.css"><link rel="Alternate Stylesheet" href="b.css"><link rel="icon" href="/i.ico">
		<script src="/s.js"></script><script>inline()</script><script src="data:text/javascript,1"></script><img src="/i.png">`)
	none := extractRequisites("http://h.test/", html, crawl.MaxPageImages, false, false)
	if none.Stylesheets != nil || none.Scripts != nil || none.ImagesFound != 1 {
		t.Errorf("not asked: %+v", none)
	}
	both := extractRequisites("http://h.test/", html, crawl.MaxPageImages, true, true)
	if !reflect.DeepEqual(both.Stylesheets, []string{"http://h.test/a.css", "http://h.test/b.css"}) || !reflect.DeepEqual(both.Scripts, []string{"http://h.test/s.js"}) {
		t.Errorf("asked: %+v", both)
	}
}

func TestSrcsetURLs(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"":                             nil,
		"  ,, ":                        nil,
		"a.png":                        {"a.png"},
		"a.png 1x,b.png 2x":            {"a.png", "b.png"},
		"a.png 100w (x, y), b.png 2x":  {"a.png", "b.png"},
		"a.png,, b.png":                {"a.png", "b.png"},
		"\ta.png\n1x,\nb.png\t200w  ,": {"a.png", "b.png"},
	} {
		if got := SrcsetURLs(in); !reflect.DeepEqual(got, want) {
			t.Errorf("SrcsetURLs(%q) = %q, want %q", in, got, want)
		}
	}
}
