package seenset

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func TestSet(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 4<<10) // a tiny cache: buckets are evicted and re-read
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]uint64, 4000)
	for i := range keys {
		keys[i] = rng.Uint64()
	}
	for i, k := range keys {
		if has, err := s.Has(k); err != nil || has {
			t.Fatalf("key %d reported before it was added (%v)", i, err)
		}
		s.Add(k)
		if has, _ := s.Has(k); !has {
			t.Fatalf("pending key %d not reported", i)
		}
		if i%500 == 499 {
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if has, _ := s.Has(k); !has {
			t.Fatal("flushed key lost")
		}
	}
	if err := s.compact(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if has, _ := s.Has(k); !has {
			t.Fatal("key lost by compaction")
		}
	}
	if s.cached > 4<<10+8*64 {
		t.Errorf("cache holds %d bytes, bound 4 KiB", s.cached)
	}
	if n, _ := Size(dir); n != int64(len(keys)) {
		t.Errorf("Size = %d, want %d", n, len(keys))
	}
	// Another reader sees the same set; a reopened set too.
	if ok, _ := Contains(dir, keys[7]); !ok {
		t.Error("Contains misses a key")
	}
	if ok, _ := Contains(dir, 12345); ok {
		t.Error("Contains finds a key never added")
	}
	s2, _ := Open(dir, 0)
	if has, _ := s2.Has(keys[3999]); !has {
		t.Error("reopened set misses a key")
	}
}

func TestTornRecord(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir, 0)
	k1 := uint64(0xabc) << 52
	s.Add(k1)
	_ = s.Flush()
	if err := s.compact(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{BucketFile(BucketOf(k1)), JournalFile} {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte{1, 2, 3}) // a torn record
		f.Close()
	}
	s2, _ := Open(dir, 0)
	k2 := k1 | 42
	s2.Add(k2)
	if err := s2.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s2.compact(); err != nil {
		t.Fatal(err)
	}
	s3, _ := Open(dir, 0)
	for _, k := range []uint64{k1, k2} {
		if has, _ := s3.Has(k); !has {
			t.Errorf("key %x lost around a torn record", k)
		}
	}
}
