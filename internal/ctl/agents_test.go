package ctl_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/registry"
)

// farroctl agents --json on a spool with one live agent (holding a job)
// and one gone; the table says the same.
func TestAgentsLiveAndGone(t *testing.T) {
	e := newEnv(t)
	live, err := registry.AcquireAgent(e.s, "t1", registry.Options{Actor: "agentd/t1", Slots: 2, Version: "v-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Release()
	e.claim("running") // in-progress/t1/running
	gone, err := registry.AcquireAgent(e.s, "w9", registry.Options{Actor: "agentd/w9", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.Release(); err != nil {
		t.Fatal(err)
	}
	m, err := registry.AcquireDaemon(e.s, "managerd", registry.Options{Actor: "managerd"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()

	if err := e.ctl("").Agents(ctl.AgentsOptions{JSON: true}); err != nil {
		t.Fatal(err)
	}
	var l registry.Listing
	if err := json.Unmarshal(e.stdout.Bytes(), &l); err != nil {
		t.Fatalf("%v\n%s", err, e.stdout)
	}
	if len(l.Agents) != 2 || len(l.Daemons) != 1 {
		t.Fatalf("listing %+v", l)
	}
	t1, w9 := l.Agents[0], l.Agents[1]
	if t1.ID != "t1" || !t1.Live || t1.PID != os.Getpid() || t1.Slots != 2 || t1.JobsHeld != 1 ||
		t1.StartedAt.IsZero() || t1.LastSeen.IsZero() || t1.Version != "v-test" {
		t.Errorf("t1: %+v", t1)
	}
	if w9.ID != "w9" || w9.Live || w9.StoppedAt == nil || w9.JobsHeld != 0 {
		t.Errorf("w9: %+v", w9)
	}
	if d := l.Daemons[0]; d.ID != "managerd" || !d.Live || d.Kind != registry.KindDaemon {
		t.Errorf("managerd: %+v", d)
	}

	e.stdout.Reset()
	if err := e.ctl("").Agents(ctl.AgentsOptions{}); err != nil {
		t.Fatal(err)
	}
	out := lines(e.stdout.String())
	if len(out) != 6 || !strings.HasPrefix(out[0], "AGENT") ||
		!strings.HasPrefix(out[1], "t1 ") || !strings.Contains(out[1], " live ") ||
		!strings.HasPrefix(out[2], "w9 ") || !strings.Contains(out[2], " gone (stopped) ") ||
		!strings.HasPrefix(out[4], "DAEMON") || !strings.HasPrefix(out[5], "managerd ") {
		t.Errorf("table:\n%s", e.stdout)
	}
}
