package watchdog

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// jobFuncs are the functions of pkg/job the watchdog may call: they
// compute, and never touch the spool (what an ID may be, how a lock's
// holder is judged from what its owner file said, the reason a silent
// holder's recovery records).
var jobFuncs = map[string]bool{"ValidateID": true, "JudgeHolder": true, "SilentReason": true}

// osAllowed are the files that may import the os package: shared.go
// removes this host's unreadable handler records (internal/localrun's
// files under the local directory, not jobs); its jobs are reached
// through store.Store.
var osAllowed = map[string]bool{"shared.go": true}

// TestNoJobDoorButTheStore reads the watchdog's source: its spool engine
// reaches jobs through the spool store (*spoolstore.Store) only, and its
// shared engine (shared.go) through store.Store. No file imports pkg/fsq
// (no watch, listing or sweep of the spool's directories is made here),
// nor the os package but those of osAllowed (no path of the spool is
// opened, listed or lstat'ed here), no value of type job.Spool is named,
// the store is never asked for the spool behind it (Spool()), and no
// function of pkg/job is called but the pure ones of jobFuncs (no
// ReadJob, no ReadLockHolder: a job and a lock's holder are read through
// the store).
func TestNoJobDoorButTheStore(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		jobPkg := ""
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch p {
			case "github.com/farro-dev/farro/pkg/fsq":
				t.Errorf("%s: imports pkg/fsq: the spool is reached through the spool store", fset.Position(imp.Pos()))
			case "os":
				if !osAllowed[name] {
					t.Errorf("%s: imports os: the spool's files are reached through the spool store", fset.Position(imp.Pos()))
				}
			case "github.com/farro-dev/farro/pkg/job":
				jobPkg = "job"
				if imp.Name != nil {
					jobPkg = imp.Name.Name
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && jobPkg != "" && id.Name == jobPkg && n.Sel.Name == "Spool" {
					t.Errorf("%s: job.Spool: jobs are reached through the spool store", fset.Position(n.Pos()))
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && jobPkg != "" && id.Name == jobPkg {
					if !jobFuncs[sel.Sel.Name] {
						t.Errorf("%s: calls job.%s: jobs are read and changed through the spool store", fset.Position(n.Pos()), sel.Sel.Name)
					}
				} else if sel.Sel.Name == "Spool" {
					t.Errorf("%s: asks for the spool behind the store: jobs are reached through the store", fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	if checked < 5 {
		t.Fatalf("checked %d files of the watchdog, want all of them", checked)
	}
}
