package logxtest

import (
	"errors"
	"testing"
)

func TestDuplicateKey(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]string{
		`{"a":1,"b":{"a":2}}`:                      "",
		`{"a":1,"a":2}`:                            "a",
		`{"a":1,"b":{"c":2,"c":3}}`:                "b.c",
		`{"e":{"x":{"y":1,"z":{},"y":2}}}`:         "e.x.y",
		`{"l":[{"k":1},{"k":1,"k":2}]}`:            "l[1].k",
		`{"l":[[{"k":1,"j":[1,2],"k":"x"}]]}`:      "l[0][0].k",
		`{"s":"{\"a\":1,\"a\":2}","t":"a"}`:        "",
		`{"job_id":"j","x":{"job_id":"j"},"y":[]}`: "",
		`not json`: "",
	} {
		if got := DuplicateKey([]byte(line)); got != want {
			t.Errorf("DuplicateKey(%s) = %q, want %q", line, got, want)
		}
	}
}

func TestCheckLine(t *testing.T) {
	t.Parallel()
	for line, ok := range map[string]bool{
		`{"a":1,"b":{"c":[1,{"d":null}]}}`: true,
		` {"a":1} `:                        true,
		`{"a":1}{"b":2}`:                   false,
		`{"a":1} 2`:                        false,
		`[1,2]`:                            false,
		`"a"`:                              false,
		``:                                 false,
		`{"a":1,}`:                         false,
		`<6>{"a":1}`:                       false,
		`{"a":1,"a":1}`:                    false,
	} {
		if err := CheckLine([]byte(line)); (err == nil) != ok {
			t.Errorf("CheckLine(%s) = %v, want ok %v", line, err, ok)
		}
	}
	var dup *DuplicateKeyError
	if err := CheckLine([]byte(`{"event":{"type":"a","type":"b"}}`)); !errors.As(err, &dup) || dup.Path != "event.type" {
		t.Errorf("nested duplicate: %v", err)
	}
}

func TestScan(t *testing.T) {
	t.Parallel()
	n, problems := Scan([]byte("{\"a\":1}\n{\"a\":1,\"a\":2}\nnot json\n{\"b\":{}}\n"))
	if n != 4 || len(problems) != 2 || problems[0].Line != 2 || problems[1].Line != 3 {
		t.Fatalf("Scan = %d lines, problems %+v", n, problems)
	}
	if n, problems := Scan(nil); n != 0 || problems != nil {
		t.Fatalf("Scan(nil) = %d, %v", n, problems)
	}
}

// fakeTB records errors instead of failing.
type fakeTB struct {
	testing.TB
	errs []string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errs = append(f.errs, format)
}

func TestBufferCheck(t *testing.T) {
	t.Parallel()
	var b Buffer
	b.Write([]byte("{\"a\":1}\n"))
	f := &fakeTB{TB: t}
	b.Check(f)
	if len(f.errs) != 0 {
		t.Fatalf("clean buffer reported %v", f.errs)
	}
	b.Write([]byte("{\"job_id\":\"j\",\"x\":1,\"job_id\":\"j\"}\n"))
	b.Check(f)
	if len(f.errs) != 1 {
		t.Fatalf("duplicate key: %d errors, want 1", len(f.errs))
	}
}
