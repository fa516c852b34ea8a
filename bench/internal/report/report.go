// Package report collects the benchmark's figures into sections of rows,
// one column per filesystem, and renders them as a plain-text table.
package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Report is the whole output of one benchmark run.
type Report struct {
	Header   []string // free lines printed first (machine, filesystems)
	Cols     []string // column keys, e.g. "root", "journal"
	ColTitle map[string]string
	Sections []*Section
	Goals    []Goal
	Notes    []string

	nums map[string]map[string]float64 // row key -> column -> value
}

// Section is a titled group of rows.
type Section struct {
	Title string
	Cols  []string // own columns (nil: the report's)
	Rows  []*Row
	r     *Report
}

// Row is one figure across the columns.
type Row struct {
	Key, Label string
	Cells      map[string]string
}

// Goal is one target of the issue, checked per column.
type Goal struct {
	Label  string
	Col    string
	Value  string // e.g. "0.85x" or "1.2 s"
	Target string // e.g. ">= 1.0x"
	Met    bool
	Known  bool   // false when a figure was not measured
	Reason string // why it was not measured (shown when !Known)
}

// New returns an empty report.
func New() *Report {
	return &Report{ColTitle: map[string]string{}, nums: map[string]map[string]float64{}}
}

// Section returns the section titled title, creating it.
func (r *Report) Section(title string) *Section {
	for _, s := range r.Sections {
		if s.Title == title {
			return s
		}
	}
	s := &Section{Title: title, r: r}
	r.Sections = append(r.Sections, s)
	return s
}

// Set records a cell: text as shown, num for goals and ratios.
func (s *Section) Set(key, label, col, text string, num float64) {
	var row *Row
	for _, rw := range s.Rows {
		if rw.Key == key {
			row = rw
		}
	}
	if row == nil {
		row = &Row{Key: key, Label: label, Cells: map[string]string{}}
		s.Rows = append(s.Rows, row)
	}
	row.Cells[col] = text
	if s.r.nums[key] == nil {
		s.r.nums[key] = map[string]float64{}
	}
	s.r.nums[key][col] = num
}

// SetNum records a number without a cell.
func (r *Report) SetNum(key, col string, v float64) {
	if r.nums[key] == nil {
		r.nums[key] = map[string]float64{}
	}
	r.nums[key][col] = v
}

// Num returns the number recorded for key in col.
func (r *Report) Num(key, col string) (float64, bool) {
	v, ok := r.nums[key][col]
	return v, ok
}

// AddGoal appends a checked goal.
func (r *Report) AddGoal(g Goal) { r.Goals = append(r.Goals, g) }

// Note appends a footnote.
func (r *Report) Note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Render writes the report as text.
func (r *Report) Render(w io.Writer) {
	for _, h := range r.Header {
		fmt.Fprintln(w, h)
	}
	labelW := 20
	for _, s := range r.Sections {
		for _, rw := range s.Rows {
			labelW = max(labelW, len(rw.Label))
		}
	}
	for _, s := range r.Sections {
		if len(s.Rows) == 0 {
			continue
		}
		cols := s.Cols
		if cols == nil {
			cols = r.Cols
		}
		colW := map[string]int{}
		for _, c := range cols {
			colW[c] = max(len(c), 10)
			for _, rw := range s.Rows {
				colW[c] = max(colW[c], len(rw.Cells[c]))
			}
		}
		fmt.Fprintf(w, "\n%s\n", s.Title)
		fmt.Fprintf(w, "  %-*s", labelW, "")
		for _, c := range cols {
			fmt.Fprintf(w, "  %*s", colW[c], c)
		}
		fmt.Fprintln(w)
		for _, rw := range s.Rows {
			fmt.Fprintf(w, "  %-*s", labelW, rw.Label)
			for _, c := range cols {
				v := rw.Cells[c]
				if v == "" {
					v = "-"
				}
				fmt.Fprintf(w, "  %*s", colW[c], v)
			}
			fmt.Fprintln(w)
		}
	}
	if len(r.Goals) > 0 {
		fmt.Fprintf(w, "\nGoals, per filesystem: MET, NOT MET, or NOT MEASURED (why)\n")
		gw := 0
		for _, g := range r.Goals {
			gw = max(gw, len(g.Label))
		}
		goals := append([]Goal(nil), r.Goals...)
		sort.SliceStable(goals, func(i, j int) bool { return colIndex(r.Cols, goals[i].Col) < colIndex(r.Cols, goals[j].Col) })
		for _, g := range goals {
			verdict, value := "MET", g.Value
			switch {
			case !g.Known:
				verdict, value = "NOT MEASURED", "-"
				if g.Reason != "" {
					verdict += " (" + g.Reason + ")"
				}
			case !g.Met:
				verdict = "NOT MET"
			}
			fmt.Fprintf(w, "  %-8s %-*s  %10s  (goal %s)  %s\n", g.Col, gw, g.Label, value, g.Target, verdict)
		}
	}
	if len(r.Notes) > 0 {
		fmt.Fprintf(w, "\nNotes\n")
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  - %s\n", strings.ReplaceAll(n, "\n", "\n    "))
		}
	}
}

func colIndex(cols []string, c string) int {
	for i, x := range cols {
		if x == c {
			return i
		}
	}
	return len(cols)
}
