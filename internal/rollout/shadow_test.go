package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func withShadow(percent int32, d time.Duration) msOption {
	return func(ms *v1alpha1.ModelServer) {
		ms.Spec.Rollout.Shadow = &v1alpha1.ShadowSpec{Percent: percent, Duration: v1alpha1.Duration{Duration: d}}
	}
}

// shadowRun drives a rollout of revB (stable revA on blue, 4 replicas) pass by pass, every 5
// seconds: each color's pods come up Ready and warm one pass after they are planned, a
// measurement is taken whenever MeasureDue says so with the verdict verdict gives, and
// MirrorUnsupported is what unsupported says at the pass's time. It records every decision.
type shadowRun struct {
	ms          *v1alpha1.ModelServer
	now         time.Time
	plans       map[v1alpha1.Color]ColorPlan
	verdict     func(now time.Time) v1alpha1.Verdict
	unsupported func(now time.Time) string
	decisions   []Decision
	measuredAt  []time.Time
}

func newShadowRun(ms *v1alpha1.ModelServer, verdict v1alpha1.Verdict) *shadowRun {
	ms.Status = v1alpha1.ModelServerStatus{Phase: v1alpha1.PhaseHealthy, Stable: &v1alpha1.ColorStatus{Color: v1alpha1.Blue, Revision: revA, Replicas: 4, ReadyReplicas: 4}}
	return &shadowRun{
		ms: ms, now: t0,
		plans:       map[v1alpha1.Color]ColorPlan{v1alpha1.Blue: {Revision: revA, Replicas: 4}},
		verdict:     func(time.Time) v1alpha1.Verdict { return verdict },
		unsupported: func(time.Time) string { return "" },
	}
}

func (r *shadowRun) pass() Decision {
	obs := newObs(revB, 4)
	for c, p := range r.plans {
		obs.Colors[c] = ColorObservation{Exists: true, Revision: p.Revision, Image: "img:" + p.Revision, Replicas: p.Replicas,
			ReadyReplicas: p.Replicas, AvailableReplicas: p.Replicas, UpdatedReplicas: p.Replicas, Warm: true, WarmPods: p.Replicas}
	}
	obs.MirrorUnsupported = r.unsupported(r.now)
	if MeasureDue(r.ms, r.now) {
		obs.Measurement = &Measurement{At: r.now, Results: results(r.now, r.verdict(r.now))}
		r.measuredAt = append(r.measuredAt, r.now)
	}
	d := Next(r.ms, obs, r.now)
	r.ms.Status = d.Status
	r.plans = d.Plans // the pods come up by the next pass
	r.decisions = append(r.decisions, d)
	r.now = r.now.Add(5 * time.Second)
	return d
}

// runUntil passes until done says so, at most an hour of passes.
func (r *shadowRun) runUntil(t *testing.T, done func(Decision) bool) Decision {
	t.Helper()
	for range 720 {
		if d := r.pass(); done(d) {
			return d
		}
	}
	t.Fatalf("not done after an hour of passes; last status: phase %s step %d weights %+v", r.ms.Status.Phase, r.ms.Status.Rollout.Step, r.ms.Status.Weights)
	return Decision{}
}

