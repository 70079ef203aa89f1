package policysim

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/modelship/modelship/test/framework/fleet"
)

func shippedArrivals(t *testing.T, scale float64, d time.Duration) []fleet.Arrival {
	t.Helper()
	tr, err := fleet.LoadTrace("../../traces/azure-llm-2023-conv.csv")
	if err != nil {
		t.Fatal(err)
	}
	rp, err := fleet.NewReplay(tr, fleet.ReplayOptions{RateScale: scale, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return rp.Until(d)
}

func optConfig(arr []fleet.Arrival, d time.Duration) Config {
	return Config{Arrivals: arr, Duration: d, Capacity: fleet.DefaultCapacity(), ColdStart: 3 * time.Minute, Initial: 2,
		ScrapeInterval: 15 * time.Second, Step: 50 * time.Millisecond, SLOTTFT: 2 * time.Second, SLOITL: 100 * time.Millisecond, Seed: 1}
}

// burst is n requests of a long prompt spread evenly over the minute starting at from.
func burst(from time.Duration, n int) []fleet.Arrival {
	out := make([]fleet.Arrival, n)
	for i := range out {
		out[i] = fleet.Arrival{At: from + time.Duration(i)*time.Minute/time.Duration(n), ContextTokens: 2000, GeneratedTokens: 50}
	}
	return out
}

// TestOptimumSearchFindsTheFewestCount: walking from the previous minute's count finds, minute
// by minute, the same counts as trying every count from the minimum up (no cold start, so that
// every minute is searched).
func TestOptimumSearchFindsTheFewestCount(t *testing.T) {
	d := 4 * time.Minute
	cfg := optConfig(shippedArrivals(t, 12, d), d)
	cfg.ColdStart = 0
	walk := optimum(cfg, 2, 30, false)
	every := optimum(cfg, 2, 30, true)
	t.Logf("counts %v (%d minutes tried; %d trying every count)", walk.Counts, walk.Tries, every.Tries)
	if !slices.Equal(walk.Counts, every.Counts) {
		t.Fatalf("walk found %v, every count from 2 found %v", walk.Counts, every.Counts)
	}
	if walk.Tries >= every.Tries {
		t.Errorf("the walk tried %d minutes, no fewer than trying every count (%d)", walk.Tries, every.Tries)
	}
	for i, m := range walk.Timeline {
		if !m.Met || walk.Infeasible[i] {
			t.Errorf("minute %d of the shipped trace at 12x not met by the optimum: %+v", i, m)
		}
	}
}

// TestOptimumPaysForColdStarts: on an empty hour with one busy minute, the optimum runs the
// minimum except in that minute, and pays each added replica from its start, a cold start
// before the minute; a second busy minute soon after reuses the replicas that went away (paid
// for the gap, not a second cold start).
func TestOptimumPaysForColdStarts(t *testing.T) {
	d := 10 * time.Minute
	one := Optimum(optConfig(burst(5*time.Minute, 900), d), 2, 30)
	added := one.Counts[5] - 2
	t.Logf("counts %v gpu_seconds=%.0f", one.Counts, one.GPUHours*3600)
	for i, n := range one.Counts {
		if (i == 5) != (n > 2) {
			t.Fatalf("counts %v: want 2 in every minute but the busy one (5)", one.Counts)
		}
	}
	base := 2 * d.Seconds()
	// Each added replica: the cold start, the busy minute, then at most the drain grace.
	lo := base + float64(added)*(3*time.Minute+time.Minute).Seconds()
	hi := lo + float64(added)*drainGrace.Seconds()
	if got := one.GPUHours * 3600; got < lo || got > hi {
		t.Errorf("%.0f GPU-seconds for %d added replicas, want %.0f-%.0f (cold starts paid)", got, added, lo, hi)
	}

	two := Optimum(optConfig(append(burst(5*time.Minute, 900), burst(7*time.Minute, 900)...), d), 2, 30)
	t.Logf("counts %v gpu_seconds=%.0f", two.Counts, two.GPUHours*3600)
	if two.Counts[5] != one.Counts[5] || two.Counts[7] != one.Counts[5] || two.Counts[6] != 2 {
		t.Fatalf("counts %v: want %d in minutes 5 and 7, 2 in minute 6", two.Counts, one.Counts[5])
	}
	if full := 2*(one.GPUHours*3600-base) + base; two.GPUHours*3600 >= full {
		t.Errorf("%.0f GPU-seconds for two bursts, not below twice one burst's extra (%.0f): the second paid full cold starts", two.GPUHours*3600, full)
	}
}

// TestAMinuteNoCountMeetsIsMissedForEveryone: with at most 2 replicas, the busy minute cannot be
// met: the optimum runs 2 and marks it; a policy that met it anyway is not credited for it.
func TestAMinuteNoCountMeetsIsMissedForEveryone(t *testing.T) {
	d := 4 * time.Minute
	o := Optimum(optConfig(burst(2*time.Minute, 900), d), 2, 2)
	if !o.Infeasible[2] || o.Counts[2] != 2 || o.Infeasible[0] || o.Infeasible[1] {
		t.Fatalf("infeasible %v counts %v: want minute 2 infeasible at 2 replicas, 0 and 1 not", o.Infeasible, o.Counts)
	}
	feasible := 0.0
	for _, x := range o.Infeasible {
		if !x {
			feasible++
		}
	}
	all := Result{Timeline: make([]Minute, 4), GPUHours: 2 * o.GPUHours}
	for i := range all.Timeline {
		all.Timeline[i].Met = true
	}
	v := Against(all, o)
	if want := feasible / 4; v.SLOMinutes != want || v.OptimumSLOMinutes != want || v.SLOGap != 0 || v.GPUHoursRatio != 2 || v.MetInfeasible != 4-int(feasible) {
		t.Errorf("against the optimum: %+v; want %.2f SLO minutes for both (infeasible %v), no gap, 2x the GPU-hours", v, want, o.Infeasible)
	}
}

// TestOptimumLooksOneMinuteBack: a burst in the last two seconds of minute 0 completes in
// minute 1, queued on minute 0's replicas; minute 0 alone is met by the minimum (nothing
// completes in it), after which no count meets minute 1. The optimum redoes minute 0 with the
// fewest replicas after which minute 1 can be met (no cold start: minute 0 may add replicas).
func TestOptimumLooksOneMinuteBack(t *testing.T) {
	var arr []fleet.Arrival
	for i := range 100 {
		arr = append(arr, fleet.Arrival{At: 58*time.Second + time.Duration(i)*20*time.Millisecond, ContextTokens: 2000, GeneratedTokens: 20})
	}
	cfg := optConfig(arr, 3*time.Minute)
	cfg.ColdStart = 0
	o := Optimum(cfg, 2, 30)
	t.Logf("counts %v infeasible %v", o.Counts, o.Infeasible)
	if slices.Contains(o.Infeasible, true) || o.Counts[0] <= 2 {
		t.Fatalf("counts %v infeasible %v: want minute 0 raised above the minimum so that minute 1 is met", o.Counts, o.Infeasible)
	}
}

// TestOptimumIsNoWorseThanTheBestFixedFleet: on ten minutes of the shipped trace at 6x, the
// fewest fixed replicas that meet every minute cost at least the optimum's GPU-hours when both
// start from that many warm replicas, and the optimum meets every minute too.
func TestOptimumIsNoWorseThanTheBestFixedFleet(t *testing.T) {
	d := 10 * time.Minute
	cfg := optConfig(shippedArrivals(t, 6, d), d)
	var best Result
	for n := int32(4); n <= 30; n++ {
		cfg.Initial = n
		if r := Run(cfg, fixed{n: n}); r.SLOMinutes == 1 {
			best = r
			t.Logf("fewest fixed replicas meeting every minute: %d, %.2f GPU-hours", n, r.GPUHours)
			break
		}
	}
	if best.Timeline == nil {
		t.Fatal("no fixed count up to 30 meets every minute")
	}
	o := Optimum(cfg, 2, 30)
	t.Logf("optimum: counts %v, %.2f GPU-hours, SLO minutes %.3f", o.Counts, o.GPUHours, o.SLOMinutes)
	if o.SLOMinutes != 1 || o.GPUHours > best.GPUHours {
		t.Errorf("optimum %.3f SLO minutes on %.2f GPU-hours; the best fixed fleet 1.000 on %.2f", o.SLOMinutes, o.GPUHours, best.GPUHours)
	}
}

// HeldFor is the rolling maximum's replica-minutes over the counts': a flat need costs nothing
// more, a one-minute peak of 6 over 2 held for 4 minutes costs three more minutes at 6.
func TestHeldForIsTheRollingMaximumOverTheCounts(t *testing.T) {
	for _, tc := range []struct {
		counts  []int32
		minutes int
		want    float64
	}{
		{[]int32{3, 3, 3, 3}, 4, 1},
		{[]int32{2, 6, 2, 2, 2, 2}, 4, float64(2+6+6+6+6+2) / float64(2+6+2+2+2+2)},
		{[]int32{2, 6, 2, 2}, 1, 1},
		{nil, 4, 0},
	} {
		if got := (OptimumResult{Counts: tc.counts}).HeldFor(tc.minutes); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("HeldFor(%v, %d) = %.4f, want %.4f", tc.counts, tc.minutes, got, tc.want)
		}
	}
}

// TestOptimumStartsNoReplicaBeforeTheRun: a burst in minute 1 with a cold start of 3 minutes
// would need replicas started before the run, as no policy can: the optimum keeps its 2 initial
// replicas for the first cold start (none added, none removed), marks the minute missed for
// everyone, and adds replicas for the same burst in minute 5.
func TestOptimumStartsNoReplicaBeforeTheRun(t *testing.T) {
	d := 7 * time.Minute
	o := Optimum(optConfig(append(burst(time.Minute, 900), burst(5*time.Minute, 900)...), d), 2, 30)
	t.Logf("counts %v infeasible %v", o.Counts, o.Infeasible)
	if !slices.Equal(o.Counts[:3], []int32{2, 2, 2}) || !o.Infeasible[1] {
		t.Fatalf("counts %v infeasible %v: want 2 replicas in minutes 0-2 and minute 1 missed for everyone", o.Counts, o.Infeasible)
	}
	if o.Counts[5] <= 2 || o.Infeasible[5] {
		t.Fatalf("counts %v infeasible %v: want replicas added for minute 5, met", o.Counts, o.Infeasible)
	}
}
