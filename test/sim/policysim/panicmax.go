package policysim

import (
	"time"

	"github.com/modelship/modelship/internal/autoscale"
)

// PanicMax is a reference, not a policy to run: it keeps the replicas it starts with until
// requests first queue (autoscale.SLOQueuedPerReplica per Ready replica, where modelship's fast
// path starts), then asks for Max at once and keeps them for the rest of the run. No policy
// that reacts to what it sees puts more replicas in sooner, so on a flash crowd its SLO minutes
// are the most a reactive policy can meet (at any price): the minutes the optimum meets beyond
// them, it meets by knowing the crowd is coming.
type PanicMax struct {
	Max   int32
	fired bool
}

// Name implements Policy.
func (p *PanicMax) Name() string { return "panic-max" }

// Interval implements Policy: as often as modelship's autoscaler looks.
func (p *PanicMax) Interval() time.Duration { return autoscale.DefaultInterval }

// Decide implements Policy.
func (p *PanicMax) Decide(s Signals) int32 {
	if s.Ready > 0 && s.Waiting/float64(s.Ready) >= autoscale.SLOQueuedPerReplica {
		p.fired = true
	}
	if p.fired {
		return p.Max
	}
	return s.Pods
}
