package crash

// The power-loss model (issue 3, item 2). pkg/fsq reports every step it
// takes to a Recorder (fsq.SetRecorder); plRecorder turns those steps into
// operations on inodes of a model of the spool, and plLog.enumerate rebuilds
// every directory tree a power cut after any prefix of them could leave.
//
// The model is ALICE's (OSDI 2014) abstract persistence model reduced to
// what farro does, for a POSIX file system that promises nothing beyond
// fsync:
//
//   - The disk holds a persisted tree of inodes. A directory inode maps
//     names to inodes; a file inode holds bytes. Every operation after the
//     recording starts is pending until something forces it.
//   - Entry operations change one directory slot (directory inode, name):
//     link (create or mkdir), unlink (one step of a remove), rename (two
//     slots at once: it is atomic, the journaled-file-system promise that
//     farro relies on: after a power cut the entry is at the old name or at
//     the new one, never at both or neither).
//   - fsync of a directory forces every earlier link and unlink in it, and
//     every earlier rename INTO it. A rename is forced only by an fsync of
//     its destination directory: an fsync of the source directory alone
//     does not make it durable (conservative; ext4 would).
//   - fsync of a file forces every earlier write to it. Writes are appends
//     (farro never rewrites a file in place); an unforced write may be
//     lost, kept, or torn (only its first half kept), and writes to one
//     file persist in order (its content is the forced part plus a prefix
//     of the rest).
//   - Any subset of the pending operations may have reached the disk, in
//     any order, except that operations on one directory slot persist in
//     program order (a rename of an entry cannot persist without the create
//     of that entry; a remove cannot persist without what it removes).
//     Applying the chosen subset in program order gives every outcome of
//     any reordering, because operations on different slots commute.
//     Forcing an operation forces those it depends on.
//   - Changes made behind pkg/fsq's back (a plain os.Mkdir or os.Remove)
//     are found by comparing the disk with the model before each pkg/fsq
//     operation, and recorded there as operations nobody fsynced.
//
// The combinations of a cut (closed subsets of its pending entry
// operations, times the content choices of its files with pending writes)
// are enumerated completely when there are at most bound of them;
// otherwise bound of them are sampled deterministically, plus the two
// extremes (nothing pending persisted, and everything).

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/farro-dev/farro/pkg/fsq"
)

type plNode struct {
	dir  bool
	kids map[string]int // directories: name -> inode
	data []byte         // files
}

// plTree is a tree of inodes; inode 0 is the spool root.
type plTree struct {
	nodes map[int]*plNode
}

func (t *plTree) clone() *plTree {
	c := &plTree{nodes: make(map[int]*plNode, len(t.nodes))}
	for ino, n := range t.nodes {
		m := &plNode{dir: n.dir, data: n.data}
		if n.dir {
			m.kids = make(map[string]int, len(n.kids))
			for k, v := range n.kids {
				m.kids[k] = v
			}
		}
		c.nodes[ino] = m
	}
	return c
}

// plReadTree reads the real tree at root into a model.
func plReadTree(root string) (*plTree, int, error) {
	t := &plTree{nodes: map[int]*plNode{0: {dir: true, kids: map[string]int{}}}}
	next := 1
	var walk func(dir string, ino int) error
	walk = func(dir string, ino int) error {
		des, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, de := range des {
			p := filepath.Join(dir, de.Name())
			id := next
			next++
			t.nodes[ino].kids[de.Name()] = id
			switch {
			case de.IsDir():
				t.nodes[id] = &plNode{dir: true, kids: map[string]int{}}
				if err := walk(p, id); err != nil {
					return err
				}
			case de.Type().IsRegular():
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				t.nodes[id] = &plNode{data: b}
			default:
				return fmt.Errorf("%s: neither file nor directory", p)
			}
		}
		return nil
	}
	return t, next, walk(root, 0)
}

