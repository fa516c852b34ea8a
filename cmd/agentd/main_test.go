package main

import (
	"reflect"
	"testing"
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
