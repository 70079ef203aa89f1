package analysis

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// drawPods draws one color's per-pod decode seconds and decoded tokens over a window: each
// pod's work is log-normal around tokens (sigma workSpread: pods carry different loads), and
// its mean seconds per token is perToken times a pod effect exp(tau N(0,1)) (its batch sizes,
// its prompts' prefill stalls), plus the noise of averaging its tokens (relative sigma
// tokenNoise / sqrt(tokens)).
func drawPods(rng *rand.Rand, pods int, tokens, workSpread, perToken, tau, tokenNoise float64) []UnitSum {
	out := make([]UnitSum, pods)
	for i := range out {
		d := math.Max(1, math.Round(tokens*math.Exp(workSpread*rng.NormFloat64()-workSpread*workSpread/2)))
		m := perToken * math.Exp(tau*rng.NormFloat64()+tokenNoise/math.Sqrt(d)*rng.NormFloat64())
		out[i] = UnitSum{Pod: fmt.Sprintf("pod-%d", i), Numerator: m * d, Denominator: d}
	}
	return out
}

// The per-unit test holds its level when the candidate is exactly at its bound: on pods whose
// means vary by more than their work explains, by just what their work explains, and with a
// candidate pod that did a tenth of a stable pod's work, whatever the number of candidate pods.
func TestPerUnitTestHoldsItsLevelAtTheBound(t *testing.T) {
	const runs, ratio = 20000, 1.2
	a := Alpha / 4 // step 1, first doubling: FailZ's budget for one look
	threshold := normalQuantile(1 - a)
	for _, tc := range []struct {
		name                    string
		tau, tokenNoise, spread float64
		candTokens              float64
	}{
		{"pods that differ by more than their work", 0.08, 0.5, 0.4, 2000},
		{"pods that differ by their work alone", 0, 1, 0.6, 2000},
		{"a candidate pod with a tenth of a stable pod's work", 0.03, 1, 0.3, 200},
	} {
		for _, candPods := range []int{1, 2, 4, 8} {
			t.Run(fmt.Sprintf("%s, %d candidate pods", tc.name, candPods), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(candPods), 7))
				fails := 0
				for range runs {
					stable := drawPods(rng, 8, 2000, tc.spread, 0.02, tc.tau, tc.tokenNoise)
					cand := drawPods(rng, candPods, tc.candTokens, tc.spread, 0.02*ratio, tc.tau, tc.tokenNoise)
					if z, _ := PerUnitTest(cand, stable, ratio); z >= threshold {
						fails++
					}
				}
				rate := float64(fails) / runs
				t.Logf("FIGURE/perunit_level=%.4f budget=%.4f", rate, a)
				// 1.5x the budget: 3 binomial standard deviations above it at 20,000 runs.
				if rate > 1.5*a {
					t.Errorf("a candidate at its bound failed %d of %d windows (%.3f%%); the budget is %.3f%%", fails, runs, 100*rate, 100*a)
				}
			})
		}
	}
}

// perUnitRollout judges decode-per-token (at most 1.2x stable) over a rollout of steps of 1, 2,
// 4 and 8 candidate pods beside 8 stable ones, each looked at over windows of 1, 2 and 4 times
// the first's work, the candidate's pods mult times slower per token (pods 6% apart), and
// returns the first step at which stop says so of a look's result (0: none).
func perUnitRollout(rng *rand.Rand, mult float64, stop func(v1alpha1.MetricResult) bool) int {
	m := v1alpha1.AnalysisMetric{Name: "decode-per-token", MaxRatioToStable: resource.NewMilliQuantity(1200, resource.DecimalSI),
		PerUnit: &v1alpha1.AnalysisPerUnit{NumeratorQuery: "n", DenominatorQuery: "d"}}
	requests := metrics.Sample{Status: metrics.OK, Value: 200}
	for step, candPods := range []int{1, 2, 4, 8} {
		for _, info := range []float64{1, 2, 4} {
			stable := drawPods(rng, 8, 1500*info, 0.4, 0.02, 0.06, 0.5)
			cand := drawPods(rng, candPods, 1500*info, 0.4, 0.02*mult, 0.06, 0.5)
			if stop(JudgePerUnit(m, PerUnitSample{Units: cand, Requests: requests}, PerUnitSample{Units: stable, Requests: requests}, 20, Look{Step: step + 1, Info: info, Looks: 2}, time.Unix(0, 0))) {
				return step + 1
			}
		}
	}
	return 0
}