// plDiff describes the first difference between two trees ("" if equal).
func plDiff(a, b *plTree) string {
	var diff func(ia, ib int, path string) string
	diff = func(ia, ib int, path string) string {
		na, nb := a.nodes[ia], b.nodes[ib]
		if na.dir != nb.dir {
			return path + ": file vs directory"
		}
		if !na.dir {
			if string(na.data) != string(nb.data) {
				return fmt.Sprintf("%s: content differs (%d vs %d bytes)", path, len(na.data), len(nb.data))
			}
			return ""
		}
		for name, ka := range na.kids {
			kb, ok := nb.kids[name]
			if !ok {
				return path + "/" + name + ": only in the model"
			}
			if d := diff(ka, kb, path+"/"+name); d != "" {
				return d
			}
		}
		for name := range nb.kids {
			if _, ok := na.kids[name]; !ok {
				return path + "/" + name + ": only on disk"
			}
		}
		return ""
	}
	return diff(0, 0, ".")
}

type plKind uint8

const (
	plLink      plKind = iota // dir[name] = ino (create, mkdir)
	plUnlink                  // delete dir[name] (== ino)
	plRename                  // dir[name] (== ino) moves to dir2[name2]
	plExchange                // dir[name] (== ino) and dir2[name2] (== ino2) swap
	plWrite                   // append data to file ino (after the entry kinds: see entry)
	plOverwrite               // write data over file ino from its start, in place
	plFsync                   // fsync file ino
	plSyncDir                 // fsync directory ino
	plSyncFS                  // syncfs: forces everything before it
)

// writes tells whether o changes a file's content (plWrite, plOverwrite).
func (o *plOp) writes() bool { return o.kind == plWrite || o.kind == plOverwrite }

// syncs tells whether o forces anything (fsync, fsync-dir, syncfs).
func (o *plOp) syncs() bool { return o.kind == plFsync || o.kind == plSyncDir || o.kind == plSyncFS }

type plOp struct {
	kind     plKind
	dir      int
	name     string
	dir2     int
	name2    string
	ino      int
	ino2     int // plExchange: the inode at dir2[name2]
	isDir    bool
	data     []byte
	label    string // for reports: "rename tmp/x -> incoming/x"
	implicit bool   // not reported by pkg/fsq: inferred from the disk
}

func (o *plOp) entry() bool { return o.kind <= plExchange }

// plMark is a client-visible event at a position of the log: pos is the
// number of operations that had taken effect when it happened.
type plMark struct {
	pos    int
	job    string
	ack    bool     // the transaction returned: its states are durable
	states []string // states (or plGone, plCorrupt) the job may be left in
}

// Pseudo-states for expectations.
const (
	plGone    = "gone"    // the job may be absent (removed by retention)
	plCorrupt = "corrupt" // the job may be in corrupt/ (quarantined)
)

// plLog is one recorded scenario: the persisted tree it started from, the
// operations in program order and the marks.
type plLog struct {
	name     string
	base     *plTree
	ops      []plOp
	marks    []plMark
	implicit int
}

// plRecorder builds a plLog from fsq's records while a scenario runs.
type plRecorder struct {
	root string
	vol  *plTree // what the running system sees
	next int
	log  *plLog
	on   bool
	err  error
}

func newPLRecorder(name, root string) *plRecorder {
	return &plRecorder{root: root, log: &plLog{name: name}}
}

// start snapshots the real tree as the persisted base and starts recording.
func (r *plRecorder) start() error {
	t, next, err := plReadTree(r.root)
	if err != nil {
		return err
	}
	r.log.base, r.vol, r.next = t, t.clone(), next
	r.on = true
	fsq.SetRecorder(r.record)
	return nil
}

