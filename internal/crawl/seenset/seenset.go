// Package seenset is a set of 64-bit URL keys kept on disk, so that a
// crawl of millions of URLs does not need one in-memory entry per URL.
//
// The keys are spread over 4096 bucket files named by the top 12 bits of
// the key in hex ("000" .. "fff"); a bucket holds 8-byte big-endian keys,
// appended. A lookup reads (or finds cached) one bucket: about 2 KiB per
// million URLs in the set. A bounded LRU cache of buckets keeps memory
// constant: at most CacheBytes of keys, whatever the size of the set.
// New keys first go to a journal (one append per Flush) and stay in memory
// until JournalMax of them have gathered; the journal is then set aside
// and its keys are moved into their buckets a few buckets per Flush, so
// that adding a key costs a fraction of a file append and no Flush stalls
// on thousands of them.
//
// Disk: 8 bytes per key (plus one filesystem block per bucket file: the
// 4096 files cost ~16 MiB on ext4 once the set is large enough to touch
// them all). Memory: the cache (default 8 MiB, i.e. every bucket of a set
// of up to ~1M keys), the journal's keys (at most JournalMax, ~3 MiB) and
// the keys added since the last Flush.
//
// A Set has one writer (the crawl's frontier holds its lock); readers in
// other processes (farroctl why) read bucket files directly. Appends are
// not fsynced: the set is an optimisation, not the source of truth. A key
// lost to a power cut makes the frontier queue a URL twice, and the spool
// refuses the second job of the same ID. A torn last record is ignored.
package seenset

import (
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/farro-dev/farro/pkg/fsq"
)

// Buckets is the number of bucket files.
const Buckets = 4096

// DefaultCacheBytes bounds the bucket cache.
const DefaultCacheBytes = 8 << 20

// JournalMax is how many journaled keys are kept before they are moved
// into their buckets.
const JournalMax = 1 << 16

// JournalFile is the name of the journal in the set's directory, and
// OldJournalFile the one whose keys are being moved to their buckets.
const (
	JournalFile    = "journal"
	OldJournalFile = "journal.old"
)

// bucketsPerFlush is how many buckets of the old journal one Flush moves.
const bucketsPerFlush = 256

// Set is an on-disk set of uint64 keys.
type Set struct {
	dir        string
	cacheBytes int
	cache      map[int]*list.Element // bucket -> element of lru (*cached)
	lru        *list.List
	cached     int                 // bytes of keys in the cache
	journal    map[uint64]struct{} // journaled, not yet in their buckets
	old        map[int][]uint64    // the old journal's keys not yet in their buckets, by bucket
	oldOrder   []int               // its buckets, in the order they are moved
	pending    map[uint64]struct{} // added since the last Flush
	// Stats.
	Reads, Hits int64
}

// cached is one bucket in memory: a sorted part and a short unsorted tail
// of recent additions.
type cached struct {
	bucket int
	keys   []uint64 // sorted
	tail   []uint64
}

func (c *cached) size() int { return 8 * (len(c.keys) + len(c.tail)) }

func (c *cached) add(ks []uint64) {
	c.tail = append(c.tail, ks...)
	if len(c.tail) > 32 {
		c.keys = append(c.keys, c.tail...)
		c.tail = c.tail[:0]
		slices.Sort(c.keys)
	}
}

func (c *cached) contains(k uint64) bool {
	if _, ok := slices.BinarySearch(c.keys, k); ok {
		return true
	}
	return slices.Contains(c.tail, k)
}

// Open returns the set stored in dir (created if missing).
func Open(dir string, cacheBytes int) (*Set, error) {
	if err := fsq.MkdirDurable(dir); err != nil {
		return nil, err
	}
	if cacheBytes <= 0 {
		cacheBytes = DefaultCacheBytes
	}
	s := &Set{dir: dir, cacheBytes: cacheBytes, cache: map[int]*list.Element{}, lru: list.New(),
		journal: map[uint64]struct{}{}, pending: map[uint64]struct{}{}}
	keys, err := readKeys(filepath.Join(dir, JournalFile))
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		s.journal[k] = struct{}{}
	}
	// An old journal a crash interrupted: move all of it again (keys
	// already moved are then twice in their bucket: harmless).
	old, err := readKeys(filepath.Join(dir, OldJournalFile))
	if err != nil {
		return nil, err
	}
	s.setOld(old)
	return s, nil
}

// BucketOf is the bucket of key k.
func BucketOf(k uint64) int { return int(k >> 52) }

// BucketFile is the name of bucket b's file.
func BucketFile(b int) string { return fmt.Sprintf("%03x", b) }

// Has reports whether k is in the set (pending additions included).
func (s *Set) Has(k uint64) (bool, error) {
	if _, ok := s.pending[k]; ok {
		return true, nil
	}
	if _, ok := s.journal[k]; ok {
		return true, nil
	}
	if slices.Contains(s.old[BucketOf(k)], k) {
		return true, nil
	}
	c, err := s.bucket(BucketOf(k))
	if err != nil {
		return false, err
	}
	return c.contains(k), nil
}

// Add records k; it reaches the disk with the next Flush.
func (s *Set) Add(k uint64) { s.pending[k] = struct{}{} }

// Pending is the number of keys added since the last Flush.
func (s *Set) Pending() int { return len(s.pending) }

