package analysis

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/modelship/modelship/internal/metrics"
)

// latencyBounds are bucket bounds like vLLM's time-to-first-token histogram's.
var latencyBounds = []float64{0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// toBuckets counts latencies into a cumulative histogram over latencyBounds and +Inf.
func toBuckets(xs []float64) metrics.Histogram {
	h := make(metrics.Histogram, len(latencyBounds)+1)
	for i, b := range latencyBounds {
		h[i].UpperBound = b
	}
	h[len(latencyBounds)].UpperBound = math.Inf(1)
	for _, x := range xs {
		for i := range h {
			if x <= h[i].UpperBound {
				h[i].Count++
			}
		}
	}
	return h
}

// podLatencies draws n latencies of one pod: log-normal around median 0.3 s (sigma 0.8), as an
// AR(1) process in log space with lag-1 autocorrelation phi (a queue: a slow request slows
// those behind it), times mult.
func podLatencies(rng *rand.Rand, n int, phi, mult float64) []float64 {
	out := make([]float64, n)
	x := rng.NormFloat64()
	for i := range out {
		x = phi*x + math.Sqrt(1-phi*phi)*rng.NormFloat64()
		out[i] = mult * 0.3 * math.Exp(0.8*x)
	}
	return out
}

// sumHistograms adds histograms of the same buckets.
func sumHistograms(hs []metrics.Histogram) metrics.Histogram {
	out := make(metrics.Histogram, len(hs[0]))
	copy(out, hs[0])
	for i := range out {
		out[i].Count = 0
	}
	for _, h := range hs {
		for i := range h {
			out[i].Count += h[i].Count
		}
	}
	return out
}

// TestTheDesignEffectGrowsWithAutocorrelation: pods whose requests are independent show a
// design effect near 1; pods whose requests queue behind each other (lag-1 autocorrelation
// 0.9) show a large one, close to (1 + phi) / (1 - phi) = 19 for long runs.
func TestTheDesignEffectGrowsWithAutocorrelation(t *testing.T) {
	for _, tc := range []struct {
		phi      float64
		min, max float64
	}{{0, 0.3, 2}, {0.5, 1.5, 5}, {0.9, 5, 40}} {
		rng := rand.New(rand.NewPCG(1, uint64(tc.phi*100)))
		var sum float64
		const reps = 50
		for range reps {
			pods := make([]metrics.Histogram, 8)
			for p := range pods {
				pods[p] = toBuckets(podLatencies(rng, 100, tc.phi, 1))
			}
			d, ok := DesignEffect(pods)
			if !ok {
				t.Fatalf("phi %g: no design effect from 8 pods", tc.phi)
			}
			sum += d
		}
		mean := sum / reps
		fmt.Printf("FIGURE design_effect phi=%.1f mean=%.2f\n", tc.phi, mean)
		if mean < tc.min || mean > tc.max {
			t.Errorf("phi %g: mean design effect %.2f, want between %g and %g", tc.phi, mean, tc.min, tc.max)
		}
	}
	if _, ok := DesignEffect([]metrics.Histogram{toBuckets([]float64{0.1, 0.2})}); ok {
		t.Error("one group gave a design effect: it cannot show its own variance")
	}
}

// TestFailZSpendsTheErrorBudgetOverEveryLook: the thresholds rise with steps and looks, and
// their tail probabilities sum to at most Alpha.
func TestFailZSpendsTheErrorBudgetOverEveryLook(t *testing.T) {
	if z := FailZ(Look{Step: 1, Index: 1}); math.Abs(z-2.807) > 0.01 {
		t.Errorf("first look's threshold %.3f, want 2.807 (1 - 0.01/4)", z)
	}
	var spent float64
	prev := 0.0
	for s := 1; s <= 200; s++ {
		for k := 1; k <= 200; k++ {
			z := FailZ(Look{Step: s, Index: k})
			if s == 1 && z <= prev {
				t.Fatalf("look %d's threshold %.3f is not above the previous %.3f", k, z, prev)
			}
			if s == 1 {
				prev = z
			}
			spent += 0.5 * math.Erfc(z/math.Sqrt2)
		}
	}
	if spent > Alpha {
		t.Errorf("spent %g of the budget %g", spent, Alpha)
	}
}

// TestTheSequentialTestHoldsOnClusteredNullData runs many seeded rollouts of an identical
// candidate on queued (autocorrelated) data: three steps, each looked at six times on a window
// that grows (the step's requests so far), one candidate pod at the first step beside eight
// stable ones. It prints how often the rank test ever failed a rollout with the design effect
// and, for comparison, with the observations counted as independent at a fixed 99%, and how
// often it catches candidates 1.5x and 3x slower. The error rate at the nominal budget is
// asserted loosely (three times Alpha): the figure is the result.
func TestTheSequentialTestHoldsOnClusteredNullData(t *testing.T) {
	const (
		seeds = 300
		looks = 6
		per   = 15 // requests per pod per look
		phi   = 0.9
	)
	m := histogramMetric()
	ratio := m.MaxRatioToStable.AsApproximateFloat64()
	run := func(seed uint64, mult float64) (failed, naiveFailed bool) {
		rng := rand.New(rand.NewPCG(seed, 27))
		for step := 1; step <= 3; step++ {
			candPods := []int{1, 3, 8}[step-1]
			cand := make([][]float64, candPods)
			stable := make([][]float64, 8)
			for k := 1; k <= looks; k++ {
				for p := range cand {
					cand[p] = append(cand[p], podLatencies(rng, per, phi, mult)...)
				}
				for p := range stable {
					stable[p] = append(stable[p], podLatencies(rng, per, phi, 1)...)
				}
				cs, ss := sample(cand), sample(stable)
				r := JudgeHistogram(m, cs, ss, 20, Look{Step: step, Index: k}, now)
				if r.Verdict == "Fail" {
					failed = true
				}
				z, nc, ns := RankTest(cs.Histogram, ss.Histogram, ratio, cs.Histogram.Total(), ss.Histogram.Total())
				if nc >= minObservations && ns >= minObservations && z >= 2.3263478740408408 {
					naiveFailed = true
				}
				if failed && naiveFailed {
					return
				}
			}
		}
		return
	}
	for _, c := range []struct {
		name string
		mult float64
	}{{"identical", 1}, {"1.5x", 1.5}, {"3x", 3}} {
		var fails, naive int
		for s := range uint64(seeds) {
			f, n := run(s, c.mult)
			if f {
				fails++
			}
			if n {
				naive++
			}
		}
		fmt.Printf("FIGURE sequential candidate=%s rollouts=%d failed=%d (%.1f%%) independent_99pct_failed=%d (%.1f%%)\n",
			c.name, seeds, fails, 100*float64(fails)/seeds, naive, 100*float64(naive)/seeds)
		if c.mult == 1 && float64(fails)/seeds > 3*Alpha {
			t.Errorf("an identical candidate failed %d of %d rollouts, want at most %.0f%%", fails, seeds, 300*Alpha)
		}
		if c.mult == 3 && fails < seeds*9/10 {
			t.Errorf("a 3x slower candidate failed only %d of %d rollouts", fails, seeds)
		}
	}
}

// sample is a color's window from its pods' latencies.
func sample(pods [][]float64) HistogramSample {
	groups := make([]metrics.Histogram, len(pods))
	for i, p := range pods {
		groups[i] = toBuckets(p)
	}
	h := sumHistograms(groups)
	return HistogramSample{Histogram: h, Groups: groups, Requests: metrics.Sample{Status: metrics.OK, Value: h.Total()}}
}
