package sample

// The look at which a rollout's measurement is judged: filled by the rollout's state machine
// (rollout.MeasureLook), read by the judges (package analysis, which aliases it).

// Look says which measurement of the rollout a judgement is: Step is the rollout's step (1 the
// first), Info how much data the window holds against the step's first full window (its length
// over the analysis window: 1 at the first measurement of the step, 2 once the window is
// twice as long; the judges count it from the first tested look instead where the candidate's
// requests set it lower, Tested), Looks how many measurements a window's worth of data gets at
// most (the analysis window over the analysis interval; 0 counts as watching without pause).
// Zero Step and Info count as 1. Load and LastStep (rollout.MeasureLook) say how far the
// comparison with the stable color goes at this step (see Light). The failure threshold it
// sets is analysis.FailZ.
type Look struct {
	Step  int
	Info  float64
	Looks float64
	// LastStep: the step is the last before the promotion, which must clear the candidate.
	LastStep bool
	// Load is what each Ready candidate pod carries over what each Ready stable pod carries at
	// the route's weights, 0 when unknown.
	Load float64
}

// LightLoad is the load per candidate pod, over a stable pod's (Look.Load), below which the
// candidate ran lighter than the stable color: the step's weight, rounded up to whole pods,
// leaves its pods less traffic than a stable pod (a 1-pod stable color at a 25% step, where
// the weights follow the pods only up to the next step's weight: a third of a stable pod's
// load), or pods started for the next step share it.
const LightLoad = 0.9

// Light reports whether the candidate's pods carried less than a stable pod at this look
// (Load below LightLoad). A model server's latency grows with its load (a fuller batch decodes
// each token slower), so a lighter candidate reads faster than it is: in the simulator a 1.5x
// slower build on one pod at a third of the stable pod's load read 1.23x on decode-per-token
// (against a 1.2x bound, never significantly) and 0.96x on itl-p95, and held its step for 40
// minutes. Such a step only moves the candidate on to one where its pods carry more, which
// judges it: a Fail there stands (slower even while lighter), and a read above the bound that
// is not significant holds the step only while its z is at least half the threshold (a Fail is
// then at most four times the data away; below, it is left to a later step). The last step
// before the promotion must clear the candidate: there such a read holds as at any load, and a
// pass is never confident (the promotion does not come early on a lighter candidate).
func (l Look) Light() bool { return l.Load > 0 && l.Load < LightLoad }

// Tested is l with its data counted from the first look that can be tested: the candidate's n
// requests over the sample gate's minSamples, where that is less than l.Info. A step's looks
// before its candidate has served minSamples requests are not tests (Inconclusive: too few
// samples) and spend none of the budget; counted in windows from the step's first, they
// raised the threshold of its first tested look as if the data had been watched from the
// start (with a 5 s window and a candidate pod at 2 requests a second, the first tested look
// came at four windows, 3.71 instead of 3.29). The clock min(Info, n/minSamples) grows with
// the window and starts at 1 at the first tested look. Where the samples set it, Looks is 0:
// a doubling of the samples holds as many looks as it takes, and only the band's bound
// (a z watched without pause) holds for any number. minSamples 0 (no gate) or n unknown:
// l unchanged.
func (l Look) Tested(n float64, minSamples int32) Look {
	if minSamples <= 0 || !(n >= float64(minSamples)) {
		return l
	}
	if s := n / float64(minSamples); s < max(l.Info, 1) {
		l.Info, l.Looks = s, 0
	}
	return l
}