// stop stops recording and checks that the model saw every change made to
// the real tree.
func (r *plRecorder) stop() error {
	fsq.SetRecorder(nil)
	if r.err == nil {
		r.catchUp() // changes after the last pkg/fsq operation
	}
	r.on = false
	if r.err != nil {
		return r.err
	}
	real, _, err := plReadTree(r.root)
	if err != nil {
		return err
	}
	if d := plDiff(r.vol, real); d != "" {
		return fmt.Errorf("recording incomplete: the model and the disk differ: %s", d)
	}
	return nil
}

func (r *plRecorder) mark(job string, ack bool, states ...string) {
	pos := 0
	if r.on {
		pos = len(r.log.ops)
	}
	r.log.marks = append(r.log.marks, plMark{pos: pos, job: job, ack: ack, states: states})
}

func (r *plRecorder) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *plRecorder) rel(path string) (string, bool) {
	rel, err := filepath.Rel(r.root, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		r.fail("path %s outside the spool %s", path, r.root)
		return "", false
	}
	return rel, true
}

// lookup resolves rel in the volatile tree.
func (r *plRecorder) lookup(rel string) (int, bool) {
	ino := 0
	if rel == "." {
		return 0, true
	}
	for _, part := range strings.Split(rel, "/") {
		n := r.vol.nodes[ino]
		if n == nil || !n.dir {
			return 0, false
		}
		k, ok := n.kids[part]
		if !ok {
			return 0, false
		}
		ino = k
	}
	return ino, true
}

// catchUp compares the disk with the volatile tree and records, as
// operations never fsynced, the changes made behind pkg/fsq's back since
// the last record (job.Submit's os.Mkdir of its tmp dir, the recovery
// guard's os.Mkdir and os.Remove). It runs before every pkg/fsq
// operation, so each such change is placed where it happened.
func (r *plRecorder) catchUp() {
	real, _, err := plReadTree(r.root)
	if err != nil {
		r.fail("read %s: %v", r.root, err)
		return
	}
	r.sync(0, real, 0, "")
}

func (r *plRecorder) sync(vino int, real *plTree, rino int, rel string) {
	vn, rn := r.vol.nodes[vino], real.nodes[rino]
	join := func(name string) string {
		if rel == "" {
			return name
		}
		return rel + "/" + name
	}
	for _, name := range plSorted(vn.kids) {
		if _, ok := rn.kids[name]; !ok {
			r.unlinkTree(vino, name, vn.kids[name], join(name), true)
		}
	}
	for _, name := range plSorted(rn.kids) {
		rk := rn.kids[name]
		rnode := real.nodes[rk]
		vk, ok := vn.kids[name]
		if ok {
			vnode := r.vol.nodes[vk]
			switch {
			case vnode.dir != rnode.dir:
				r.unlinkTree(vino, name, vk, join(name), true)
				ok = false
			case vnode.dir:
				r.sync(vk, real, rk, join(name))
				continue
			case string(vnode.data) == string(rnode.data):
				continue
			case strings.HasPrefix(string(rnode.data), string(vnode.data)):
				add := rnode.data[len(vnode.data):]
				vnode.data = append(append([]byte(nil), vnode.data...), add...)
				r.add(plOp{kind: plWrite, ino: vk, data: add, label: fmt.Sprintf("write %s (%d bytes, not through pkg/fsq)", join(name), len(add)), implicit: true})
				continue
			default:
				r.unlinkTree(vino, name, vk, join(name), true)
				ok = false
			}
		}
		if ok {
			continue
		}
		vk = r.newNode(rnode.dir)
		vn.kids[name] = vk
		what := "create"
		if rnode.dir {
			what = "mkdir"
		}
		r.add(plOp{kind: plLink, dir: vino, name: name, ino: vk, isDir: rnode.dir, label: what + " " + join(name) + " (not through pkg/fsq)", implicit: true})
		if rnode.dir {
			r.sync(vk, real, rk, join(name))
		} else if len(rnode.data) > 0 {
			r.vol.nodes[vk].data = rnode.data
			r.add(plOp{kind: plWrite, ino: vk, data: rnode.data, label: fmt.Sprintf("write %s (%d bytes, not through pkg/fsq)", join(name), len(rnode.data)), implicit: true})
		}
	}
}

