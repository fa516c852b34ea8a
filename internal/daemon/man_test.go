package daemon

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// Text is escaped for roff, never interpreted: a leading dot, a
// backslash and minus signs survive; "<id>" stays; defaults render short.
func TestWriteManEscapesAndDefaults(t *testing.T) {
	app := App("testd", "a test daemon", []cli.Flag{
		&cli.StringFlag{Name: "id", Usage: "names in-progress/<id>/ and C:\\dir"},
		&cli.IntFlag{Name: "n", Value: 3, Usage: "count"},
		&cli.DurationFlag{Name: "every", Value: 500 * time.Millisecond, Usage: "period, a `DURATION`"},
		&cli.DurationFlag{Name: "max-age", Value: time.Hour, Usage: "age"},
	}, func(*cli.Context) error { return nil })
	app.Description = "first\n.TH not a request\n'neither"
	var out bytes.Buffer
	if err := WriteMan(&out, app); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	for _, want := range []string{
		"names in\\-progress/<id>/ and C:\\edir", "\n\\&.TH not a request\n", "\n\\&'neither\n",
		"(default: 3)", "(default: 500ms)", "(default: 1h)", "\\fB\\-\\-every\\fP \\fIDURATION\\fP",
		"period, a \\fIDURATION\\fP", ".SH EXIT STATUS\n", ".B 150\n", ".B 152\n", ".SH SIGNALS\n", ".SH FILES\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("man page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "\n.TH not") {
		t.Error("a description line became a request")
	}
}

// A packaged build (DocDir, EnvFile set by -ldflags) names the installed
// documents and environment file in --help and the man page.
func TestPackagedPaths(t *testing.T) {
	defer func(d, e string) { DocDir, EnvFile = d, e }(DocDir, EnvFile)
	if got := DocPath("docs/FARROCTL.md"); got != "docs/FARROCTL.md" {
		t.Errorf("source build: DocPath = %q", got)
	}
	DocDir, EnvFile = "/usr/share/doc/farro", "/etc/farro/farro.env"
	if got := DocPath("docs/FARROCTL.md"); got != "/usr/share/doc/farro/docs/FARROCTL.md.gz" {
		t.Errorf("packaged: DocPath = %q", got)
	}
	app := App("testd", "a test daemon", nil, func(*cli.Context) error { return nil })
	AddExit(app, 151, "own status: details")
	for _, want := range []string{"/etc/farro/farro.env", "/usr/share/doc/farro/README.md.gz", "151 own status;", "150 already running"} {
		if !strings.Contains(app.Description, want) {
			t.Errorf("--help's description lacks %q:\n%s", want, app.Description)
		}
	}
	var out bytes.Buffer
	if err := WriteMan(&out, app); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "/usr/share/doc/farro/docs/FARROCTL.md.gz") || !strings.Contains(out.String(), ".B 151\nown status: details") {
		t.Errorf("man page:\n%s", out.String())
	}
}
