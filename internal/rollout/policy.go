package rollout

import (
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/window"
)

// API defaults, applied defensively when a field is zero (an object written before defaulting,
// or built in a test).
const (
	// DefaultStepDuration is spec.rollout.stepDuration's default.
	DefaultStepDuration = 2 * time.Minute
	// DefaultAnalysisInterval is spec.rollout.analysis.interval's default.
	DefaultAnalysisInterval = 30 * time.Second
	// DefaultScaleDownDelay is spec.rollout.scaleDownDelay's default.
	DefaultScaleDownDelay = 10 * time.Minute
	// DefaultProgressDeadline is spec.rollout.progressDeadline's default.
	DefaultProgressDeadline = 30 * time.Minute
	// WarmupPollInterval is how often a pass looks again while the candidate warms up or is
	// being sized for its next weight: the warm-up check is an HTTP probe, not a watched object.
	WarmupPollInterval = 5 * time.Second
	// RollbackDrain is how long a candidate that leaves the route (rolled back, aborted,
	// superseded) keeps its pods after its weight last went down (status.rollout.drainUntil)
	// before it scales to zero: the time a Gateway takes to apply a route change and finish
	// in-flight requests, so that no request routed to it meets terminating pods. An aborted
	// candidate is also kept for the scale-down delay, for inspection (inspectUntil).
	RollbackDrain = 15 * time.Second
	// DrainRefusedAfter is how long a leaving candidate keeps the weight that the stable color's
	// Ready pods cannot carry while the stable Deployment does not even ask for the pods that
	// would carry it (status.stable.shortSince: its scale-up refused): after it, the stable
	// color takes all traffic with the pods it has. An accepted scale-up is seen well within it.
	DrainRefusedAfter = 30 * time.Second
	// DefaultInconclusiveReportAfter is spec.rollout.inconclusive.reportAfter's default: how
	// long a rollout may hold on inconclusive analysis before it is reported Stalled (reason
	// AnalysisInconclusive). It neither promotes nor rolls back by itself:
	// spec.rollout.inconclusive.rollbackAfter is the user's opt-in to a rollback.
	DefaultInconclusiveReportAfter = 10 * time.Minute
	// historyLimit is the number of RevisionRecords kept (the API's MaxItems).
	historyLimit = 10
)

// DefaultSteps is spec.rollout.steps' default.
var DefaultSteps = v1alpha1.DefaultSteps

// policy is spec.rollout with every default applied.
type policy struct {
	steps                []int32
	stepDuration         time.Duration
	minStepDuration      time.Duration // spec.rollout.minStepDuration; 0: every step lasts stepDuration
	interval             time.Duration
	window               time.Duration // the analysis window: see AnalysisWindow
	settle               time.Duration // from a step's start to its window's opening: see MeasureWindow
	scrape               time.Duration // spec.rollout.analysis.scrapeInterval, window.DefaultScrapeInterval where unset
	scaleDownDelay       time.Duration
	progressDeadline     time.Duration
	inconclusiveRollback time.Duration // spec.rollout.inconclusive.rollbackAfter; 0: never
	inconclusiveReport   time.Duration // spec.rollout.inconclusive.reportAfter
	autoPromote          bool
	failureLimit         int32
	matchStablePods      bool // spec.rollout.loadMatching StablePods
	shadow               *shadowPolicy
}

// shadowPolicy is spec.rollout.shadow with its defaults.
type shadowPolicy struct {
	percent  int32
	duration time.Duration
}

// DefaultShadowDuration is spec.rollout.shadow.duration's default.
const DefaultShadowDuration = 5 * time.Minute