func (r *plRecorder) add(o plOp) {
	if o.implicit {
		r.log.implicit++
	}
	r.log.ops = append(r.log.ops, o)
}

// unlinkTree removes dir[name] (inode ino) as os.RemoveAll does: depth
// first, one unlink per entry.
func (r *plRecorder) unlinkTree(dir int, name string, ino int, rel string, implicit bool) {
	n := r.vol.nodes[ino]
	if n.dir {
		for _, k := range plSorted(n.kids) {
			r.unlinkTree(ino, k, n.kids[k], rel+"/"+k, implicit)
		}
	}
	delete(r.vol.nodes[dir].kids, name)
	label := "unlink " + rel
	if implicit {
		label += " (not through pkg/fsq)"
	}
	r.add(plOp{kind: plUnlink, dir: dir, name: name, ino: ino, isDir: n.dir, label: label, implicit: implicit})
}

func plSorted(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (r *plRecorder) newNode(dir bool) int {
	id := r.next
	r.next++
	n := &plNode{dir: dir}
	if dir {
		n.kids = map[string]int{}
	}
	r.vol.nodes[id] = n
	return id
}

// parent resolves the directory holding path and the entry name.
func (r *plRecorder) parent(path string) (int, string, string, bool) {
	rel, ok := r.rel(path)
	if !ok {
		return 0, "", "", false
	}
	dir, ok := r.lookup(filepath.Dir(rel))
	if !ok {
		r.fail("parent of %s unknown to the model", rel)
		return 0, "", "", false
	}
	return dir, filepath.Base(rel), rel, true
}

func (r *plRecorder) node(path string) (int, string, bool) {
	rel, ok := r.rel(path)
	if !ok {
		return 0, "", false
	}
	ino, ok := r.lookup(rel)
	if !ok {
		r.fail("%s unknown to the model", rel)
	}
	return ino, rel, ok
}

func (r *plRecorder) record(rec fsq.Rec) {
	if r.err != nil {
		return
	}
	add := r.add
	switch rec.Op {
	case fsq.RecBefore:
		r.catchUp()
	case fsq.RecMkdir, fsq.RecCreate:
		dir, name, rel, ok := r.parent(rec.Path)
		if !ok {
			return
		}
		if _, exists := r.vol.nodes[dir].kids[name]; exists {
			r.fail("%s %s: exists in the model", rec.Op, rel)
			return
		}
		isDir := rec.Op == fsq.RecMkdir
		ino := r.newNode(isDir)
		r.vol.nodes[dir].kids[name] = ino
		add(plOp{kind: plLink, dir: dir, name: name, ino: ino, isDir: isDir, label: string(rec.Op) + " " + rel})
	case fsq.RecWrite:
		ino, rel, ok := r.node(rec.Path)
		if !ok {
			return
		}
		n := r.vol.nodes[ino]
		n.data = append(append([]byte(nil), n.data...), rec.Data...)
		add(plOp{kind: plWrite, ino: ino, data: rec.Data, label: fmt.Sprintf("write %s (%d bytes)", rel, len(rec.Data))})
	case fsq.RecOverwrite:
		ino, rel, ok := r.node(rec.Path)
		if !ok {
			return
		}
		r.vol.nodes[ino].data = append([]byte(nil), rec.Data...)
		add(plOp{kind: plOverwrite, ino: ino, data: rec.Data, label: fmt.Sprintf("overwrite %s (%d bytes)", rel, len(rec.Data))})
	case fsq.RecFsync:
		ino, rel, ok := r.node(rec.Path)
		if ok {
			add(plOp{kind: plFsync, ino: ino, label: "fsync " + rel})
		}
	case fsq.RecSyncDir:
		ino, rel, ok := r.node(rec.Path)
		if ok {
			add(plOp{kind: plSyncDir, ino: ino, label: "fsync-dir " + rel})
		}
	case fsq.RecSyncFS:
		add(plOp{kind: plSyncFS, label: "syncfs"})
	case fsq.RecRename:
		sd, sn, srel, ok := r.parent(rec.Path)
		if !ok {
			return
		}
		dd, dn, drel, ok := r.parent(rec.Path2)
		if !ok {
			return
		}
		ino, ok := r.vol.nodes[sd].kids[sn]
		if !ok {
			r.fail("rename %s: source unknown to the model", srel)
			return
		}
		if old, ok := r.vol.nodes[dd].kids[dn]; ok && r.vol.nodes[old].dir {
			r.fail("rename %s -> %s: replaces a directory", srel, drel)
			return
		}
		delete(r.vol.nodes[sd].kids, sn)
		r.vol.nodes[dd].kids[dn] = ino
		add(plOp{kind: plRename, dir: sd, name: sn, dir2: dd, name2: dn, ino: ino, isDir: r.vol.nodes[ino].dir, label: "rename " + srel + " -> " + drel})
	case fsq.RecExchange:
		sd, sn, srel, ok := r.parent(rec.Path)
		if !ok {
			return
		}
		dd, dn, drel, ok := r.parent(rec.Path2)
		if !ok {
			return
		}
		a, ok1 := r.vol.nodes[sd].kids[sn]
		b, ok2 := r.vol.nodes[dd].kids[dn]
		if !ok1 || !ok2 {
			r.fail("exchange %s <-> %s: a side unknown to the model", srel, drel)
			return
		}
		r.vol.nodes[sd].kids[sn], r.vol.nodes[dd].kids[dn] = b, a
		add(plOp{kind: plExchange, dir: sd, name: sn, dir2: dd, name2: dn, ino: a, ino2: b, label: "exchange " + srel + " <-> " + drel})
	case fsq.RecRemove:
		rel, ok := r.rel(rec.Path)
		if !ok {
			return
		}
		dir, ok := r.lookup(filepath.Dir(rel))
		if !ok {
			return // removing something absent: no effect
		}
		ino, ok := r.vol.nodes[dir].kids[filepath.Base(rel)]
		if !ok {
			return
		}
		r.unlinkTree(dir, filepath.Base(rel), ino, rel, false)
	default:
		r.fail("unknown record %q", rec.Op)
	}
}

// without returns a copy of the log with operation p removed (used to show
// that a given fsync is needed).
func (l *plLog) without(p int) *plLog {
	c := *l
	c.name = fmt.Sprintf("%s without [%d] %s", l.name, p, l.ops[p].label)
	c.ops = append(append([]plOp(nil), l.ops[:p]...), l.ops[p+1:]...)
	c.marks = make([]plMark, len(l.marks))
	for i, m := range l.marks {
		if m.pos > p {
			m.pos--
		}
		c.marks[i] = m
	}
	return &c
}

// plAnalysis holds what enumerate precomputes once per log.
type plAnalysis struct {
	deps   [][]int // earlier ops that must persist for op p to persist
	forcer []int   // index of the first fsync forcing op p, or len(ops)
	slots  [][]plSlot
}

type plSlot struct {
	dir  int
	name string
}

func (l *plLog) analyse() *plAnalysis {
	n := len(l.ops)
	a := &plAnalysis{deps: make([][]int, n), forcer: make([]int, n), slots: make([][]plSlot, n)}
	lastSlot := map[plSlot]int{}
	lastWrite := map[int]int{}
	for p := range l.ops {
		o := &l.ops[p]
		a.forcer[p] = n
		switch o.kind {
		case plLink, plUnlink:
			a.slots[p] = []plSlot{{o.dir, o.name}}
		case plRename, plExchange:
			a.slots[p] = []plSlot{{o.dir, o.name}, {o.dir2, o.name2}}
		case plWrite, plOverwrite:
			if q, ok := lastWrite[o.ino]; ok {
				a.deps[p] = append(a.deps[p], q)
			}
			lastWrite[o.ino] = p
		}
		for _, s := range a.slots[p] {
			if q, ok := lastSlot[s]; ok {
				a.deps[p] = append(a.deps[p], q)
			}
			lastSlot[s] = p
		}
	}
	for p := range l.ops {
		o := &l.ops[p]
		for q := p + 1; q < n; q++ {
			f := &l.ops[q]
			hit := false
			switch {
			case f.kind == plFsync && o.writes():
				hit = f.ino == o.ino
			case f.kind == plSyncDir && (o.kind == plLink || o.kind == plUnlink):
				hit = f.ino == o.dir
			case f.kind == plSyncDir && o.kind == plRename:
				hit = f.ino == o.dir2
			case f.kind == plSyncDir && o.kind == plExchange:
				hit = f.ino == o.dir && o.dir == o.dir2
			case f.kind == plSyncFS:
				hit = !o.syncs()
			}
			if hit {
				a.forcer[p] = q
				break
			}
		}
	}
	return a
}

// plState is one tree a power cut could leave.
type plState struct {
	tree *plTree
	hash [32]byte
}

// plCutStats counts what enumerating one cut did.
type plCutStats struct {
	pending int  // relevant pending operations (entries and writes)
	combos  int  // combinations produced
	sampled bool // too many combinations: sampled
}

// enumerate calls emit for every state a power cut after the first c
// operations could leave (at most bound combinations, see the package
// comment).
func (l *plLog) enumerate(a *plAnalysis, c, bound int, seed uint64, emit func(plState)) plCutStats {
	var st plCutStats
	forced := make([]bool, c)
	for p := c - 1; p >= 0; p-- {
		if a.forcer[p] < c {
			forced[p] = true
		}
		if forced[p] {
			for _, q := range a.deps[p] {
				forced[q] = true
			}
		}
	}

	// Operations on inodes that no state can reach change nothing.
	reach := l.liveInodes(a, c, forced)

	var entries []int
	writes := map[int][]int{}
	relevant := make([]bool, c)
	for p := c - 1; p >= 0; p-- {
		o := &l.ops[p]
		if forced[p] || (!o.writes() && !o.entry()) {
			continue
		}
		switch {
		case relevant[p]:
		case o.writes():
			relevant[p] = reach[o.ino]
		case o.kind == plRename, o.kind == plExchange:
			relevant[p] = reach[o.dir] || reach[o.dir2]
		default:
			relevant[p] = reach[o.dir]
		}
		if relevant[p] {
			for _, q := range a.deps[p] {
				if !forced[q] {
					relevant[q] = true
				}
			}
		}
	}
	var files []int
	for p := 0; p < c; p++ {
		if !relevant[p] {
			continue
		}
		if l.ops[p].writes() {
			ino := l.ops[p].ino
			if len(writes[ino]) == 0 {
				files = append(files, ino)
			}
			writes[ino] = append(writes[ino], p)
		} else {
			entries = append(entries, p)
		}
	}
	st.pending = len(entries)
	for _, f := range files {
		st.pending += len(writes[f])
	}

	// Entry choices: subsets of entries closed under dependencies.
	idx := make(map[int]int, len(entries))
	for i, p := range entries {
		idx[p] = i
	}
	edeps := make([][]int, len(entries))
	for i, p := range entries {
		for _, q := range a.deps[p] {
			if j, ok := idx[q]; ok {
				edeps[i] = append(edeps[i], j)
			}
		}
	}
	fileOpts := 1
	for _, f := range files {
		fileOpts *= 2*len(writes[f]) + 1
		if fileOpts > bound {
			break
		}
	}
	var subsets [][]bool
	if fileOpts <= bound {
		limit := bound / fileOpts
		var rec func(i int, cur []bool) bool
		rec = func(i int, cur []bool) bool {
			if i == len(entries) {
				subsets = append(subsets, append([]bool(nil), cur...))
				return len(subsets) <= limit
			}
			cur[i] = false
			if !rec(i+1, cur) {
				return false
			}
			for _, j := range edeps[i] {
				if !cur[j] {
					return true
				}
			}
			cur[i] = true
			ok := rec(i+1, cur)
			cur[i] = false
			return ok
		}
		if !rec(0, make([]bool, len(entries))) {
			subsets = nil
		}
	}

	build := func(inc []bool, choice []int) {
		take := make([]bool, c)
		copy(take, forced)
		for i, p := range entries {
			take[p] = inc[i]
		}
		torn := make([]bool, c)
		for fi, f := range files {
			x := choice[fi]
			k := (x + 1) / 2 // writes kept, the last one torn if x is even
			for wi, p := range writes[f] {
				if wi < k {
					take[p] = true
					if x%2 == 0 && wi == k-1 {
						torn[p] = true
					}
				}
			}
		}
		emit(l.materialize(c, take, torn))
		st.combos++
	}

	if subsets != nil {
		choice := make([]int, len(files))
		for _, inc := range subsets {
			var walk func(fi int)
			walk = func(fi int) {
				if fi == len(files) {
					build(inc, choice)
					return
				}
				for x := 0; x <= 2*len(writes[files[fi]]); x++ {
					choice[fi] = x
					walk(fi + 1)
				}
			}
			walk(0)
		}
		return st
	}

	// Too many: the two extremes, then bound random combinations.
	st.sampled = true
	rng := rand.New(rand.NewPCG(seed, uint64(c)))
	none := make([]bool, len(entries))
	all := make([]bool, len(entries))
	for i := range all {
		all[i] = true
	}
	zero := make([]int, len(files))
	full := make([]int, len(files))
	for fi, f := range files {
		full[fi] = 2*len(writes[f]) - 1
	}
	build(none, zero)
	build(all, full)
	for range bound {
		inc := make([]bool, len(entries))
		for i := range entries {
			ok := rng.IntN(2) == 1
			for _, j := range edeps[i] {
				ok = ok && inc[j]
			}
			inc[i] = ok
		}
		choice := make([]int, len(files))
		for fi, f := range files {
			choice[fi] = rng.IntN(2*len(writes[f]) + 1)
		}
		build(inc, choice)
	}
	return st
}

// liveInodes over-approximates the inodes some state can reach from the
// root: for every directory slot it takes each value the slot can hold
// (the value after its forced operations, which form a prefix of the
// slot's operations, and the value after each further pending one).
func (l *plLog) liveInodes(a *plAnalysis, c int, forced []bool) map[int]bool {
	base := map[plSlot]int{}
	for ino, n := range l.base.nodes {
		if n.dir {
			for name, k := range n.kids {
				base[plSlot{ino, name}] = k
			}
		}
	}
	cur := map[plSlot]int{} // value after the forced operations; -1: empty
	for s, v := range base {
		cur[s] = v
	}
	values := map[plSlot][]int{} // slots with pending operations
	for p := 0; p < c; p++ {
		o := &l.ops[p]
		if !o.entry() {
			continue
		}
		for i, s := range a.slots[p] {
			v := -1
			switch {
			case o.kind == plLink || (o.kind == plRename && i == 1):
				v = o.ino
			case o.kind == plExchange && i == 0:
				v = o.ino2
			case o.kind == plExchange && i == 1:
				v = o.ino
			}
			if forced[p] {
				cur[s] = v
				continue
			}
			if _, ok := values[s]; !ok {
				old, ok := cur[s]
				if !ok {
					old = -1
				}
				values[s] = []int{old}
			}
			values[s] = append(values[s], v)
		}
	}
	byDir := map[int][]int{}
	for s, v := range cur {
		if _, pending := values[s]; !pending && v >= 0 {
			byDir[s.dir] = append(byDir[s.dir], v)
		}
	}
	for s, vs := range values {
		for _, v := range vs {
			if v >= 0 {
				byDir[s.dir] = append(byDir[s.dir], v)
			}
		}
	}
	live := map[int]bool{0: true}
	queue := []int{0}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		for _, k := range byDir[d] {
			if !live[k] {
				live[k] = true
				queue = append(queue, k)
			}
		}
	}
	return live
}