// Flush appends the pending keys to the journal (one write, not fsynced)
// and moves some buckets' worth of the old journal into their buckets; a
// full journal becomes the old one.
func (s *Set) Flush() error {
	if len(s.pending) > 0 {
		buf := make([]byte, 0, 8*len(s.pending))
		for k := range s.pending {
			buf = binary.BigEndian.AppendUint64(buf, k)
		}
		if err := appendFile(filepath.Join(s.dir, JournalFile), buf); err != nil {
			return err
		}
		for k := range s.pending {
			s.journal[k] = struct{}{}
		}
		clear(s.pending)
	}
	if len(s.journal) >= JournalMax {
		if len(s.oldOrder) > 0 {
			if err := s.moveOld(len(s.oldOrder)); err != nil {
				return err
			}
		}
		if err := os.Rename(filepath.Join(s.dir, JournalFile), filepath.Join(s.dir, OldJournalFile)); err != nil {
			return fmt.Errorf("seen-set: %w", err)
		}
		keys := make([]uint64, 0, len(s.journal))
		for k := range s.journal {
			keys = append(keys, k)
		}
		clear(s.journal)
		s.setOld(keys)
	}
	return s.moveOld(bucketsPerFlush)
}

func (s *Set) setOld(keys []uint64) {
	s.old = map[int][]uint64{}
	s.oldOrder = s.oldOrder[:0]
	for _, k := range keys {
		b := BucketOf(k)
		if _, ok := s.old[b]; !ok {
			s.oldOrder = append(s.oldOrder, b)
		}
		s.old[b] = append(s.old[b], k)
	}
	slices.Sort(s.oldOrder)
}

// moveOld appends the old journal's keys of up to n buckets to their
// bucket files; once all are moved the old journal is removed.
func (s *Set) moveOld(n int) error {
	for n > 0 && len(s.oldOrder) > 0 {
		b := s.oldOrder[0]
		keys := s.old[b]
		buf := make([]byte, 0, 8*len(keys))
		for _, k := range keys {
			buf = binary.BigEndian.AppendUint64(buf, k)
		}
		if err := appendFile(filepath.Join(s.dir, BucketFile(b)), buf); err != nil {
			return err
		}
		if e, ok := s.cache[b]; ok {
			e.Value.(*cached).add(keys)
			s.cached += 8 * len(keys)
		}
		delete(s.old, b)
		s.oldOrder = s.oldOrder[1:]
		n--
	}
	if len(s.oldOrder) == 0 && s.old != nil {
		s.old = nil
		if err := os.Remove(filepath.Join(s.dir, OldJournalFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("seen-set: %w", err)
		}
	}
	s.evict()
	return nil
}

// compact moves every journaled key into its bucket now.
func (s *Set) compact() error {
	if err := s.moveOld(len(s.oldOrder)); err != nil {
		return err
	}
	if len(s.journal) == 0 {
		return nil
	}
	if err := os.Rename(filepath.Join(s.dir, JournalFile), filepath.Join(s.dir, OldJournalFile)); err != nil {
		return fmt.Errorf("seen-set: %w", err)
	}
	keys := make([]uint64, 0, len(s.journal))
	for k := range s.journal {
		keys = append(keys, k)
	}
	clear(s.journal)
	s.setOld(keys)
	return s.moveOld(len(s.oldOrder))
}

func appendFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("seen-set: %w", err)
	}
	// A torn record left by a crash would misalign every later key: pad
	// the file back to a multiple of 8 first.
	if fi, err := f.Stat(); err == nil && fi.Size()%8 != 0 {
		pad := make([]byte, 8-fi.Size()%8)
		if _, err := f.Write(pad); err != nil {
			f.Close()
			return fmt.Errorf("seen-set: %w", err)
		}
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("seen-set: %w", err)
	}
	return f.Close()
}

func (s *Set) bucket(b int) (*cached, error) {
	if e, ok := s.cache[b]; ok {
		s.Hits++
		s.lru.MoveToFront(e)
		return e.Value.(*cached), nil
	}
	s.Reads++
	keys, err := ReadBucket(s.dir, b)
	if err != nil {
		return nil, err
	}
	slices.Sort(keys)
	c := &cached{bucket: b, keys: keys}
	s.cache[b] = s.lru.PushFront(c)
	s.cached += c.size()
	s.evict()
	return c, nil
}

func (s *Set) evict() {
	for s.cached > s.cacheBytes && s.lru.Len() > 1 {
		e := s.lru.Back()
		c := e.Value.(*cached)
		s.lru.Remove(e)
		delete(s.cache, c.bucket)
		s.cached -= c.size()
	}
}

func readKeys(path string) ([]uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("seen-set: %w", err)
	}
	n := len(data) / 8
	keys := make([]uint64, n)
	for i := 0; i < n; i++ {
		keys[i] = binary.BigEndian.Uint64(data[8*i:])
	}
	return keys, nil
}

// ReadBucket reads the keys of bucket b in dir (a torn last record is
// ignored).
func ReadBucket(dir string, b int) ([]uint64, error) {
	return readKeys(filepath.Join(dir, BucketFile(b)))
}

// Contains reports whether k is in the set stored in dir, reading its
// bucket file and the journals: for readers other than the set's writer.
func Contains(dir string, k uint64) (bool, error) {
	for _, p := range []string{filepath.Join(dir, BucketFile(BucketOf(k))), filepath.Join(dir, JournalFile), filepath.Join(dir, OldJournalFile)} {
		keys, err := readKeys(p)
		if err != nil {
			return false, err
		}
		if slices.Contains(keys, k) {
			return true, nil
		}
	}
	return false, nil
}

// Size counts the keys stored in dir (file sizes / 8; a key journaled and
// bucketed by a compaction cut short by a crash counts twice).
func Size(dir string) (int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size() / 8
		}
	}
	return n, nil
}