// A good candidate is mirrored to for the shadow's duration, sized for the mirrored share and
// judged there with no user weight, then goes through the weighted steps to its promotion.
func TestShadowPhaseMirrorsBeforeAnyWeightThenGoesOnToTheSteps(t *testing.T) {
	ms := newModelServer(withShadow(50, 2*time.Minute), withSteps(25, 100), withStepDuration(time.Minute), withInterval(30*time.Second))
	r := newShadowRun(ms, pass)
	r.runUntil(t, func(d Decision) bool { return hasEvent(d, EventPromoted) })

	var started, passed time.Time
	for i, d := range r.decisions {
		at := t0.Add(time.Duration(i) * 5 * time.Second)
		if hasEvent(d, EventShadowStarted) {
			started = at
		}
		if hasEvent(d, EventShadowPassed) {
			passed = at
		}
		if d.Mirror != nil {
			if d.Mirror.Color != v1alpha1.Green || d.Mirror.Percent != 50 {
				t.Fatalf("pass %d: mirror %+v, want green at 50%%", i, *d.Mirror)
			}
			if d.Weights[v1alpha1.Green] != 0 {
				t.Fatalf("pass %d: the candidate has weight %d while it is mirrored to", i, d.Weights[v1alpha1.Green])
			}
			if got := d.Plans[v1alpha1.Green].Replicas; got != 2 {
				t.Fatalf("pass %d: candidate planned at %d replicas in the shadow phase, want 2 (50%% of 4)", i, got)
			}
			if d.Plans[v1alpha1.Blue].Replicas != 4 {
				t.Fatalf("pass %d: stable planned at %d in the shadow phase, want all 4: it answers every request", i, d.Plans[v1alpha1.Blue].Replicas)
			}
		}
		if d.Weights[v1alpha1.Green] > 0 && (passed.IsZero() || at.Before(passed)) {
			t.Fatalf("pass %d: candidate weight %d before the shadow phase passed", i, d.Weights[v1alpha1.Green])
		}
	}
	if started.IsZero() || passed.IsZero() {
		t.Fatalf("shadow started %v, passed %v: want both", started, passed)
	}
	if passed.Sub(started) < 2*time.Minute {
		t.Errorf("shadow phase passed after %s, before its 2m duration", passed.Sub(started))
	}
	var inShadow int
	for _, m := range r.measuredAt {
		if !m.Before(started) && !m.After(passed) {
			inShadow++
		}
	}
	if inShadow == 0 {
		t.Errorf("no measurement was taken in the shadow phase (measurements at %v)", r.measuredAt)
	}
	if r.ms.Status.Rollout.Shadow != nil {
		t.Errorf("status.rollout.shadow kept after the promotion: %+v", r.ms.Status.Rollout.Shadow)
	}
}

// A slow candidate fails its shadow phase and is rolled back having never had any weight:
// no user request was routed to it, and the mirror ends with the rollback.
func TestShadowPhaseRollsBackABadCandidateBeforeAnyUserSeesIt(t *testing.T) {
	ms := newModelServer(withShadow(100, 5*time.Minute), withFailureLimit(1), withInterval(30*time.Second))
	r := newShadowRun(ms, fail)
	d := r.runUntil(t, func(d Decision) bool { return hasEvent(d, EventRolledBack) })
	for i, x := range r.decisions {
		if x.Weights[v1alpha1.Green] != 0 {
			t.Fatalf("pass %d: candidate weight %d: a user request could reach it", i, x.Weights[v1alpha1.Green])
		}
	}
	if d.Mirror != nil {
		t.Errorf("the rolled-back candidate is still mirrored to: %+v", *d.Mirror)
	}
	if n := len(r.measuredAt); n != 2 {
		t.Errorf("rolled back after %d measurements, want 2 (failure limit 1)", n)
	}
	if st := d.Status; st.Phase != v1alpha1.PhaseRolledBack || st.Rollout.Step != 0 || !strings.Contains(st.History[0].Reason, "analysis failed 2 time(s)") {
		t.Errorf("after the rollback: phase %s step %d history %+v", st.Phase, st.Rollout.Step, st.History)
	}
	if got := d.Plans[v1alpha1.Green].Replicas; got != 0 {
		t.Errorf("candidate that served no user keeps %d replicas after its rollback, want 0 at once", got)
	}
}