// materialize builds the persisted tree: the base plus the operations
// taken, in program order; a torn write keeps its first half.
func (l *plLog) materialize(c int, take, torn []bool) plState {
	t := l.base.clone()
	node := func(ino int, dir bool) *plNode {
		n := t.nodes[ino]
		if n == nil {
			n = &plNode{dir: dir}
			if dir {
				n.kids = map[string]int{}
			}
			t.nodes[ino] = n
		}
		return n
	}
	for p := 0; p < c; p++ {
		if !take[p] {
			continue
		}
		o := &l.ops[p]
		switch o.kind {
		case plLink:
			node(o.ino, o.isDir)
			node(o.dir, true).kids[o.name] = o.ino
		case plUnlink:
			if d := node(o.dir, true); d.kids[o.name] == o.ino {
				delete(d.kids, o.name)
			}
		case plRename:
			if d := node(o.dir, true); d.kids[o.name] == o.ino {
				delete(d.kids, o.name)
			}
			node(o.ino, o.isDir)
			node(o.dir2, true).kids[o.name2] = o.ino
		case plWrite:
			n := node(o.ino, false)
			data := o.data
			if torn[p] {
				data = data[:len(data)/2]
			}
			n.data = append(append([]byte(nil), n.data...), data...)
		case plExchange:
			node(o.ino, false)
			node(o.ino2, false)
			d1, d2 := node(o.dir, true), node(o.dir2, true)
			d1.kids[o.name], d2.kids[o.name2] = o.ino2, o.ino
		case plOverwrite:
			// In place, then truncated to its length: a torn write
			// keeps the old bytes past what reached the disk.
			n := node(o.ino, false)
			nd := append([]byte(nil), o.data...)
			if torn[p] {
				nd = nd[:len(nd)/2]
				if len(n.data) > len(nd) {
					nd = append(nd, n.data[len(nd):]...)
				}
			}
			n.data = nd
		}
	}
	return plState{tree: t, hash: t.hash()}
}

