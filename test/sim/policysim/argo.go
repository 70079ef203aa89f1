package policysim

import "time"

// Argo is Argo Rollouts' canary strategy with a background analysis (an AnalysisTemplate
// referenced from spec.strategy.canary.analysis): steps setWeight then pause for each weight
// in Steps, a measurement every Interval (1m) of the canary's p95 time to first token with
// successCondition result <= the SLO, and failureLimit 0 (the first failed measurement aborts
// the rollout). After the last step the canary is promoted.
type Argo struct {
	Total    int32
	Steps    []int32
	Pause    time.Duration
	Interval time.Duration
	MaxTTFT  time.Duration

	step        int
	stepAt      time.Duration
	lastMeasure time.Duration
	started     bool
}

// NewArgo is an Argo Rollouts canary with the same steps as modelship's default.
func NewArgo(total int32, maxTTFT time.Duration) *Argo {
	return &Argo{Total: total, Steps: []int32{10, 25, 50}, Pause: 2 * time.Minute, Interval: time.Minute, MaxTTFT: maxTTFT}
}

// Name implements Canary.
func (a *Argo) Name() string { return "argo-rollouts" }

// Tick implements Canary.
func (a *Argo) Tick(v *View) (int32, int32, Outcome) {
	if !a.started {
		a.started, a.stepAt, a.lastMeasure = true, v.Now, v.Now
	}
	w := a.Steps[a.step]
	if v.Now-a.lastMeasure >= a.Interval {
		a.lastMeasure = v.Now
		cw := v.Window(candidateColor, a.Interval)
		// failureLimit 0: a failed measurement aborts. An empty result is an error in Argo,
		// counted against consecutiveErrorLimit (4), not a failure.
		if p, ok := P95(cw.TTFT); ok && p > a.MaxTTFT.Seconds() {
			return 0, 0, OutcomeRolledBack
		}
	}
	if v.Now-a.stepAt >= a.Pause {
		a.step++
		a.stepAt = v.Now
		if a.step == len(a.Steps) {
			return 100, a.Total, OutcomePromoted
		}
		w = a.Steps[a.step]
	}
	return w, PodsFor(a.Total, w), OutcomeInProgress
}
