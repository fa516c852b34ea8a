// Package seamcheck reads a package's own source for its tests, to keep
// the store seam the only door to jobs (docs/ARCHITECTURE.md, "Who uses
// the seam today"): the source tests of internal/frontier,
// internal/manager and internal/watchdog.
package seamcheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// JobPath is pkg/job's import path.
const JobPath = "github.com/farro-dev/farro/pkg/job"

// File is one non-test Go file of the package under test, parsed.
type File struct {
	Fset   *token.FileSet
	Name   string
	AST    *ast.File
	JobPkg string // the name it imports pkg/job under; "" when it does not
}

// Each calls fn with every non-test Go file of the working directory (a
// test's: its package's), and fails t when it read fewer than min (what
// names the package in the message).
func Each(t testing.TB, what string, min int, fn func(File)) {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		file := File{Fset: fset, Name: name, AST: f}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == JobPath {
				file.JobPkg = "job"
				if imp.Name != nil {
					file.JobPkg = imp.Name.Name
				}
			}
		}
		fn(file)
	}
	if checked < min {
		t.Fatalf("checked %d files of %s, want all of them", checked, what)
	}
}

// SpoolStoreOnly says what a daemon's engine that reaches jobs only
// through the spool store may still do.
type SpoolStoreOnly struct {
	JobFuncs  map[string]bool // functions of pkg/job it may call: pure ones, touching no file
	OSAllowed map[string]bool // files that may import os (for files that are not jobs)
	MinFiles  int             // how many non-test files the package has at least
}

// Check fails t for every file of the working directory's package that
// imports pkg/fsq, or os (but those of r.OSAllowed), names job.Spool,
// asks a store for the spool behind it (Spool()), or calls a function of
// pkg/job but those of r.JobFuncs.
func (r SpoolStoreOnly) Check(t testing.TB, what string) {
	t.Helper()
	Each(t, what, r.MinFiles, func(f File) {
		for _, imp := range f.AST.Imports {
			switch p, _ := strconv.Unquote(imp.Path.Value); p {
			case "github.com/farro-dev/farro/pkg/fsq":
				t.Errorf("%s: imports pkg/fsq: the spool is reached through the spool store", f.Fset.Position(imp.Pos()))
			case "os":
				if !r.OSAllowed[f.Name] {
					t.Errorf("%s: imports os: the spool's files are reached through the spool store", f.Fset.Position(imp.Pos()))
				}
			}
		}
		ast.Inspect(f.AST, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && f.JobPkg != "" && id.Name == f.JobPkg && n.Sel.Name == "Spool" {
					t.Errorf("%s: job.Spool: jobs are reached through the spool store", f.Fset.Position(n.Pos()))
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && f.JobPkg != "" && id.Name == f.JobPkg {
					if !r.JobFuncs[sel.Sel.Name] {
						t.Errorf("%s: calls job.%s: jobs are read and changed through the spool store", f.Fset.Position(n.Pos()), sel.Sel.Name)
					}
				} else if sel.Sel.Name == "Spool" {
					t.Errorf("%s: asks for the spool behind the store: jobs are reached through the store", f.Fset.Position(n.Pos()))
				}
			}
			return true
		})
	})
}
