// Package testbrowser drives a real headless Chromium for end-to-end
// tests, over the DevTools protocol on a pipe (--remote-debugging-pipe:
// JSON messages separated by NUL bytes on file descriptors 3 and 4), so
// no port is opened and nothing but the standard library is needed.
package testbrowser

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Find returns the path of a Chromium or Chrome binary ($FARRO_CHROMIUM
// first), or "" when there is none.
func Find() string {
	if p := os.Getenv("FARRO_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Flags are the launch flags: headless, no sandbox (CI runs as root), and
// none of the background traffic that stalls Chromium on a closed network.
var Flags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-default-apps", "--disable-extensions", "--no-default-browser-check",
	"--hide-scrollbars", "--mute-audio", "--remote-debugging-pipe",
}

// Browser is a running Chromium.
type Browser struct {
	cmd     *exec.Cmd
	out     *os.File // our end of Chromium's command pipe
	timeout time.Duration

	mu      sync.Mutex
	nextID  int
	pending map[int]chan reply
	dead    error
	waitErr chan error
}

type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Start launches bin with a fresh profile in dir; log receives
// Chromium's stderr. Close stops it.
func Start(bin, dir string, log *os.File) (*Browser, error) {
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	args := append(append([]string{}, Flags...), "--user-data-dir="+filepath.Join(dir, "profile"), "--window-size=1280,900", "about:blank")
	cmd := exec.Command(bin, args...)
	cmd.ExtraFiles = []*os.File{cmdR, outW} // fds 3 (commands in) and 4 (messages out)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	cmdR.Close()
	outW.Close()
	b := &Browser{cmd: cmd, out: cmdW, timeout: 15 * time.Second, pending: map[int]chan reply{}, waitErr: make(chan error, 1)}
	go func() { b.waitErr <- cmd.Wait() }()
	go b.read(outR)
	if _, err := b.call("", "Browser.getVersion", nil); err != nil {
		b.Close()
		return nil, fmt.Errorf("chromium does not answer on its DevTools pipe: %w", err)
	}
	return b, nil
}

func (b *Browser) read(r *os.File) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.dead = fmt.Errorf("chromium closed its DevTools pipe: %v", err)
			for id, ch := range b.pending {
				close(ch)
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		var m struct {
			ID int `json:"id"`
			reply
		}
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == 0 {
			continue // an event: not used
		}
		b.mu.Lock()
		ch := b.pending[m.ID]
		delete(b.pending, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m.reply
		}
	}
}

// call sends one command (to a page's session when session is not "")
// and waits for its answer.
func (b *Browser) call(session, method string, params any) (json.RawMessage, error) {
	b.mu.Lock()
	if b.dead != nil {
		b.mu.Unlock()
		return nil, b.dead
	}
	b.nextID++
	id := b.nextID
	ch := make(chan reply, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	if _, err := b.out.Write(append(data, 0)); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("%s: %v", method, b.dead)
		}
		if r.Error != nil {
			return nil, fmt.Errorf("%s: %s (%d)", method, r.Error.Message, r.Error.Code)
		}
		return r.Result, nil
	case <-time.After(b.timeout):
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return nil, fmt.Errorf("%s: no answer within %s", method, b.timeout)
	}
}

// Close stops Chromium and every process it started (its process group).
func (b *Browser) Close() {
	_, _ = b.call("", "Browser.close", nil)
	select {
	case <-b.waitErr:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.waitErr
	}
	b.out.Close()
}

// Page is one tab, in its own browser context (its own cookies) when
// made by NewIsolatedPage.
type Page struct {
	b       *Browser
	session string
}

// NewPage opens a tab in the default browser context.
func (b *Browser) NewPage() (*Page, error) { return b.newPage("") }

// NewIsolatedPage opens a tab in a new browser context: no cookies shared
// with other pages (another person's browser).
func (b *Browser) NewIsolatedPage() (*Page, error) {
	res, err := b.call("", "Target.createBrowserContext", map[string]any{})
	if err != nil {
		return nil, err
	}
	var c struct {
		ID string `json:"browserContextId"`
	}
	if err := json.Unmarshal(res, &c); err != nil {
		return nil, err
	}
	return b.newPage(c.ID)
}