// Where the Gateway cannot mirror, the shadow phase does not start and the rollout holds at
// step 0 with no weight and the reason; it starts once the Gateway can. Without a shadow phase
// the same rollout would have moved to its first step at once.
func TestShadowPhaseHoldsWhileTheGatewayCannotMirror(t *testing.T) {
	ms := newModelServer(withShadow(100, time.Minute), withInterval(30*time.Second))
	r := newShadowRun(ms, pass)
	fixedAt := t0.Add(3 * time.Minute)
	r.unsupported = func(now time.Time) string {
		if now.Before(fixedAt) {
			return "GatewayClass traefik does not list HTTPRouteRequestMirror"
		}
		return ""
	}
	for r.now.Before(fixedAt) {
		d := r.pass()
		if d.Mirror != nil || d.Weights[v1alpha1.Green] != 0 || d.Status.Rollout.Step != 0 {
			t.Fatalf("at %s: mirror %v, weight %d, step %d while the Gateway cannot mirror", r.now.Sub(t0), d.Mirror, d.Weights[v1alpha1.Green], d.Status.Rollout.Step)
		}
	}
	last := r.decisions[len(r.decisions)-1]
	if last.Report.HoldReason != v1alpha1.ReasonMirrorUnsupported || !strings.Contains(last.Report.HoldMessage, "HTTPRouteRequestMirror") {
		t.Errorf("hold %q %q, want %s naming the missing feature", last.Report.HoldReason, last.Report.HoldMessage, v1alpha1.ReasonMirrorUnsupported)
	}
	if last.Status.Phase != v1alpha1.PhaseProgressing {
		t.Errorf("phase %s while held, want Progressing (not rolled back by the progress deadline)", last.Status.Phase)
	}
	d := r.pass()
	if d.Mirror == nil || !hasEvent(d, EventShadowStarted) {
		t.Fatalf("the shadow phase did not start once the Gateway could mirror: %+v", d.Mirror)
	}
}

// The shadow phase counts as the first look of the rollout's error budget: the first weighted
// step is the second.
func TestMeasureLookCountsTheShadowPhase(t *testing.T) {
	ms := newModelServer(withShadow(100, time.Minute))
	started := t0
	ms.Status = v1alpha1.ModelServerStatus{
		Phase:     v1alpha1.PhaseProgressing,
		Stable:    &v1alpha1.ColorStatus{Color: v1alpha1.Blue, Revision: revA},
		Candidate: &v1alpha1.ColorStatus{Color: v1alpha1.Green, Revision: revB, SizedSince: mt(started)},
		Rollout:   v1alpha1.RolloutStatus{StepStartedAt: mt(started), Shadow: &v1alpha1.ShadowStatus{StartedAt: metav1.NewTime(started), Percent: 100}},
	}
	if step := MeasureLook(ms, started.Add(time.Minute)).Step; step != 1 {
		t.Errorf("shadow phase look step %d, want 1", step)
	}
	if !MeasureDue(ms, started.Add(time.Hour)) {
		t.Errorf("no measurement due in the shadow phase")
	}
	ms.Status.Rollout.Shadow.PassedAt = mt(started.Add(time.Minute))
	ms.Status.Rollout.Step, ms.Status.Rollout.StepWeight = 1, 5
	if step := MeasureLook(ms, started.Add(2*time.Minute)).Step; step != 2 {
		t.Errorf("first weighted step after a shadow phase: look step %d, want 2", step)
	}
}

// The controller asks whether the Gateway mirrors only while a shadow phase may still start or
// run; ShadowPending must say yes wherever the machine would read the answer.
func TestShadowPendingCoversEveryPassThatReadsTheAnswer(t *testing.T) {
	ms := newModelServer(withShadow(50, time.Minute), withSteps(25, 100), withInterval(30*time.Second))
	r := newShadowRun(ms, pass)
	asked := 0
	r.unsupported = func(time.Time) string {
		st := r.ms.Status
		reads := st.Rollout.Step == 0 && (st.Rollout.Shadow == nil || st.Rollout.Shadow.PassedAt == nil)
		if !reads {
			return "" // the machine does not read it past step 0 or after the shadow passed
		}
		if !ShadowPending(r.ms, revB) {
			t.Fatalf("at %s (step %d, shadow %+v) the machine reads MirrorUnsupported but ShadowPending says no", r.now.Sub(t0), r.ms.Status.Rollout.Step, r.ms.Status.Rollout.Shadow)
		}
		asked++
		return ""
	}
	r.runUntil(t, func(d Decision) bool { return hasEvent(d, EventPromoted) })
	if asked == 0 || ShadowPending(r.ms, revB) {
		t.Errorf("asked %d times; pending after the promotion: %t (want no)", asked, ShadowPending(r.ms, revB))
	}
}
