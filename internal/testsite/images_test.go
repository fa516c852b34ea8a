package testsite

import (
	"bytes"
	"image"
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"
	"io"
	"net/http"
	"testing"
)

// TestImagesHost: the images host serves decodable PNG, JPEG and GIF
// images under image/* types, and Expected fetches its pages' images
// (once each, at their page's depth, robots.txt and scope obeyed, an
// "image" that is HTML not followed) only when the crawl fetches images.
func TestImagesHost(t *testing.T) {
	t.Parallel()
	s := Start(Options{})
	defer s.Close()
	for path, ctype := range map[string]string{"/img/a.png": "image/png", "/img/b.jpg": "image/jpeg", "/img/d.gif": "image/gif"} {
		req, _ := http.NewRequest(http.MethodGet, s.Server.URL+path, nil)
		req.Host = HostImg
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ctype {
			t.Errorf("%s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if _, format, err := image.Decode(bytes.NewReader(body)); err != nil || "image/"+format != ctype {
			t.Errorf("%s: not a %s image: %s %v", path, ctype, format, err)
		}
	}
	seed := s.URL(HostImg, "/")
	without := s.Expected(ExpectOptions{Seeds: []string{seed}, MaxDepth: 3, UserAgent: UserAgent, ObeyRobots: true})
	with := s.Expected(ExpectOptions{Seeds: []string{seed}, MaxDepth: 3, UserAgent: UserAgent, ObeyRobots: true, Images: true})
	if len(without.Images) != 0 || len(without.Fetched) != 2 || without.ImagesFound[HostImg] != 14 || without.ImagesStored[HostImg] != 0 {
		t.Errorf("without images: fetched %v, images %v, found %v", without.Fetched, without.Images, without.ImagesFound)
	}
	if len(with.Images) != 11 || len(with.Fetched) != 13 || with.ImagesFound[HostImg] != 14 || with.ImagesStored[HostImg] != 9 {
		t.Errorf("with images: fetched %v, images %v, found %v, stored %v", with.Fetched, with.Images, with.ImagesFound, with.ImagesStored)
	}
	if !with.Images[HostA+"/shared.png"] || !with.Denied[HostImg+"/img/private/p.png"] || with.Fetched[HostImg+"/img/trap"] ||
		!with.Outside[HostOut+"/logo.png"] || with.Depth[HostImg+"/img/d.gif"] != 1 || with.Depth[HostImg+"/img/a.png"] != 0 {
		t.Errorf("with images: fetched %v, denied %v, outside %v, depth %v", with.Fetched, with.Denied, with.Outside, with.Depth)
	}
}
