package job

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/farro-dev/farro/internal/proc"
)

// Owner is the content of a claim lock's owner file: who holds the job's
// lock, precisely enough to tell a dead holder from a live one even when
// its pid has been reused. The host is its machine id and boot id (see
// proc.Check); the hostname is for display only, and owner files written
// before machine ids were recorded have none (judged by boot id alone).
type Owner struct {
	proc.Identity
	Actor      string    `json:"actor"`           // e.g. agentd/w1, managerd, farroctl
	Agent      string    `json:"agent,omitempty"` // agent id, for claims
	Token      string    `json:"token"`           // unique per acquisition
	AcquiredAt time.Time `json:"acquired_at"`
}

// NewOwner describes the calling process acting as actor.
func NewOwner(actor, agent string) Owner {
	return Owner{Identity: proc.Self(), Actor: actor, Agent: agent, Token: randHex(8), AcquiredAt: time.Now().UTC()}
}

func (o Owner) marshal() []byte {
	b, _ := json.Marshal(o)
	return append(b, '\n')
}

// ParseOwner decodes an owner file.
func ParseOwner(data []byte) (Owner, error) {
	var o Owner
	if err := json.Unmarshal(data, &o); err != nil {
		return o, fmt.Errorf("owner file: %w", err)
	}
	if o.PID <= 0 {
		return o, fmt.Errorf("owner file: no pid")
	}
	return o, nil
}
