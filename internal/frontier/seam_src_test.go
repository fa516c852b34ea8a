package frontier

import (
	"go/ast"
	"testing"

	"github.com/farro-dev/farro/internal/seamcheck"
)

// TestNoJobDoorButTheStore reads the frontier's source: jobs are reached
// through Config.Store only. No function of pkg/job is called (ReadJob,
// Open, ...), no value of type *job.Spool is kept but Config.Spool (the
// home of the crawl's own files), and Config.Spool is only handed to
// internal/crawl or asked for a path of the crawl's (Path), never for a
// job (Locate, JobDir, StateDir, SubmitMany, Move, ...).
func TestNoJobDoorButTheStore(t *testing.T) {
	t.Parallel()
	seamcheck.Each(t, "the frontier", 10, func(f seamcheck.File) {
		fset, jobPkg := f.Fset, f.JobPkg
		spoolTypes := 0
		ast.Inspect(f.AST, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && jobPkg != "" && id.Name == jobPkg {
						t.Errorf("%s: calls job.%s: jobs are read and changed through the job store", fset.Position(n.Pos()), sel.Sel.Name)
					}
				}
			case *ast.StarExpr:
				if sel, ok := n.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Spool" {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == jobPkg {
						spoolTypes++
						if spoolTypes > 1 || f.Name != "frontier.go" {
							t.Errorf("%s: a *job.Spool besides Config.Spool", fset.Position(n.Pos()))
						}
					}
				}
			case *ast.SelectorExpr:
				// X.Spool.Method: only Path (a directory of the crawl's).
				if inner, ok := n.X.(*ast.SelectorExpr); ok && inner.Sel.Name == "Spool" && n.Sel.Name != "Path" {
					t.Errorf("%s: Spool.%s: jobs are reached through the job store, not the spool", fset.Position(n.Pos()), n.Sel.Name)
				}
			}
			return true
		})
	})
}
