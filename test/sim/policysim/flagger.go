package policysim

import "time"

// Flagger is Flagger's canary analysis with its documented defaults (canary.spec.analysis):
// every Interval (1m) it runs the metric checks on the canary; a successful check raises the
// canary's weight by StepWeight (10) up to MaxWeight (50), and a successful check at MaxWeight
// promotes (the canary's spec is copied to the primary, which then serves everything); each
// failed check counts, and Threshold (5) failed checks roll back. The checks are Flagger's
// built-in request-success-rate (>= 99%) and, for an LLM, a request-duration-like bound on the
// canary's own p95 time to first token (<= the SLO): Flagger judges the canary against fixed
// thresholds, not against the primary.
type Flagger struct {
	Total                            int32
	Interval                         time.Duration
	StepWeight, MaxWeight, Threshold int32
	MaxTTFT                          time.Duration
	MinSuccessRate                   float64

	weight, failed int32
	last           time.Duration
	started        bool
}

// NewFlagger is Flagger with its defaults and a TTFT bound.
func NewFlagger(total int32, maxTTFT time.Duration) *Flagger {
	return &Flagger{Total: total, Interval: time.Minute, StepWeight: 10, MaxWeight: 50, Threshold: 5, MaxTTFT: maxTTFT, MinSuccessRate: 0.99}
}

// Name implements Canary.
func (f *Flagger) Name() string { return "flagger" }

// Tick implements Canary.
func (f *Flagger) Tick(v *View) (int32, int32, Outcome) {
	if !f.started {
		// Flagger starts with the canary scaled up and no traffic; the first interval's check
		// then sets the first step.
		f.started, f.last = true, v.Now
		return 0, PodsFor(f.Total, f.StepWeight), OutcomeInProgress
	}
	if v.Now-f.last < f.Interval {
		return f.weight, PodsFor(f.Total, max(f.weight, f.StepWeight)), OutcomeInProgress
	}
	f.last = v.Now
	if f.weight > 0 && !f.check(v) {
		f.failed++
		if f.failed >= f.Threshold {
			return 0, 0, OutcomeRolledBack
		}
		return f.weight, PodsFor(f.Total, f.weight), OutcomeInProgress
	}
	if f.weight >= f.MaxWeight {
		return 100, f.Total, OutcomePromoted
	}
	f.weight = min(f.weight+f.StepWeight, f.MaxWeight)
	return f.weight, PodsFor(f.Total, f.weight), OutcomeInProgress
}

// check runs the metric checks over the last interval; no data passes nothing and fails
// nothing in Flagger (it halts the advancement), which counts here as a failed check. The
// success rate is the gateway's: requests it refused (503, no canary pod serving) are failures.
func (f *Flagger) check(v *View) bool {
	w := v.Window(candidateColor, f.Interval)
	if w.Finished+w.Refused == 0 {
		return false
	}
	if (w.Finished-w.Failed)/(w.Finished+w.Refused) < f.MinSuccessRate {
		return false
	}
	p, ok := P95(w.TTFT)
	return ok && p <= f.MaxTTFT.Seconds()
}
