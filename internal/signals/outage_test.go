package signals

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/modelship/modelship/internal/autoscale"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/capacity"
	"github.com/modelship/modelship/internal/sample"
)

// TestPrometheusOutageHoldsFromTheFirstPassThatSeesIt replays the e2e story "Prometheus stopped
// mid-rollout holds the rollout and the autoscaler" in the pure package: the controller decides
// every 500 ms through the shared signal cache (2 s interval, as the stack runs it); the GPU
// work of 6 replicas rises from 40% to 46% each (target 40%: 7 replicas) shortly before
// Prometheus stops, after which every query fails. The stop instant is swept across the cache's
// refresh phase.
//
// It pins down what the story saw (Deployment blue 6 -> 7 with Prometheus stopped and the
// status still saying 6): the total can still change after the stop, but only on data fetched
// before it, which the cache serves for up to its interval (in the stack, a query answered while
// Prometheus shuts down does the same). From the first pass that fetched no data, the total
// never changes: no decision is taken on missing data.
func TestPrometheusOutageHoldsFromTheFirstPassThatSeesIt(t *testing.T) {
	const (
		every    = 500 * time.Millisecond
		interval = 2 * time.Second
	)
	spec := newSpec(2, 8, withGPU(40))
	ready := func(n int32) []autoscale.PodKey {
		var out []autoscale.PodKey
		for i := int32(0); i < n; i++ {
			out = append(out, pod("ml", fmt.Sprintf("llama-blue-%d", i)))
		}
		return out
	}
	// load exports the utilization of the n running pods.
	load := func(q *fakeQuerier, util float64, n int32) {
		var ss []sample.Series
		for i := int32(0); i < n; i++ {
			ss = append(ss, series(util, "namespace", "ml", "pod", fmt.Sprintf("llama-blue-%d", i)))
		}
		q.mu.Lock()
		q.series = map[string][]sample.Series{QueryGPUUtilization: ss}
		q.mu.Unlock()
	}
	full := &capacity.FitResult{MaxAdditional: 0, Limited: true, Reason: v1alpha1.ReasonGPUCapacityLimited, GPUsPerReplica: 1, MatchingNodes: 2}
	free := &capacity.FitResult{MaxAdditional: 4, GPUsPerReplica: 1, FreeGPUs: 4, MatchingNodes: 2}

	for _, tc := range []struct {
		name string
		rise time.Duration // the load rises this long before the stop
		// freed is when, after the stop, another workload frees GPUs (0: they are free throughout).
		freed time.Duration
		// wantLate: for some stop instants the total changes after the stop, on earlier data.
		wantLate bool
	}{
		{name: "the load rises a second before the stop", rise: time.Second},
		{name: "the load rose earlier but the GPUs were full until just after the stop", rise: 10 * time.Second, freed: 300 * time.Millisecond, wantLate: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			late := 0
			for offset := time.Duration(0); offset < interval; offset += 100 * time.Millisecond {
				q := &fakeQuerier{}
				cache := NewSnapshotCache(q, Queries{GPUUtilization: QueryGPUUtilization}, interval)
				stop := t0.Add(30*time.Second + offset)
				cur := int32(6)
				work := 40.0 * 6 // GPU percent summed over the replicas
				var prev *autoscale.Output
				var seen time.Time // the first pass that fetched no data
				sawRise := false   // a refresh fell between the rise and the stop
				for now := t0; now.Before(stop.Add(2 * time.Minute)); now = now.Add(every) {
					if !now.Before(stop.Add(-tc.rise)) {
						work = 46 * 6
					}
					down := !now.Before(stop)
					q.mu.Lock()
					if down {
						q.fail = map[string]error{QueryGPUUtilization: errors.New("connection refused")}
					}
					q.mu.Unlock()
					load(q, work/float64(cur), cur)
					capa := free
					if tc.freed > 0 && now.Before(stop.Add(tc.freed)) {
						capa = full
					}
					snap, _ := cache.Get(context.Background(), now)
					in := autoscale.Input{Spec: spec, Current: cur, Ready: cur, Observations: snap.Observe(spec, ready(cur)), Capacity: capa}
					if prev != nil {
						in.Previous = &prev.Status
					}
					out := autoscale.Decide(in, now)
					fetchedAfter := !snap.At.Before(stop)
					sawRise = sawRise || (!fetchedAfter && !snap.At.Before(stop.Add(-tc.rise)))
					if fetchedAfter && seen.IsZero() {
						seen = now
					}
					if out.Desired != cur {
						if !seen.IsZero() {
							t.Fatalf("stop at +%s in the cache interval: %s after the first pass without data the total moved %d -> %d", offset, now.Sub(seen), cur, out.Desired)
						}
						if down {
							late++
							if age := now.Sub(snap.At); age >= interval {
								t.Errorf("stop at +%s: a change %s after the stop used data %s old, beyond the cache interval %s", offset, now.Sub(stop), age, interval)
							}
						}
					}
					if fetchedAfter && out.MetricsAvailable {
						t.Errorf("stop at +%s: MetricsAvailable is true %s after the stop", offset, now.Sub(stop))
					}
					cur, prev = out.Desired, &out
				}
				if tc.freed > 0 && cur != 6 && cur != 7 {
					t.Errorf("stop at +%s: ended with %d replicas, want 6 (held) or 7 (decided on data from before the stop)", offset, cur)
				}
				if seen.IsZero() || seen.Sub(stop) >= interval {
					t.Errorf("stop at +%s: the first pass without data came %s after the stop, want within the cache interval %s", offset, seen.Sub(stop), interval)
				}
				if want := map[bool]int32{true: 7, false: 6}[sawRise]; tc.freed == 0 && cur != want {
					t.Errorf("stop at +%s: ended with %d replicas, want %d (the rise fetched before the stop: %t)", offset, cur, want, sawRise)
				}
			}
			if tc.wantLate && late == 0 {
				t.Error("no stop instant saw a change after the stop: the sweep misses the story's case")
			}
			if !tc.wantLate && late > 0 {
				t.Errorf("%d stop instants saw a change after the stop", late)
			}
			t.Logf("%d of 20 stop instants saw the total change after the stop, on data fetched before it", late)
		})
	}
}
