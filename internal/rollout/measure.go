package rollout

import (
	"fmt"
	"strings"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/sample"
)

// MeasureDue reports whether the controller should run analysis in this pass: a rollout holds
// a step (step >= 1; phase Progressing, Paused or AwaitingPromotion: what holds traffic is
// judged also while a person holds the rollout), the
// candidate has run at its planned size for one whole analysis window (AnalysisWindow: the
// window then never starts before status.candidate.sizedSince; a candidate still loading the
// pods pre-scaled for its next weight carries more load per pod than the stable color, and
// would be judged unfairly), and either no measurement was taken in this step yet or the analysis
// interval has passed since the last one.
func MeasureDue(ms *v1alpha1.ModelServer, now time.Time) bool {
	t, ok := NextMeasureAt(ms)
	return ok && !now.Before(t)
}

// NextMeasureAt is when the next measurement is due: the step's start when none was taken in
// this step, else the last measurement plus the analysis interval; never before the candidate
// has run at its planned size for one analysis window (sizedSince + AnalysisWindow). ok is false when no rollout
// is being analysed (no candidate, warming, rolled back).
func NextMeasureAt(ms *v1alpha1.ModelServer) (time.Time, bool) {
	return nextMeasureAt(&ms.Status, policyOf(ms))
}

// MeasureWindow is the window the measurement taken at now reads: from when the step's window
// opened (see windowOpens) to now, at least AnalysisWindow. Each measurement of a step reads
// all of the step's requests since, so a step passes on its whole record, not on its luckiest
// last minute, and the statistics grow with the step.
//
// Why the window opens after a settle time: Prometheus histograms count a request when it
// finishes. A window opened at the weight switch holds requests that queued before it, at the
// old weights (up to half of the first window in bursty traffic, measured); one that opens a
// scrape interval later holds, on both colors, requests that arrived at the weights it judges.
// A query cannot count by arrival; opening the window late is what real Prometheus allows.
func MeasureWindow(ms *v1alpha1.ModelServer, now time.Time) time.Duration {
	pol := policyOf(ms)
	opens, ok := windowOpens(&ms.Status, pol)
	if !ok {
		return pol.window
	}
	return max(pol.window, now.Sub(opens)).Round(time.Second)
}

// MeasureLook is which look at the current step the measurement taken at now is: the step
// (1 the first; with a shadow phase, that phase is 1 and each step one more) and how much data
// the window holds against the step's first full window (MeasureWindow over AnalysisWindow: 1
// at the first measurement, 2 once the window is twice as long). The analysis raises its
// failure threshold with both, so that the error budget holds over the whole rollout; never
// with the number of measurements, so that a short analysis interval judges the same window
// as a long one. Looks is how many measurements a window's worth of data gets (AnalysisWindow
// over the analysis interval): with few, the analysis can afford a lower threshold. Load is
// what each Ready candidate pod carries over what each Ready stable pod carries
// (candidateLoad), and LastStep says that the step is the last before the promotion: a step
// where the candidate's pods run lighter than the stable color's only moves it on, and the
// last must clear it (sample.Look.Light).
func MeasureLook(ms *v1alpha1.ModelServer, now time.Time) sample.Look {
	pol := policyOf(ms)
	look := sample.Look{Step: 1, Info: 1, Looks: max(float64(pol.window)/float64(pol.interval), 1)}
	opens, ok := windowOpens(&ms.Status, pol)
	if !ok {
		return look
	}
	step := int(ms.Status.Rollout.Step)
	if ms.Status.Rollout.Shadow != nil {
		step++ // the shadow phase was the first look
	}
	look.Step, look.Info = max(step, 1), max(float64(now.Sub(opens))/float64(pol.window), 1)
	look.Load = candidateLoad(&ms.Status)
	look.LastStep = lastStep(&ms.Status, pol.steps)
	return look
}

// candidateLoad is what each Ready candidate pod carries over what each Ready stable pod
// carries at the route's weights, as the weights follow the pods (loadMatching StablePods):
// (candidate weight / its Ready pods) / (stable weight / its Ready pods); 0 when either color
// carries nothing or has no Ready pod. The weights follow the pods only up to the next step's
// weight, and pods started for the next step share the current one: a 1-pod stable color at a
// 25% step gives its candidate pod a third of the stable pod's load, 6 candidate pods at 25%
// beside 6 stable ones the same.
func candidateLoad(st *v1alpha1.ModelServerStatus) float64 {
	c, s, w := st.Candidate, st.Stable, st.Weights
	if c == nil || s == nil || w.Candidate <= 0 || w.Stable <= 0 || c.ReadyReplicas <= 0 || s.ReadyReplicas <= 0 {
		return 0
	}
	return float64(w.Candidate) * float64(s.ReadyReplicas) / (float64(w.Stable) * float64(c.ReadyReplicas))
}

