package testsite

import (
	"bytes"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// HostImg is the images host: pages referencing images in every way the
// crawler counts (<img src>, srcset with descriptors, <picture>/<source>,
// duplicates, a data: URL, relative and absolute URLs), images of other
// hosts (a.site.test/shared.png, out of scope, robots-disallowed), an
// image that is missing and one that is HTML. Reached only when seeded:
// nothing links to it.
const HostImg = "img.site.test"

const robotsImg = `User-agent: *
Disallow: /img/private/
`

// pixels are small encoded images, made once.
var pixels = sync.OnceValue(func() map[string][]byte {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 200, A: 255})
	var p, j, g bytes.Buffer
	_ = png.Encode(&p, img)
	_ = jpeg.Encode(&j, img, nil)
	_ = gif.Encode(&g, img, nil)
	return map[string][]byte{"image/png": p.Bytes(), "image/jpeg": j.Bytes(), "image/gif": g.Bytes()}
})

// imageResponse answers an image of type ctype; variant makes bodies
// differ (each image is its own content).
func imageResponse(ctype, variant string) Response {
	body := append(append([]byte(nil), pixels()[ctype]...), variant...)
	return Response{Status: 200, Header: http.Header{"Content-Type": {ctype}}, Body: body}
}

// imagePage renders an HTML page of the images host: body is put in
// <body> as is; images are the image URLs (absolute or root-relative) a
// crawler must count on it, links its links.
func imagePage(title, body string, images, links []string) Response {
	r := page(title, "", links...)
	r.Body = bytes.Replace(r.Body, []byte("</h1>"), []byte("</h1>\n"+body), 1)
	r.Images = images
	return r
}

// imageSite answers the images host, and a.site.test/shared.png (an image
// of another domain the images host's pages reference); ok false for any
// other request.
func (s *Site) imageSite(host, path string) (Response, bool) {
	if host == HostA && path == "/shared.png" {
		return imageResponse("image/png", "shared"), true
	}
	if host != HostImg {
		return Response{}, false
	}
	port := strconv.Itoa(s.Port)
	shared := "http://" + HostA + ":" + port + "/shared.png"
	outside := "http://" + HostOut + ":" + port + "/logo.png"
	switch {
	case path == "/robots.txt":
		return text(200, "text/plain", robotsImg), true
	case path == "/":
		body := `<img src="/img/a.png" alt="a"><img src="img/a.png" alt="a again">
<img src="/img/b.jpg" srcset="/img/b-1x.jpg 1x, /img/b-2x.jpg 2x">
<picture><source srcset="/img/c.png 480w, /img/c-big.png 1080w" media="(min-width: 600px)"><img src="/img/c.jpg"></picture>
<img src="data:image/png;base64,iVBORw0KGgo=">
<img src="/img/private/p.png"><img src="` + outside + `"><img src="` + shared + `">
<img src="/img/missing.png"><img src="/img/fake.png">
`
		return imagePage("images", body, []string{"/img/a.png", "/img/b.jpg", "/img/b-1x.jpg", "/img/b-2x.jpg", "/img/c.png", "/img/c-big.png", "/img/c.jpg",
			"/img/private/p.png", outside, shared, "/img/missing.png", "/img/fake.png"}, []string{"/page2"}), true
	case path == "/page2":
		body := `<img src="/img/a.png"><img srcset="/img/d.gif, data:image/gif;base64,R0lGOD== 2x">
`
		return imagePage("page 2", body, []string{"/img/a.png", "/img/d.gif"}, []string{"/"}), true
	case path == "/img/fake.png":
		// HTML under an image's name, with a link a requisite must not
		// have followed.
		return page("not an image", "", "/img/trap"), true
	case strings.HasPrefix(path, "/img/"):
		switch {
		case strings.HasSuffix(path, ".png"):
			if path == "/img/missing.png" {
				return notFound(), true
			}
			return imageResponse("image/png", path), true
		case strings.HasSuffix(path, ".jpg"):
			return imageResponse("image/jpeg", path), true
		case strings.HasSuffix(path, ".gif"):
			return imageResponse("image/gif", path), true
		}
	}
	return notFound(), true
}

// IsImageType reports whether a response's Content-Type is image/*.
func (r Response) IsImageType() bool {
	return strings.HasPrefix(strings.ToLower(r.Header.Get("Content-Type")), "image/")
}
