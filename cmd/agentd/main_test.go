package main

import (
	"reflect"
	"slices"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/daemon"
)

func TestSplitExec(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, agent, command []string
	}{
		{[]string{"agentd", "--id", "w1", "--exec", "/bin/sh", "-c", "echo --id"}, []string{"agentd", "--id", "w1"}, []string{"/bin/sh", "-c", "echo --id"}},
		{[]string{"agentd", "--exec=/bin/true", "--x"}, []string{"agentd"}, []string{"/bin/true", "--x"}},
		{[]string{"agentd", "--id", "w1"}, []string{"agentd", "--id", "w1"}, nil},
		{[]string{"agentd", "--", "--exec", "x"}, []string{"agentd", "--", "--exec", "x"}, nil},
	} {
		agent, command := splitExec(tc.in)
		if !reflect.DeepEqual(agent, tc.agent) || !reflect.DeepEqual(command, tc.command) {
			t.Errorf("splitExec(%q) = %q, %q; want %q, %q", tc.in, agent, command, tc.agent, tc.command)
		}
	}
}

// An agentd flag written after --exec CMD is the handler's argument; it
// is reported so that the mistake is seen. The handler's own flags are not.
func TestAgentFlagsInHandlerArgs(t *testing.T) {
	flags := []cli.Flag{&cli.IntFlag{Name: "concurrency"}, &cli.StringFlag{Name: "id"}, &cli.BoolFlag{Name: "no-notify"}}
	got := agentFlagsIn(flags, []string{"--verbose", "--concurrency", "4", "-o", "out", "--id=w2", "--no-notify", "plain"})
	want := []string{"--concurrency", "--id=w2", "--no-notify"}
	if !slices.Equal(got, want) {
		t.Fatalf("agentFlagsIn = %q, want %q", got, want)
	}
}

// The agent's own configuration errors (--kinds) exit with the status the
// units list in RestartPreventExitStatus, like every other one.
func TestAgentConfigStatusIsTheDaemons(t *testing.T) {
	if agent.ExitConfig != daemon.ExitConfig {
		t.Fatalf("agent.ExitConfig %d, daemon.ExitConfig %d", agent.ExitConfig, daemon.ExitConfig)
	}
}