// An identical candidate is never rolled back over a whole rollout (steps of 1, 2, 4 and 8
// candidate pods beside 8 stable ones, each step looked at over doubling windows), and a 1.5x
// slower one is caught in nearly every rollout, most by its third step (four candidate pods).
func TestJudgePerUnitHoldsTheBudgetAndCatchesA1_5xCandidate(t *testing.T) {
	const runs = 2000
	rollout := func(rng *rand.Rand, mult float64) (failedAtStep int) {
		return perUnitRollout(rng, mult, func(r v1alpha1.MetricResult) bool { return r.Verdict == v1alpha1.VerdictFail })
	}
	rng := rand.New(rand.NewPCG(1, 2))
	aaFails := 0
	for range runs {
		if rollout(rng, 1) > 0 {
			aaFails++
		}
	}
	var caughtAt [5]int
	for range runs {
		caughtAt[rollout(rng, 1.5)]++
	}
	caught := runs - caughtAt[0]
	t.Logf("FIGURE/perunit_aa_rollbacks=%d of %d; 1.5x caught %d, at steps 1-4: %v", aaFails, runs, caught, caughtAt[1:])
	if aaFails > runs/100 {
		t.Errorf("%d of %d identical candidates rolled back; the budget is 1%%", aaFails, runs)
	}
	if caught < runs*95/100 || caughtAt[1]+caughtAt[2]+caughtAt[3] < runs*9/10 {
		t.Errorf("a 1.5x slower candidate was caught in %d of %d rollouts, %v at steps 1-4; want at least 95%%, 90%% by step 3", caught, runs, caughtAt[1:])
	}
}

func TestTToZ(t *testing.T) {
	for _, tc := range []struct{ t, df, want float64 }{
		{3.499, 7, 2.576},   // t(0.995, 7)
		{2.015, 5, 1.645},   // t(0.95, 5)
		{6.965, 2, 2.326},   // t(0.99, 2)
		{2.81, 1e7, 2.81},   // the normal, for many degrees of freedom
		{-3.499, 7, -2.576}, // symmetric
		{0, 3, 0},           // the median
		{12.92, 3, 3.2905},  // t(0.9995, 3)
		{63.66, 1, 2.5758},  // t(0.995, 1)
	} {
		if got := tToZ(tc.t, tc.df); math.Abs(got-tc.want) > 0.003 {
			t.Errorf("tToZ(%g, %g) = %.4f; want %.4f", tc.t, tc.df, got, tc.want)
		}
	}
}

