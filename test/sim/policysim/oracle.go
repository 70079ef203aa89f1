package policysim

import (
	"math"
	"time"

	"github.com/modelship/modelship/test/framework/fleet"
)

// Oracle knows the future and pays no cold start: every Interval it runs
// ceil(work / PerReplica) replicas, where work is the busiest Lookahead-long stretch of the
// coming arrivals (fleet.Capacity.Work: replicas' worth of prefill and decode time) and PerReplica the share of a replica's time that keeps
// latency within the SLO. It is the lower bound the others are measured against.
type Oracle struct {
	Arrivals   []fleet.Arrival
	Capacity   fleet.Capacity
	PerReplica float64
	Min, Max   int32
	Lookahead  time.Duration
	Step       time.Duration
}

// Name implements Policy.
func (o *Oracle) Name() string { return "oracle" }

// Interval implements Policy.
func (o *Oracle) Interval() time.Duration { return o.Step }

// ColdStart implements ColdStarter: the oracle's pods serve at once.
func (o *Oracle) ColdStart() bool { return false }

// Decide implements Policy.
func (o *Oracle) Decide(s Signals) int32 {
	w := WorkBetween(o.Arrivals, o.Capacity, s.Now, s.Now+o.Lookahead)
	return clamp(int32(math.Ceil(w/o.PerReplica-1e-9)), o.Min, o.Max)
}

// WorkBetween is the replica-seconds per second that the arrivals in [from, to) need.
func WorkBetween(arr []fleet.Arrival, c fleet.Capacity, from, to time.Duration) float64 {
	var prompt, gen float64
	for _, a := range arrivalsBetween(arr, from, to) {
		prompt += float64(a.ContextTokens)
		gen += float64(a.GeneratedTokens)
	}
	s := (to - from).Seconds()
	return c.Work(prompt/s, gen/s)
}

func arrivalsBetween(arr []fleet.Arrival, from, to time.Duration) []fleet.Arrival {
	lo := searchArrival(arr, from)
	hi := searchArrival(arr, to)
	return arr[lo:hi]
}

func searchArrival(arr []fleet.Arrival, at time.Duration) int {
	lo, hi := 0, len(arr)
	for lo < hi {
		m := (lo + hi) / 2
		if arr[m].At < at {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}