// lastStep: the step held is the last before the promotion (the machine's next step after it,
// nextStepWeight, is 100).
func lastStep(st *v1alpha1.ModelServerStatus, steps []int32) bool {
	held := heldStepWeight(st.Rollout, steps, st.Weights.Candidate)
	return steps[nextStepIndexAfter(held, steps)] >= 100
}

// windowOpens is when the current step's analysis window opens: the later of the step's start
// and the instant the candidate was sized (its pods carry its weight at a stable pod's load),
// plus, from the second step on, the settle time (one scrape interval). ok is false when no
// rollout is being analysed.
func windowOpens(st *v1alpha1.ModelServerStatus, pol policy) (time.Time, bool) {
	if !judgedPhase(st.Phase) || st.Candidate == nil || !judging(st) || st.Rollout.StepStartedAt == nil {
		return time.Time{}, false
	}
	sized := st.Candidate.SizedSince
	if sized == nil {
		return time.Time{}, false
	}
	opens := maxTime(st.Rollout.StepStartedAt.Time, sized.Time)
	if st.Rollout.Step > 1 {
		// At the first step the candidate had no traffic before the switch: nothing queued on
		// it. (The stable color's backlog from carrying everything only makes it look slower.)
		opens = opens.Add(pol.settle)
	}
	return opens, true
}

// judgedPhase: the phases in which a candidate holds traffic and is judged: moving, and held
// by a person (paused, awaiting promotion), as Argo Rollouts' background analysis runs.
func judgedPhase(p v1alpha1.Phase) bool {
	return p == v1alpha1.PhaseProgressing || p == v1alpha1.PhasePaused || p == v1alpha1.PhaseAwaitingPromotion
}

func nextMeasureAt(st *v1alpha1.ModelServerStatus, pol policy) (time.Time, bool) {
	opens, ok := windowOpens(st, pol)
	if !ok {
		return time.Time{}, false
	}
	earliest := opens.Add(pol.window)
	if st.Rollout.LastMeasuredAt == nil || !st.Rollout.LastMeasuredAt.After(st.Rollout.StepStartedAt.Time) {
		// None in this step (one taken at its start advanced to it: it judged the previous one).
		return earliest, true
	}
	if t := st.Rollout.LastMeasuredAt.Add(pol.interval); t.After(earliest) {
		earliest = t
	}
	return earliest, true
}

// Verdict is a measurement's verdict, the one fold of results into a verdict: Fail if any
// metric failed, else Inconclusive if any was or has no verdict at all (a missing or unknown
// verdict is never a pass), else Pass (also with no result at all: no metric is configured). It
// returns the first result with that verdict, to explain it.
func Verdict(results []v1alpha1.MetricResult) (v1alpha1.Verdict, *v1alpha1.MetricResult) {
	var inconclusive *v1alpha1.MetricResult
	for i := range results {
		switch results[i].Verdict {
		case v1alpha1.VerdictFail:
			return v1alpha1.VerdictFail, &results[i]
		case v1alpha1.VerdictPass:
		default:
			if inconclusive == nil {
				inconclusive = &results[i]
			}
		}
	}
	if inconclusive != nil {
		return v1alpha1.VerdictInconclusive, inconclusive
	}
	return v1alpha1.VerdictPass, nil
}

// describe says what a result measured: its message when the analysis wrote one (it names the
// metric, the value and the bound), else "ttft-p95 = 0.9 (bound <= 0.5; stable 0.4)".
func describe(r *v1alpha1.MetricResult) string {
	if r == nil {
		return "no metric"
	}
	if r.Message != "" && strings.HasPrefix(r.Message, r.Name) {
		return r.Message
	}
	var b strings.Builder
	b.WriteString(r.Name)
	if r.Candidate != "" {
		fmt.Fprintf(&b, " = %s", r.Candidate)
	}
	var detail []string
	if r.Bound != "" {
		detail = append(detail, "bound "+r.Bound)
	}
	if r.Stable != "" {
		detail = append(detail, "stable "+r.Stable)
	}
	if len(detail) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(detail, "; "))
	}
	if r.Message != "" {
		fmt.Fprintf(&b, ": %s", r.Message)
	}
	return b.String()
}

// firstMessage describes the first result with verdict v.
func firstMessage(results []v1alpha1.MetricResult, v v1alpha1.Verdict) string {
	for i := range results {
		if results[i].Verdict == v {
			return describe(&results[i])
		}
	}
	return "no measurement"
}
