package rollout

import (
	"math"
	"testing"
	"time"

	"github.com/modelship/modelship/internal/analysis"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func TestMeasureDue(t *testing.T) {
	fast := withScrapeInterval(15 * time.Second)
	cases := []struct {
		name   string
		ms     *v1alpha1.ModelServer
		now    time.Time
		due    bool
		nextAt time.Time // zero: no measurement planned
	}{
		// At a 15s scrape interval the window of a step after the first opens 15s after its
		// start (the settle time) and is first read once it spans a whole 1m window: at t0+75s.
		{"is due once the step's window, opened a scrape interval after the step's start, spans a whole window", newModelServer(fast, withStatus(stableOn(blue, revA, 2), inRollout(revB, 2, t0, 25))), t0.Add(75 * time.Second), true, t0.Add(75 * time.Second)},
		{"is not due before", newModelServer(fast, withStatus(stableOn(blue, revA, 2), inRollout(revB, 2, t0, 25))), t0.Add(74 * time.Second), false, t0.Add(75 * time.Second)},
		{"is due again an interval after the last measurement", newModelServer(fast, withStatus(stableOn(blue, revA, 2), inRollout(revB, 2, t0, 25), measured(t0.Add(80*time.Second), pass))), t0.Add(110 * time.Second), true, t0.Add(110 * time.Second)},
		{"is not due within the interval", newModelServer(fast, withStatus(stableOn(blue, revA, 2), inRollout(revB, 2, t0, 25), measured(t0.Add(80*time.Second), pass))), t0.Add(109 * time.Second), false, t0.Add(110 * time.Second)},
		{"follows spec.rollout.analysis.interval", newModelServer(fast, withInterval(2*time.Minute), withStatus(stableOn(blue, revA, 2), inRollout(revB, 2, t0, 25), measured(t0.Add(3*time.Minute), pass))), t0.Add(4 * time.Minute), false, t0.Add(5 * time.Minute)},
		{"waits for the new step's window when the last measurement is the one that advanced to this step (taken at its start)", newModelServer(fast, withStatus(stableOn(blue, revA, 2), inRollout(revB, 2, t0, 25), measured(t0, pass))), t0, false, t0.Add(75 * time.Second)},
		{"a measurement of an earlier step does not count", newModelServer(fast, withStatus(stableOn(blue, revA, 2), inRollout(revB, 2, t0, 25), measured(t0.Add(-time.Second), pass))), t0.Add(75 * time.Second), true, t0.Add(75 * time.Second)},
		{"is not due while the candidate grows to its planned size (its pods would carry more load than the stable's)", newModelServer(withStatus(stableOn(blue, revA, 2), inRollout(revB, 2, t0, 25), unsized())), t0.Add(time.Hour), false, time.Time{}},
		{"at Prometheus's default 60s scrape interval the window opens a minute after sizing and spans 4m", newModelServer(withStatus(stableOn(blue, revA, 2), inRollout(revB, 2, t0, 25), sizedAt(t0.Add(time.Minute)))), t0.Add(6*time.Minute - time.Second), false, t0.Add(6 * time.Minute)},
		{"is due then", newModelServer(withScrapeInterval(time.Minute), withStatus(stableOn(blue, revA, 2), inRollout(revB, 2, t0, 25), sizedAt(t0.Add(time.Minute)))), t0.Add(6 * time.Minute), true, t0.Add(6 * time.Minute)},
		{"waits for the window even when the last measurement's interval has passed", newModelServer(withScrapeInterval(time.Minute), withStatus(stableOn(blue, revA, 2), inRollout(revB, 2, t0, 25), measured(t0.Add(10*time.Second), pass), sizedAt(t0.Add(time.Minute)))), t0.Add(4 * time.Minute), false, t0.Add(6 * time.Minute)},
		{"is not due while the candidate warms", newModelServer(withStatus(stableOn(blue, revA, 2), inRollout(revB, 0, t0, 0))), t0.Add(time.Hour), false, time.Time{}},
		{"is due while paused: what holds traffic is judged", newModelServer(fast, withPaused(true), withStatus(phase(v1alpha1.PhasePaused), stableOn(blue, revA, 2), inRollout(revB, 2, t0, 25))), t0.Add(time.Hour), true, t0.Add(75 * time.Second)},
		{"is due while awaiting promotion", newModelServer(fast, withStatus(phase(v1alpha1.PhaseAwaitingPromotion), stableOn(blue, revA, 2), inRollout(revB, 2, t0, 50))), t0.Add(time.Hour), true, t0.Add(75 * time.Second)},
		{"is not due while paused in the warm-up (no weight)", newModelServer(withPaused(true), withStatus(phase(v1alpha1.PhasePaused), stableOn(blue, revA, 2), inRollout(revB, 0, t0, 0))), t0.Add(time.Hour), false, time.Time{}},
		{"is not due without a rollout", newModelServer(withStatus(phase(v1alpha1.PhaseHealthy), stableOn(blue, revA, 2))), t0, false, time.Time{}},
		{"is not due after a rollback", newModelServer(withStatus(stableOn(blue, revA, 2), rolledBack(revB, v1alpha1.OutcomeRolledBack, "x"))), t0, false, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := MeasureDue(tc.ms, tc.now); got != tc.due {
				t.Errorf("MeasureDue = %t, want %t", got, tc.due)
			}
			at, ok := NextMeasureAt(tc.ms)
			if ok != !tc.nextAt.IsZero() || !at.Equal(tc.nextAt) {
				t.Errorf("NextMeasureAt = %v, %t, want %v", at, ok, tc.nextAt)
			}
		})
	}
}