func TestJudgePerUnit(t *testing.T) {
	at := time.Unix(100, 0)
	ok := metrics.Sample{Status: metrics.OK, Value: 200}
	relative := v1alpha1.AnalysisMetric{Name: "decode-per-token", MaxRatioToStable: resource.NewMilliQuantity(1200, resource.DecimalSI),
		PerUnit: &v1alpha1.AnalysisPerUnit{NumeratorQuery: "n", DenominatorQuery: "d"}}
	withMax := *relative.DeepCopy()
	withMax.Max = resource.NewMilliQuantity(25, resource.DecimalSI) // 25 ms per token
	// pods gives each pod its seconds per token over 1000 tokens.
	pods := func(perToken ...float64) PerUnitSample {
		s := PerUnitSample{Requests: ok}
		for i, p := range perToken {
			s.Units = append(s.Units, UnitSum{Pod: fmt.Sprintf("p%d", i), Numerator: p * 1000, Denominator: 1000})
		}
		return s
	}
	stable := pods(0.020, 0.021, 0.019, 0.0205, 0.0195, 0.020, 0.0202, 0.0198)
	tests := []struct {
		name     string
		m        v1alpha1.AnalysisMetric
		cand     PerUnitSample
		stable   PerUnitSample
		want     v1alpha1.Verdict
		contains []string
	}{
		{"passes a candidate as fast as stable", relative, pods(0.0201), stable, v1alpha1.VerdictPass, []string{"decode-per-token 0.0201 <= 0.024", "pods: candidate 1, stable 8"}},
		{"fails a candidate 1.5x slower on one pod", relative, pods(0.030), stable, v1alpha1.VerdictFail, []string{"slower than 1.2x stable", "z "}},
		{"holds a candidate a little above the bound", relative, pods(0.0245), stable, v1alpha1.VerdictInconclusive, []string{"not significant"}},
		{"holds a slower candidate with too few pods to estimate their spread", relative, pods(0.030), pods(0.020, 0.021), v1alpha1.VerdictInconclusive, []string{"too few pods"}},
		{"passes a candidate as fast as stable with one pod per color", relative, pods(0.0201), pods(0.020), v1alpha1.VerdictPass, []string{"too few to fail on"}},
		{"holds without the candidate's requests", relative, PerUnitSample{Units: pods(0.02).Units, Requests: metrics.Sample{Status: metrics.OK, Value: 5}}, stable, v1alpha1.VerdictInconclusive, []string{"too few samples: 5 < 20"}},
		{"holds when the candidate did no work", relative, PerUnitSample{Requests: ok}, stable, v1alpha1.VerdictInconclusive, []string{"no work"}},
		{"holds when Prometheus failed for the stable color", relative, pods(0.030), PerUnitSample{Err: errors.New("down")}, v1alpha1.VerdictInconclusive, []string{"stable: down"}},
		{"fails the absolute bound without a stable color", withMax, pods(0.030), PerUnitSample{Err: errors.New("down")}, v1alpha1.VerdictFail, []string{"0.03 > 0.025"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := JudgePerUnit(tc.m, tc.cand, tc.stable, 20, Look{Step: 1, Info: 1, Looks: 2}, at)
			if r.Verdict != tc.want {
				t.Errorf("verdict %s (%s); want %s", r.Verdict, r.Message, tc.want)
			}
			for _, c := range tc.contains {
				if !strings.Contains(r.Message, c) {
					t.Errorf("message %q does not contain %q", r.Message, c)
				}
			}
		})
	}
}