func (b *Browser) newPage(context string) (*Page, error) {
	params := map[string]any{"url": "about:blank"}
	if context != "" {
		params["browserContextId"] = context
	}
	res, err := b.call("", "Target.createTarget", params)
	if err != nil {
		return nil, err
	}
	var t struct {
		ID string `json:"targetId"`
	}
	if err := json.Unmarshal(res, &t); err != nil {
		return nil, err
	}
	res, err = b.call("", "Target.attachToTarget", map[string]any{"targetId": t.ID, "flatten": true})
	if err != nil {
		return nil, err
	}
	var s struct {
		ID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res, &s); err != nil {
		return nil, err
	}
	p := &Page{b: b, session: s.ID}
	if _, err := b.call(s.ID, "Page.enable", nil); err != nil {
		return nil, err
	}
	if _, err := b.call(s.ID, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}); err != nil {
		return nil, err
	}
	return p, nil
}

// Eval evaluates a JavaScript expression in the page and stores its
// (JSON) value in out, unless out is nil.
func (p *Page) Eval(expr string, out any) error {
	res, err := p.b.call(p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true})
	if err != nil {
		return err
	}
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return err
	}
	if r.Exception != nil {
		return fmt.Errorf("evaluating %q: %s %s", expr, r.Exception.Text, r.Exception.Exception.Description)
	}
	if out == nil || len(r.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
}

// Navigate loads url and waits for the new document to be complete.
func (p *Page) Navigate(url string) error {
	return p.loading(func() error {
		_, err := p.b.call(p.session, "Page.navigate", map[string]any{"url": url})
		return err
	})
}

// Click clicks the element matched by a CSS selector and waits for the
// document it leads to (a link, a form's submit button).
func (p *Page) Click(selector string) error {
	return p.loading(func() error {
		var found bool
		if err := p.Eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true })()`, selector), &found); err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("no element matches %s", selector)
		}
		return nil
	})
}

// loading marks the current document, runs act, and waits until another
// document has replaced it and finished loading.
func (p *Page) loading(act func() error) error {
	if err := p.Eval(`window.__farroOld = true`, nil); err != nil {
		return err
	}
	if err := act(); err != nil {
		return err
	}
	deadline := time.Now().Add(p.b.timeout)
	for {
		var ready bool
		err := p.Eval(`window.__farroOld !== true && document.readyState === "complete"`, &ready)
		if err == nil && ready {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the page did not load within " + p.b.timeout.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Text returns the textContent of the first element matching selector
// ("" when none does).
func (p *Page) Text(selector string) (string, error) {
	var s string
	err := p.Eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.textContent : "" })()`, selector), &s)
	return s, err
}

// Table returns the cells' text of the rows matched by a selector.
func (p *Page) Table(rowSelector string) ([][]string, error) {
	var rows [][]string
	err := p.Eval(fmt.Sprintf(`[...document.querySelectorAll(%q)].map(r => [...r.cells].map(c => c.textContent.trim()))`, rowSelector), &rows)
	return rows, err
}

// SetValue sets the value of the input matched by selector, as typing would.
func (p *Page) SetValue(selector, value string) error {
	var ok bool
	if err := p.Eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.value = %q; return true })()`, selector, value), &ok); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no element matches %s", selector)
	}
	return nil
}

// Screenshot saves the whole page (not only the window) as a PNG.
func (p *Page) Screenshot(path string) error {
	var h int
	if err := p.Eval(`Math.ceil(Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0))`, &h); err != nil {
		return err
	}
	h = min(max(h, 200), 4000)
	res, err := p.b.call(p.session, "Page.captureScreenshot", map[string]any{
		"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": 1280, "height": h, "scale": 1},
	})
	if err != nil {
		return err
	}
	var r struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return err
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}

// URL is the page's current address.
func (p *Page) URL() (string, error) {
	var u string
	err := p.Eval(`location.href`, &u)
	return u, err
}

// HasText reports whether the page's visible text contains s.
func (p *Page) HasText(s string) (bool, error) {
	var ok bool
	err := p.Eval(fmt.Sprintf(`document.body.innerText.includes(%q)`, s), &ok)
	return ok, err
}