func policyOf(ms *v1alpha1.ModelServer) policy {
	r := ms.Spec.Rollout
	p := policy{
		steps:              validSteps(r.Steps),
		stepDuration:       orDefault(r.StepDuration.Duration, DefaultStepDuration),
		interval:           orDefault(r.Analysis.Interval.Duration, DefaultAnalysisInterval),
		scaleDownDelay:     orDefault(r.ScaleDownDelay.Duration, DefaultScaleDownDelay),
		progressDeadline:   orDefault(r.ProgressDeadline.Duration, DefaultProgressDeadline),
		inconclusiveReport: orDefault(r.Inconclusive.ReportAfter.Duration, DefaultInconclusiveReportAfter),
		autoPromote:        r.AutoPromote == nil || *r.AutoPromote,
		failureLimit:       max(r.FailureLimit, 0),
		matchStablePods:    r.LoadMatching != v1alpha1.LoadMatchingNone, // StablePods, the default
	}
	if sh := r.Shadow; sh != nil {
		p.shadow = &shadowPolicy{percent: sh.Percent, duration: orDefault(sh.Duration.Duration, DefaultShadowDuration)}
		if p.shadow.percent <= 0 || p.shadow.percent > 100 {
			p.shadow.percent = 100
		}
		// Judged on at least one measurement, like a step.
		p.shadow.duration = max(p.shadow.duration, p.interval)
	}
	var scrape time.Duration
	if r.Analysis.ScrapeInterval != nil {
		scrape = r.Analysis.ScrapeInterval.Duration
	}
	p.window = window.Of(p.interval, scrape)
	p.settle = window.Settle(scrape)
	p.scrape = window.Scrape(scrape)
	if ra := r.Inconclusive.RollbackAfter; ra != nil && ra.Duration > 0 {
		p.inconclusiveRollback = ra.Duration
	}
	// A step is held for at least one analysis interval, so that every step is judged on at
	// least one measurement taken after its weight was set (the API documents this bound).
	p.stepDuration = max(p.stepDuration, p.interval)
	if d := r.MinStepDuration; d != nil && d.Duration > 0 {
		p.minStepDuration = min(d.Duration, p.stepDuration)
	}
	return p
}

// AnalysisInterval is spec.rollout.analysis.interval with its default.
func AnalysisInterval(ms *v1alpha1.ModelServer) time.Duration { return policyOf(ms).interval }

// ScrapeInterval is spec.rollout.analysis.scrapeInterval, window.DefaultScrapeInterval where
// unset (the controller fills it from its flag): the blocks of time the analysis pairs the
// colors over when the pods are too few (analysis.Target.Scrape).
func ScrapeInterval(ms *v1alpha1.ModelServer) time.Duration { return policyOf(ms).scrape }

// AnalysisWindow is the window a measurement of ms looks back over: the analysis interval, at
// least four of spec.rollout.analysis.scrapeInterval (window.DefaultScrapeInterval when
// unset; the controller fills it from its flag). A
// measurement is due only once the candidate has run at its planned size for a whole window.
func AnalysisWindow(ms *v1alpha1.ModelServer) time.Duration {
	return policyOf(ms).window
}

// validSteps returns steps when they are what the API's validation admits (each 1..100,
// strictly increasing, ending at 100), else the defaults.
func validSteps(steps []int32) []int32 {
	if len(steps) == 0 || steps[len(steps)-1] != 100 {
		return DefaultSteps
	}
	prev := int32(0)
	for _, s := range steps {
		if s <= prev || s > 100 {
			return DefaultSteps
		}
		prev = s
	}
	return steps
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// need is the number of Ready candidate replicas required before the candidate gets weight
// percent of the traffic: ceil(total*weight/100), at least 1 (a rollout while scaled to zero
// still starts one candidate pod to prove it loads).
func need(total, weight int32) int32 {
	n := (int64(max(total, 0))*int64(weight) + 99) / 100
	return int32(max(n, 1))
}

// carries is the largest weight, in percent, that ready pods of one color carry at the planned
// per-pod load (total pods for 100%): the largest w with need(total, w) <= ready, that is
// floor(100*ready/total), at most 100. No Ready pod carries 0; with a total of 0 one Ready pod
// carries everything (need is at least 1).
func carries(total, ready int32) int32 {
	switch {
	case ready <= 0:
		return 0
	case total <= 0:
		return 100
	}
	return int32(min(100, int64(ready)*100/int64(total)))
}