// hash is a digest of the tree reachable from the root: names, types and
// contents.
func (t *plTree) hash() [32]byte {
	h := sha256.New()
	var buf [8]byte
	var walk func(ino int)
	walk = func(ino int) {
		n := t.nodes[ino]
		if !n.dir {
			binary.LittleEndian.PutUint64(buf[:], uint64(len(n.data)))
			h.Write([]byte{'F'})
			h.Write(buf[:])
			h.Write(n.data)
			return
		}
		names := make([]string, 0, len(n.kids))
		for k := range n.kids {
			names = append(names, k)
		}
		sort.Strings(names)
		h.Write([]byte{'D'})
		for _, k := range names {
			h.Write([]byte(k))
			h.Write([]byte{0})
			walk(n.kids[k])
		}
		h.Write([]byte{'E'})
	}
	walk(0)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// write creates the tree under dir (which must not exist).
func (t *plTree) write(dir string) error {
	var walk func(ino int, path string) error
	walk = func(ino int, path string) error {
		n := t.nodes[ino]
		if !n.dir {
			return os.WriteFile(path, n.data, 0o644)
		}
		if err := os.Mkdir(path, 0o755); err != nil {
			return err
		}
		for k, v := range n.kids {
			if err := walk(v, filepath.Join(path, k)); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(0, dir)
}
