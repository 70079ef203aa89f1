package analysis

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
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

// nullRollout draws a three-step rollout's windows (1, 3 and 8 candidate pods beside 8 stable
// ones, each step's window growing over looks looks of per requests per pod, latencies of
// lag-1 autocorrelation phi, the candidate's times mult) and hands each look's samples to
// judge, until it returns true.
func nullRollout(rng *rand.Rand, looks, per int, phi, mult float64, judge func(look Look, cand, stable HistogramSample) (stop bool)) {
	for step := 1; step <= 3; step++ {
		cand := make([][]float64, []int{1, 3, 8}[step-1])
		stable := make([][]float64, 8)
		for k := 1; k <= looks; k++ {
			for p := range cand {
				cand[p] = append(cand[p], podLatencies(rng, per, phi, mult)...)
			}
			for p := range stable {
				stable[p] = append(stable[p], podLatencies(rng, per, phi, 1)...)
			}
			if judge(Look{Step: step, Info: float64(k), Looks: 1}, sample(cand), sample(stable)) {
				return
			}
		}
	}
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

// TestFailZSpendsTheErrorBudgetOverTheData: the thresholds rise with steps and with each
// doubling of the data, never within a doubling, and the bands' budgets sum to at most Alpha.
func TestFailZSpendsTheErrorBudgetOverTheData(t *testing.T) {
	if z := FailZ(Look{Step: 1, Info: 1}); math.Abs(z-3.29) > 0.01 {
		t.Errorf("first window's threshold %.3f, want 3.29 (a continuous watch over one doubling at 1 - 0.01/4)", z)
	}
	if a, b := FailZ(Look{}), FailZ(Look{Step: 1, Info: 1.99}); a != b {
		t.Errorf("threshold moved within the first doubling: %.3f -> %.3f", a, b)
	}
	var spent float64
	for s := 1; s <= 200; s++ {
		prev := 0.0
		for j := range 200 {
			z := FailZ(Look{Step: s, Info: math.Pow(2, float64(j))})
			if z <= prev {
				t.Fatalf("step %d band %d: threshold %.3f is not above the previous band's %.3f", s, j, z, prev)
			}
			prev = z
			if j == 0 && s > 1 && z <= FailZ(Look{Step: s - 1}) {
				t.Fatalf("step %d starts at %.3f, not above step %d's", s, z, s-1)
			}
			spent += bandTail(z)
		}
	}
	if spent > Alpha {
		t.Errorf("spent %g of the budget %g", spent, Alpha)
	}
}

// TestFailZHoldsTheBudgetWhateverTheInterval: an identical candidate's z on a window that grows
// (a standardized Brownian motion in information time) watched at every 1/64 of the first
// window, over 256 times its data, fails the first step's threshold in at most its share of
// the budget (Alpha/2): the threshold pays for the looks of any interval, however short. It
// prints the rate, and the rate of a threshold counted per look at that interval (the judge
// before), which spends its budget on looks and so fails less, and catches less.
func TestFailZHoldsTheBudgetWhateverTheInterval(t *testing.T) {
	const (
		paths   = 20000
		perUnit = 64 // looks per first window's worth of data
		bands   = 8  // up to 2^8 times the first window
	)
	rng := rand.New(rand.NewPCG(7, 31))
	var threshold [bands + 1]float64 // FailZ is constant within a doubling
	for j := range threshold {
		threshold[j] = FailZ(Look{Step: 1, Info: math.Pow(2, float64(j))})
	}
	crossed := 0
	for range paths {
		// The first window's data at once, then 1/perUnit of it per look.
		b := rng.NormFloat64() * math.Sqrt(perUnit)
		for k := perUnit; k <= perUnit<<bands; k++ {
			if k > perUnit {
				b += rng.NormFloat64()
			}
			j := bits.Len(uint(k/perUnit)) - 1
			if b/math.Sqrt(float64(k)) >= threshold[j] {
				crossed++
				break
			}
		}
	}
	rate := float64(crossed) / paths
	fmt.Printf("FIGURE sequential_budget looks=%d_per_window data=1..%dx rollouts=%d failed=%d (%.3f%%, budget of step 1: %.3f%%)\n",
		perUnit, 1<<bands, paths, crossed, 100*rate, 100*Alpha/2)
	if rate > Alpha/2 {
		t.Errorf("an identical candidate watched every 1/%d window failed %.3f%% of rollouts at step 1, want at most %.3f%%", perUnit, 100*rate, 100*Alpha/2)
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
		nullRollout(rand.New(rand.NewPCG(seed, 27)), looks, per, phi, mult, func(look Look, cs, ss HistogramSample) bool {
			if r := JudgeHistogram(m, cs, ss, 20, look, now); r.Verdict == "Fail" {
				failed = true
			}
			z, nc, ns := RankTest(cs.Histogram, ss.Histogram, ratio, cs.Histogram.Total(), ss.Histogram.Total())
			if nc >= minObservations && ns >= minObservations && z >= 2.3263478740408408 {
				naiveFailed = true
			}
			return failed && naiveFailed
		})
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

// TestTheDesignEffectPoolsBothColors: on long heavy-tailed prompts one long prompt
// holds up a pod's batch, and every request of that pod's window is slower (the code-bursty
// workload of #27). Some windows' stable pods are all spared while a few candidate pods are
// held up, by chance, in an identical candidate: the stable color then shows no clustering
// while the candidate's pods differ widely among themselves. Judged at the stable color's
// design effect, such identical candidates failed (z 3.7-9 in the simulator); judged at the
// larger of the two colors' own design effects, an identical candidate fails within the error
// budget, and a candidate slower on every pod is still caught (its pods' ranks are centred on
// its own, so a uniform slowdown does not inflate its design effect).
func TestTheDesignEffectPoolsBothColors(t *testing.T) {
	const (
		seeds      = 400
		per        = 120  // requests per pod in the window
		longPrompt = 0.15 // chance that a long prompt holds up a pod's window
	)
	m := histogramMetric()
	pod := func(rng *rand.Rand, mult, held float64) []float64 {
		slow := 1.0
		if rng.Float64() < held {
			slow = 2 + 2*rng.Float64() // queued behind the long prompt
		}
		return podLatencies(rng, per, 0, mult*slow)
	}
	failures := func(mult, held float64) int {
		fails := 0
		for s := range uint64(seeds) {
			rng := rand.New(rand.NewPCG(s, 2048))
			cand, stable := make([][]float64, 3), make([][]float64, 8)
			for p := range cand {
				cand[p] = pod(rng, mult, held)
			}
			for p := range stable {
				stable[p] = pod(rng, 1, held)
			}
			if JudgeHistogram(m, sample(cand), sample(stable), 20, Look{Step: 2, Info: 1, Looks: 1}, now).Verdict == "Fail" {
				fails++
			}
		}
		return fails
	}
	aa, slower := failures(1, longPrompt), failures(1.5, 0)
	fmt.Printf("FIGURE clustered_candidate_pods runs=%d identical_failed=%d (%.1f%%) unclustered_1.5x_failed=%d (%.1f%%)\n",
		seeds, aa, 100*float64(aa)/seeds, slower, 100*float64(slower)/seeds)
	if float64(aa)/seeds > 2*Alpha {
		t.Errorf("an identical candidate whose pods are clustered failed %d of %d windows, want at most %.0f%%", aa, seeds, 200*Alpha)
	}
	if slower < seeds*7/10 { // 74% at the stable color's design effect alone
		t.Errorf("a 1.5x slower candidate on unclustered pods failed only %d of %d windows", slower, seeds)
	}
}

// TestAConfidentPassHoldsTheErrorBudgetAtTheBound: a confident Pass (which ends a step before
// its stepDuration) is the mirror of a Fail, so a candidate exactly at the bound (1.2x the
// stable color's latencies) or beyond it passes confidently at some look of some step in at
// most about Alpha of its rollouts, on pods whose requests queue behind each other as on
// independent ones. Its power is that of a Fail against a candidate 1.2x beyond the bound: an
// identical candidate on independent requests is confident at the end of the third step (8
// candidate pods) in about a third of the rollouts with 720 requests per color (log-normal
// latencies of sigma 0.8 in coarse buckets), and in nearly all with four times as many; at
// the first step (one pod) rarely, and the step then lasts its stepDuration.
func TestAConfidentPassHoldsTheErrorBudgetAtTheBound(t *testing.T) {
	const (
		seeds = 300
		looks = 6
	)
	m := histogramMetric()
	// run reports whether any look of a three-step rollout passed confidently, and whether
	// the last look of each step did; per is the requests per pod per look.
	run := func(seed uint64, mult, phi float64, per int) (any bool, atEnd [3]bool) {
		nullRollout(rand.New(rand.NewPCG(seed, 29)), looks, per, phi, mult, func(look Look, cs, ss HistogramSample) bool {
			r := JudgeHistogram(m, cs, ss, 20, look, now)
			confident := r.Confident != nil && *r.Confident
			if confident && r.Verdict != "Pass" {
				t.Fatalf("confident %s: %s", r.Verdict, r.Message)
			}
			any = any || confident
			atEnd[look.Step-1] = confident
			return false
		})
		return any, atEnd
	}
	for _, c := range []struct {
		name      string
		mult, phi float64
		per       int
	}{
		{"at the bound, clustered", 1.2, 0.9, 15},
		{"at the bound, independent", 1.2, 0, 15},
		{"at the bound, independent, 4x the requests", 1.2, 0, 60},
		{"1.5x, clustered", 1.5, 0.9, 15},
		{"identical, clustered", 1, 0.9, 15},
		{"identical, independent", 1, 0, 15},
		{"identical, independent, 4x the requests", 1, 0, 60},
	} {
		var anyN int
		var endN [3]int
		for s := range uint64(seeds) {
			a, e := run(s, c.mult, c.phi, c.per)
			if a {
				anyN++
			}
			for i, x := range e {
				if x {
					endN[i]++
				}
			}
		}
		fmt.Printf("FIGURE confident-pass candidate=%q rollouts=%d confident_at_some_look=%d (%.1f%%) confident_at_the_end_of_steps_1_2_3=%v\n",
			c.name, seeds, anyN, 100*float64(anyN)/seeds, endN)
		switch {
		case c.mult > 1 && float64(anyN)/seeds > 3*Alpha:
			t.Errorf("%s: confident in %d of %d rollouts, want at most %.0f%%", c.name, anyN, seeds, 300*Alpha)
		case c.mult == 1 && c.phi == 0 && c.per == 15 && endN[2] < seeds/4:
			t.Errorf("%s: confident at the end of step 3 in only %d of %d rollouts", c.name, endN[2], seeds)
		case c.mult == 1 && c.phi == 0 && c.per == 60 && endN[2] < seeds*9/10:
			t.Errorf("%s: confident at the end of step 3 in only %d of %d rollouts", c.name, endN[2], seeds)
		}
	}
}

// TestASlowCandidateIsTestedFromItsFirstTestableLook: a step whose candidate gathers its
// minSamples requests only after several windows (a short window, one candidate pod at a low
// rate) is judged at its first tested look against the first band's threshold, not against
// one raised by the windows in which nothing could be tested: the same data fail there and
// pass with the sample gate off (the step's clock counted in windows).
func TestASlowCandidateIsTestedFromItsFirstTestableLook(t *testing.T) {
	look := Look{Step: 1, Info: 4, Looks: 1} // four windows in, one look per window
	if got, want := FailZ(look.Tested(20, 20)), FailZ(Look{Step: 1}); got != want {
		t.Errorf("first tested look (20 of 20 samples) four windows in: threshold %.3f, want the first band's %.3f", got, want)
	}
	if got, want := FailZ(look.Tested(100, 20)), FailZ(look); got != want {
		t.Errorf("samples five times the gate four windows in: threshold %.3f, want the window clock's %.3f", got, want)
	}
	if got := look.Tested(30, 0); got != look {
		t.Errorf("no sample gate: look %+v, want %+v unchanged", got, look)
	}
	m := v1alpha1.AnalysisMetric{Name: metrics.MetricAbortRatio, Query: "q", MaxRatioToStable: resource.NewMilliQuantity(1500, resource.DecimalSI)}
	ok := func(v float64) metrics.Sample { return metrics.Sample{Status: metrics.OK, Value: v} }
	// 2 of 20 candidate requests against 1% of 2,000: z 3.62, between 3.29 and FailZ(look).
	gated := JudgeProportion(m, ok(0.1), ok(0.01), ok(20), ok(2000), 20, look, now)
	ungated := JudgeProportion(m, ok(0.1), ok(0.01), ok(20), ok(2000), 0, look, now)
	if gated.Verdict != v1alpha1.VerdictFail || ungated.Verdict != v1alpha1.VerdictPass {
		t.Errorf("gated: %s (%s); ungated: %s (%s); want Fail at the first tested look, Pass on the window clock", gated.Verdict, gated.Message, ungated.Verdict, ungated.Message)
	}
}

// TestTheSampleClockHoldsTheBudget: an identical candidate whose requests trickle in (the
// gate's minSamples reached after eight windows, then about a sixteenth of it per look, one look
// per window) watched until 64 times its first tested data fails the first step's threshold
// in at most its share of the budget (Alpha/2). A clock from the samples that kept the union
// bound over a window's one look (2.81 where the band's is 3.29) fails about twice as often.
func TestTheSampleClockHoldsTheBudget(t *testing.T) {
	const (
		paths      = 20000
		minSamples = 32
		perLook    = 2 // requests per look: 16 looks per doubling of the first tested data
		lastLook   = 64 * minSamples / perLook
	)
	memo := map[Look]float64{} // FailZ is constant within a band
	failZ := func(l Look) float64 {
		l.Info = math.Exp2(math.Floor(math.Log2(max(l.Info, 1))))
		z, ok := memo[l]
		if !ok {
			z = FailZ(l)
			memo[l] = z
		}
		return z
	}
	rng := rand.New(rand.NewPCG(11, 5))
	crossed, loose := 0, 0
	for range paths {
		var b float64 // the sum of the candidate's standardized observations
		hit, hitLoose := false, false
		for k := 1; k <= lastLook && (!hit || !hitLoose); k++ {
			for range perLook {
				b += rng.NormFloat64()
			}
			n := float64(k * perLook)
			if n < minSamples {
				continue // too few samples: not a test
			}
			look := Look{Step: 1, Info: float64(k), Looks: 1}.Tested(n, minSamples)
			z := b / math.Sqrt(n)
			hit = hit || z >= failZ(look)
			l := look
			l.Looks = 1
			hitLoose = hitLoose || z >= failZ(l)
		}
		if hit {
			crossed++
		}
		if hitLoose {
			loose++
		}
	}
	rate := float64(crossed) / paths
	fmt.Printf("FIGURE sample_clock rollouts=%d failed=%d (%.3f%%, budget of step 1: %.3f%%); with a look's union bound: %d (%.3f%%)\n",
		paths, crossed, 100*rate, 100*Alpha/2, loose, 100*float64(loose)/paths)
	if rate > Alpha/2 {
		t.Errorf("an identical candidate on the sample clock failed %.3f%% of rollouts at step 1, want at most %.3f%%", 100*rate, 100*Alpha/2)
	}
}