// TestTheWindowHoldsTheStepsRequestsSinceItOpened: each measurement of a step reads the step's
// requests since its window opened (a scrape interval after the switch), so the statistics grow
// with the step and a step passes on its whole record.
func TestTheWindowHoldsTheStepsRequestsSinceItOpened(t *testing.T) {
	ms := newModelServer(withScrapeInterval(15*time.Second), withStatus(stableOn(blue, revA, 2), inRollout(revB, 2, t0, 25)))
	for _, tc := range []struct {
		now  time.Time
		want time.Duration
	}{
		{t0.Add(75 * time.Second), time.Minute},
		{t0.Add(105 * time.Second), 90 * time.Second},
		{t0.Add(10 * time.Minute), 585 * time.Second},
		{t0.Add(30 * time.Second), time.Minute}, // never shorter than four scrapes
	} {
		if got := MeasureWindow(ms, tc.now); got != tc.want {
			t.Errorf("window at %s = %s, want %s", tc.now.Sub(t0), got, tc.want)
		}
	}
	// Sized after the step started: the window opens a scrape interval after the sizing.
	late := newModelServer(withScrapeInterval(15*time.Second), withStatus(stableOn(blue, revA, 2), inRollout(revB, 2, t0, 25), sizedAt(t0.Add(time.Minute))))
	if got := MeasureWindow(late, t0.Add(3*time.Minute)); got != 105*time.Second {
		t.Errorf("window = %s, want 1m45s (from sizing + 15s)", got)
	}
	// The first step's window opens at its start: the candidate had no traffic before.
	first := newModelServer(withScrapeInterval(15*time.Second), withStatus(stableOn(blue, revA, 2), inRollout(revB, 1, t0, 10)))
	if at, _ := NextMeasureAt(first); !at.Equal(t0.Add(time.Minute)) {
		t.Errorf("first step measured first at %s, want 1m after its start", at.Sub(t0))
	}
	// No rollout: the plain window.
	if got := MeasureWindow(newModelServer(withStatus(phase(v1alpha1.PhaseHealthy), stableOn(blue, revA, 2))), t0); got != 4*time.Minute {
		t.Errorf("window without a rollout = %s, want 4m", got)
	}
}

