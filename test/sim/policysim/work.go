package policysim

import (
	"time"

	"github.com/modelship/modelship/test/framework/fleet"
)

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