// A per-unit Pass is confident as a Fail is sure, on the other side: a candidate exactly at its
// bound (1.2x stable's seconds per token) passes confidently in at most about Alpha of its
// rollouts (every look of steps of 1, 2, 4 and 8 candidate pods), and an identical candidate
// on pods whose speed differs by 6% passes confidently at some step in nine rollouts of ten
// (96%: a third by its second step, the rest as more pods join).
func TestJudgePerUnitIsConfidentOnlyWithinItsBound(t *testing.T) {
	const runs = 2000
	// confidentAt is the first step with a confident look (0: none).
	confidentAt := func(rng *rand.Rand, mult float64) int {
		return perUnitRollout(rng, mult, func(r v1alpha1.MetricResult) bool {
			if r.Confident == nil {
				t.Fatalf("a relative per-unit result without confident: %+v", r)
			}
			if *r.Confident && (r.Verdict != v1alpha1.VerdictPass || !strings.Contains(r.Message, "confidently")) {
				t.Fatalf("confident %s: %q", r.Verdict, r.Message)
			}
			return *r.Confident
		})
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var atBound, identical [5]int
	for range runs {
		atBound[confidentAt(rng, 1.2)]++
		identical[confidentAt(rng, 1)]++
	}
	t.Logf("FIGURE/perunit_confident at the bound: %d of %d; identical: %d, first at steps 1-4: %v", runs-atBound[0], runs, runs-identical[0], identical[1:])
	if n := runs - atBound[0]; n > runs/100 {
		t.Errorf("a candidate at its bound passed confidently in %d of %d rollouts; the budget is 1%%", n, runs)
	}
	if n := runs - identical[0]; n < runs*9/10 {
		t.Errorf("an identical candidate was confident in %d of %d rollouts (first at steps 1-4: %v)", n, runs, identical[1:])
	}
}

// TestALighterCandidateIsNeverClearedOnItsFasterRead: where each candidate pod carries less
// than a stable pod (Look.Load 0.33: a 1-pod stable color at a 25% step), a model server reads
// faster than it is. Such a step only moves the candidate on: a Fail stands (slower even while
// lighter), a read above the bound far from significant does not hold it (one near
// significance does), and the last step, which promotes, holds such a read and is never
// confident; at a stable pod's load nothing changes.
func TestALighterCandidateIsNeverClearedOnItsFasterRead(t *testing.T) {
	at := time.Unix(100, 0)
	ok := metrics.Sample{Status: metrics.OK, Value: 200}
	relative := v1alpha1.AnalysisMetric{Name: "decode-per-token", MaxRatioToStable: resource.NewMilliQuantity(1200, resource.DecimalSI),
		PerUnit: &v1alpha1.AnalysisPerUnit{NumeratorQuery: "n", DenominatorQuery: "d"}}
	// pods gives each pod its seconds per token over tokens tokens.
	pods := func(tokens float64, perToken ...float64) PerUnitSample {
		s := PerUnitSample{Requests: ok}
		for i, p := range perToken {
			s.Units = append(s.Units, UnitSum{Pod: fmt.Sprintf("p%d", i), Numerator: p * tokens, Denominator: tokens})
		}
		return s
	}
	stable := pods(3000, 0.020, 0.021, 0.019, 0.0205, 0.0195, 0.020, 0.0202, 0.0198)
	look := Look{Step: 1, Info: 1, Looks: 2, Load: 1}
	light := look
	light.Load = 1.0 / 3
	last := light
	last.LastStep = true
	tests := []struct {
		name      string
		cand      PerUnitSample
		stable    PerUnitSample
		look      Look
		want      v1alpha1.Verdict
		confident bool
	}{
		{"a clear pass at a stable pod's load is confident", pods(3000, 0.015), stable, look, v1alpha1.VerdictPass, true},
		{"the same read at a third of the load moves the step on", pods(3000, 0.015), stable, light, v1alpha1.VerdictPass, true},
		{"but is not confident at the last step", pods(3000, 0.015), stable, last, v1alpha1.VerdictPass, false},
		{"a read above the bound, far from significant, holds at a stable pod's load", pods(3000, 0.0245), stable, look, v1alpha1.VerdictInconclusive, false},
		{"and does not hold the step at a lighter load", pods(3000, 0.0245), stable, light, v1alpha1.VerdictPass, false},
		{"unless it is the last step", pods(3000, 0.0245), stable, last, v1alpha1.VerdictInconclusive, false},
		{"a read near significance holds at a lighter load", pods(3000, 0.027), stable, light, v1alpha1.VerdictInconclusive, false},
		// No test yet: the step holds for the scrape intervals the paired test needs.
		{"too few pods to judge at a lighter load: holds", pods(3000, 0.030), pods(3000, 0.020, 0.021), light, v1alpha1.VerdictInconclusive, false},
		{"a clear regression fails at a lighter load", pods(3000, 0.030), stable, light, v1alpha1.VerdictFail, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := JudgePerUnit(relative, tc.cand, tc.stable, 20, tc.look, at)
			if r.Verdict != tc.want || r.Confident == nil || *r.Confident != tc.confident {
				t.Fatalf("%s, confident %v (%s); want %s, confident %v", r.Verdict, r.Confident, r.Message, tc.want, tc.confident)
			}
			if tc.look.Light() && r.Verdict == v1alpha1.VerdictPass && !*r.Confident && !strings.Contains(r.Message, "0.33x a stable pod's load") {
				t.Errorf("a pass at a lighter load does not say so: %q", r.Message)
			}
		})
	}
}