func TestVerdictOf(t *testing.T) {
	cases := []struct {
		name string
		in   []v1alpha1.Verdict
		want v1alpha1.Verdict
	}{
		{"no result passes", nil, pass},
		{"all passing passes", []v1alpha1.Verdict{pass, pass}, pass},
		{"any failure fails, even beside an inconclusive one", []v1alpha1.Verdict{inc, pass, fail}, fail},
		{"an inconclusive result among passes is inconclusive", []v1alpha1.Verdict{pass, inc}, inc},
		{"a result without a verdict is inconclusive, never a pass", []v1alpha1.Verdict{pass, ""}, inc},
		{"a result with an unknown verdict is inconclusive", []v1alpha1.Verdict{"Maybe", pass}, inc},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := Verdict(results(t0, tc.in...)); got != tc.want {
				t.Errorf("verdict = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestNeed(t *testing.T) {
	cases := []struct {
		name          string
		total, weight int32
		want          int32
	}{
		{"rounds up a fraction of a pod", 4, 10, 1},
		{"is exact on a whole number of pods", 4, 50, 2},
		{"rounds 2.5 pods up to 3", 5, 50, 3},
		{"is the total at 100 percent", 7, 100, 7},
		{"is at least one pod even when scaled to zero", 0, 100, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := need(tc.total, tc.weight); got != tc.want {
				t.Errorf("need(%d, %d) = %d, want %d", tc.total, tc.weight, got, tc.want)
			}
		})
	}
}

func TestPolicyDefaults(t *testing.T) {
	p := policyOf(newModelServer())
	if len(p.steps) != 4 || p.steps[0] != 10 || p.stepDuration != 2*time.Minute || p.interval != 30*time.Second ||
		p.scaleDownDelay != 10*time.Minute || p.progressDeadline != 30*time.Minute || !p.autoPromote || p.inconclusiveRollback != 0 {
		t.Errorf("defaults = %+v", p)
	}
	if p := policyOf(newModelServer(withSteps(30, 20, 100))); p.steps[0] != 10 {
		t.Errorf("unsorted steps kept: %v", p.steps)
	}
	if p := policyOf(newModelServer(withStepDuration(10 * time.Second))); p.stepDuration != 30*time.Second {
		t.Errorf("step shorter than the interval kept: %s", p.stepDuration)
	}
}

func unsized() statusOption {
	return func(st *v1alpha1.ModelServerStatus) { st.Candidate.SizedSince = nil }
}

func sizedAt(t time.Time) statusOption {
	return func(st *v1alpha1.ModelServerStatus) { st.Candidate.SizedSince = mt(t) }
}

func withScrapeInterval(d time.Duration) msOption {
	return func(ms *v1alpha1.ModelServer) {
		ms.Spec.Rollout.Analysis.ScrapeInterval = &v1alpha1.Duration{Duration: d}
	}
}

func TestAnalysisWindow(t *testing.T) {
	cases := []struct {
		name string
		ms   *v1alpha1.ModelServer
		want time.Duration
	}{
		{"is at least 4m at a 60s scrape interval", newModelServer(withScrapeInterval(time.Minute)), 4 * time.Minute},
		{"assumes a 60s scrape interval when none is set", newModelServer(), 4 * time.Minute},
		{"is 1m at a 15s scrape interval and the default 30s interval", newModelServer(withScrapeInterval(15 * time.Second)), time.Minute},
		{"keeps a measurement interval longer than four scrapes", newModelServer(withScrapeInterval(15*time.Second), withInterval(3*time.Minute)), 3 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := AnalysisWindow(tc.ms); got != tc.want {
				t.Fatalf("AnalysisWindow = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestTheCandidateIsSizedOnlyOnceItsPodsAreWarm: pods added for the next step are Ready before
// they have loaded their model; until they pass the warm-up check the candidate's weight rides
// on fewer pods, so the sizing (and with it the next measurement's window) waits for them.
func TestTheCandidateIsSizedOnlyOnceItsPodsAreWarm(t *testing.T) {
	ms := newModelServer(withSteps(25, 50, 100), withStatus(stableOn(blue, revA, 8), inRollout(revB, 2, t0.Add(-time.Minute), 50), unsized()))
	loading := next(ms, newObs(revB, 8, deploy(blue, revA, 8, 8), deploy(green, revB, 8, 8), cold(green)), t0)
	if s := loading.Status.Candidate.SizedSince; s != nil {
		t.Errorf("sized at %v with its 8 Ready pods not warm yet, want unsized", s)
	}
	warm := next(ms, newObs(revB, 8, deploy(blue, revA, 8, 8), deploy(green, revB, 8, 8)), t0)
	if s := warm.Status.Candidate.SizedSince; s == nil || !s.Time.Equal(t0) {
		t.Errorf("sized at %v with its 8 Ready pods warm, want %v", s, t0)
	}
	// Its 50% on the 4 of them that serve would be twice the stable pods' load: the weight is
	// held to their share, 4 of 12 pods (33%), at which they carry what a stable pod carries.
	half := next(ms, newObs(revB, 8, deploy(blue, revA, 8, 8), deploy(green, revB, 8, 8), cold(green), warmPods(green, 4)), t0)
	if w := half.Weights[green]; w != 33 {
		t.Errorf("candidate weight %d with 4 of 8 pods serving at a 50%% step, want 33 (its share of serving pods)", w)
	}
	// At 10% (planned for 25%: 2 pods), the one pod that serves carries less than a stable pod.
	ms10 := newModelServer(withSteps(10, 25, 50, 100), withStatus(stableOn(blue, revA, 8), inRollout(revB, 1, t0.Add(-time.Minute), 10), unsized()))
	d := next(ms10, newObs(revB, 8, deploy(blue, revA, 8, 8), deploy(green, revB, 2, 2), cold(green), warmPods(green, 1)), t0)
	if s := d.Status.Candidate.SizedSince; s == nil || !s.Time.Equal(t0) {
		t.Errorf("sized at %v with 1 pod serving 10%% beside 8 stable pods, want %v", s, t0)
	}
}

func warmPods(c v1alpha1.Color, n int32) obsOption {
	return func(o *Observation) { co := o.Colors[c]; co.WarmPods = n; o.Colors[c] = co }
}

// TestTheLookFollowsTheDataNotTheMeasurements: at the first step (scrape 5s: a 20s window),
// measured every 5s or every 20s, the look four minutes in says the same: 12 windows' worth of
// data. Its threshold stays below 4 (counted per measurement, the 5s interval's 45th look was
// judged at 4.5, and a 1.5x slower release at z 4.4 on the real bench was never rolled back),
// and a measurement every 5s is never judged at more than the threshold of watching without
// pause.
func TestTheLookFollowsTheDataNotTheMeasurements(t *testing.T) {
	at := t0.Add(4 * time.Minute)
	var infos []float64
	for _, interval := range []time.Duration{5 * time.Second, 20 * time.Second} {
		ms := newModelServer(withScrapeInterval(5*time.Second), withInterval(interval), withStatus(stableOn(blue, revA, 6), inRollout(revB, 1, t0, 14)))
		look := MeasureLook(ms, at)
		step, info, looks := look.Step, look.Info, look.Looks
		if step != 1 || looks != float64(20*time.Second/interval) {
			t.Errorf("interval %s: step %d, %g looks per window, want 1 and %d", interval, step, looks, 20*time.Second/interval)
		}
		z := analysis.FailZ(analysis.Look{Step: step, Info: info, Looks: looks})
		if z >= 4 || z > analysis.FailZ(analysis.Look{Step: step, Info: info}) {
			t.Errorf("interval %s: threshold %.2f four minutes in (%g windows of data), want below 4 and at most the continuous watch's", interval, z, info)
		}
		infos = append(infos, info)
	}
	if infos[0] != infos[1] || infos[0] != 12 {
		t.Errorf("data four minutes in: %v windows with a 5s and a 20s interval, want 12 for both", infos)
	}
}

// TestMeasureLookSaysWhetherTheStepIsTheLast: the look says whether the step is the last
// before the promotion, which must clear the candidate (sample.Look.Light).
func TestMeasureLookSaysWhetherTheStepIsTheLast(t *testing.T) {
	at := t0.Add(time.Minute)
	for _, tc := range []struct {
		steps        []int32
		step, weight int32
		last         bool
	}{
		{[]int32{10, 25, 50, 100}, 1, 14, false},
		{[]int32{10, 25, 50, 100}, 2, 25, false},
		{[]int32{10, 25, 50, 100}, 3, 50, true},
		{[]int32{20, 100}, 1, 20, true},
	} {
		ms := newModelServer(withSteps(tc.steps...), withStatus(stableOn(blue, revA, 6), inRollout(revB, tc.step, t0, tc.weight)))
		if got := MeasureLook(ms, at).LastStep; got != tc.last {
			t.Errorf("steps %v at step %d: last step %v, want %v", tc.steps, tc.step, got, tc.last)
		}
	}
}

// TestMeasureLookSaysHowLoadedTheCandidateIs: the look carries what each Ready candidate pod
// carries over what each Ready stable pod carries at the route's weights.
func TestMeasureLookSaysHowLoadedTheCandidateIs(t *testing.T) {
	ready := func(n int32) statusOption {
		return func(st *v1alpha1.ModelServerStatus) { st.Candidate.ReadyReplicas = n }
	}
	at := t0.Add(time.Minute)
	cases := []struct {
		name         string
		stable, cand int32
		step, weight int32
		load         float64
		light        bool
	}{
		// One stable pod: 10% raised to a stable pod's load would be 50%, but never above the
		// next step's 25%.
		{"one stable pod at the first step", 1, 1, 1, 25, 1.0 / 3, true},
		{"six stable pods, 10% raised to 14%", 6, 1, 1, 14, 14.0 * 6 / 86, false},
		// The pods started for the 50% step share the 25% step.
		{"pods started for the next step", 6, 6, 2, 25, 1.0 / 3, true},
		{"at 50% on as many pods", 6, 6, 3, 50, 1, false},
		{"no Ready candidate pod", 6, 0, 1, 14, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := newModelServer(withSteps(10, 25, 50, 100), withStatus(stableOn(blue, revA, tc.stable), inRollout(revB, tc.step, t0, tc.weight), ready(tc.cand)))
			look := MeasureLook(ms, at)
			if light := look.Light(); math.Abs(look.Load-tc.load) > 1e-9 || light != tc.light {
				t.Errorf("load %.3f (light %v); want %.3f (light %v)", look.Load, light, tc.load, tc.light)
			}
		})
	}
}
