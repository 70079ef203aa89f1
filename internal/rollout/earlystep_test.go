package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// presetResults is a measurement of the vllm preset's metrics, all passing: itl-p95 and
// decode-per-token (its tested metrics) confident or not, error-ratio and abort-ratio passing on
// their values (they have no confidence to give).
func presetResults(at time.Time, confident bool) []v1alpha1.MetricResult {
	var rs []v1alpha1.MetricResult
	for _, name := range []string{"itl-p95", "decode-per-token", "error-ratio", "abort-ratio"} {
		r := v1alpha1.MetricResult{Name: name, Verdict: pass, At: metav1.NewTime(at), Candidate: "0.3", Bound: "<= 0.5"}
		if name == "itl-p95" || name == "decode-per-token" {
			r.Confident = ptr.To(confident)
		}
		rs = append(rs, r)
	}
	return rs
}

// With spec.rollout.minStepDuration, a step ends at its first measurement after
// minStepDuration in which every tested metric passed confidently; without it, or without
// confidence, every step lasts stepDuration.
func TestMinStepDurationEndsAStepOnAConfidentPass(t *testing.T) {
	const stepDuration, minStep = 2 * time.Minute, 30 * time.Second
	for _, tc := range []struct {
		name      string
		minStep   time.Duration
		confident bool
		early     bool
	}{
		{"confident passes with minStepDuration end each step early", minStep, true, true},
		{"passes without confidence hold each step for stepDuration", minStep, false, false},
		{"confident passes without minStepDuration hold each step for stepDuration", 0, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := newModelServer(withSteps(10, 25, 50, 100), withStepDuration(stepDuration), withInterval(10*time.Second))
			ms.Spec.Rollout.Analysis.ScrapeInterval = &v1alpha1.Duration{Duration: 5 * time.Second}
			if tc.minStep > 0 {
				ms.Spec.Rollout.MinStepDuration = &v1alpha1.Duration{Duration: tc.minStep}
			}
			s := newSim(ms, 4, good)
			var log passLog
			var held []time.Duration
			var advanced []string
			promoted := false
			for i := range 200 {
				if i == 10 {
					s.newRevision(good)
				}
				obs := s.observe()
				if MeasureDue(ms, s.now) {
					obs.Measurement = &Measurement{At: s.now, Results: presetResults(s.now, tc.confident)}
				}
				prev := ms.Status.Rollout
				d := next(ms, obs, s.now)
				log.add(loggedPass{i, s.now, s.start, false, obs, d})
				st := d.Status
				if prev.Step >= 1 && (st.Rollout.Step != prev.Step || st.Phase == v1alpha1.PhaseHealthy) {
					held = append(held, s.now.Sub(prev.StepStartedAt.Time))
				}
				for _, e := range d.Events {
					if e.Reason == EventStepAdvanced {
						advanced = append(advanced, e.Message)
					}
				}
				if i > 10 && st.Phase == v1alpha1.PhaseHealthy {
					promoted = true
					advanced = append(advanced, st.History[0].Reason)
					break
				}
				s.apply(d)
				s.evolveSteady()
				s.now = s.now.Add(5 * time.Second)
			}
			if !promoted || len(held) != 3 {
				t.Fatalf("promoted %t after steps held %v; want 3 steps then promotion\n%s", promoted, held, log.String())
			}
			for i, h := range held {
				switch {
				case tc.early && (h < minStep || h >= stepDuration):
					t.Errorf("step %d held %s; want at least minStepDuration %s and less than stepDuration %s\n%s", i+1, h, minStep, stepDuration, log.String())
				case !tc.early && h < stepDuration:
					t.Errorf("step %d held %s, less than stepDuration %s\n%s", i+1, h, stepDuration, log.String())
				}
			}
			early := 0
			for _, m := range advanced {
				if strings.Contains(m, "passed with confidence") {
					early++
				}
			}
			// Steps 2 and 3 begin (StepAdvanced) and the promotion (its history record) ends step 3.
			if want := map[bool]int{true: 3, false: 0}[tc.early]; early != want {
				t.Errorf("%d of the advances say they passed with confidence, want %d: %q", early, want, advanced)
			}
			t.Logf("steps held %v", held)
		})
	}
}

// A measurement ends a step early only when every result passed and every result of a tested
// metric (Confident set: a histogram or per-unit metric relative to stable) is confident;
// metrics without a test need only pass, and a measurement without any tested metric never
// ends a step early.
func TestConfidentPassNeedsEveryTestedMetricConfident(t *testing.T) {
	r := func(name string, v v1alpha1.Verdict, confident *bool) v1alpha1.MetricResult {
		return v1alpha1.MetricResult{Name: name, Verdict: v, Confident: confident}
	}
	yes, no := ptr.To(true), ptr.To(false)
	for _, tc := range []struct {
		name    string
		results []v1alpha1.MetricResult
		want    bool
	}{
		{"every tested metric confident, the others passing", []v1alpha1.MetricResult{
			r("itl-p95", pass, yes), r("decode-per-token", pass, yes), r("error-ratio", pass, nil), r("abort-ratio", pass, nil)}, true},
		{"one tested metric passing without confidence", []v1alpha1.MetricResult{
			r("itl-p95", pass, yes), r("decode-per-token", pass, no), r("error-ratio", pass, nil)}, false},
		{"an untested metric inconclusive", []v1alpha1.MetricResult{
			r("itl-p95", pass, yes), r("decode-per-token", pass, yes), r("error-ratio", inc, nil)}, false},
		{"no tested metric at all", []v1alpha1.MetricResult{
			r("error-ratio", pass, nil), r("abort-ratio", pass, nil), r("ttft-p95", pass, nil)}, false},
		{"no result at all", nil, false},
	} {
		if got := confidentPass(tc.results); got != tc.want {
			t.Errorf("%s: confidentPass = %t, want %t", tc.name, got, tc.want)
		}
	}
}
