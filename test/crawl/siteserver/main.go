// Command siteserver serves internal/testsite's generated site on
// 127.0.0.1 for crawl tests and the crawl demo (make crawl-demo). It prints
// "port=N" and one --resolve HOST:PORT:127.0.0.1 entry per host on stdout,
// then serves until killed, appending every request to --log as JSON Lines
// (host, uri, ua, start, end, status).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/farro-dev/farro/internal/testsite"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	logPath := flag.String("log", "", "append the access log to this file (JSON Lines)")
	plain := flag.Bool("plain", false, "a plain tree per host, without the special cases")
	fanout := flag.Int("fanout", 4, "links per page of a.site.test's tree (fewer further down)")
	levels := flag.Int("levels", 4, "depth of a.site.test's tree")
	extraHosts := flag.Int("extra-hosts", 0, "extra hosts t1.site.test .. tN.site.test")
	extraPages := flag.Int("extra-pages", 50, "pages of each extra host")
	tooSlow := flag.Duration("too-slow", 3*time.Second, "how long slow.site.test/ takes")
	flag.Parse()

	site := testsite.Serve(testsite.Options{Plain: *plain, Fanout: *fanout, Levels: *levels, ExtraHosts: *extraHosts,
		ExtraPages: *extraPages, TooSlowDelay: *tooSlow}, *addr)
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "siteserver:", err)
			os.Exit(1)
		}
		enc := json.NewEncoder(f)
		site.SetOnRequest(func(r testsite.Request) { _ = enc.Encode(r) })
	}
	fmt.Printf("port=%d\n", site.Port)
	for _, r := range site.Resolve() {
		fmt.Println(r)
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	<-ch
	site.Close()
}
