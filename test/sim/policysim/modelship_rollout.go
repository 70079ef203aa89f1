package policysim

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/analysis"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/plan"
	"github.com/modelship/modelship/internal/rollout"
)

// ModelshipRollout is modelship's blue/green rollout: rollout.Next, the state machine the
// controller runs, with measurements taken when rollout.MeasureDue says so and judged by
// package analysis (JudgeHistogram and Judge, the functions analysis.Run calls after its
// queries) on the same histograms Prometheus would return for each color over
// rollout.AnalysisWindow. The spec is the API's defaults (steps 10/25/50/100, 2m per step,
// analysis every 30s with the vllm preset: TTFT, ITL and e2e p95 at most 1.2x stable, error
// ratio at most 5%), minSamples 20 and failureLimit 0, and the simulated Prometheus's 15s
// scrape interval (a 1m window).
type ModelshipRollout struct {
	Total int32

	ms      *v1alpha1.ModelServer
	start   time.Time
	deps    map[v1alpha1.Color]*msDep
	stable  v1alpha1.Color
	started bool
	// failures are the Fail results of every measurement, "step S at X windows: message", in order:
	// why a run was rolled back (Failures).
	failures []string
}

// Failures is the Fail results of the rollout's measurements so far, each as "step S at X windows:
// message" (the metric, its z and threshold, and the effective counts), in order.
func (m *ModelshipRollout) Failures() []string { return m.failures }

type msDep struct {
	rev      string
	replicas int32
}

// NewModelshipRollout prepares the state machine with a Healthy stable revision r1 of total pods.
func NewModelshipRollout(total int32) *ModelshipRollout {
	m := &ModelshipRollout{Total: total, start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), deps: map[v1alpha1.Color]*msDep{}}
	m.ms = &v1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Name: modelServer, Namespace: namespace, Generation: 1}}
	// The API's defaults (the CRD's +kubebuilder:default markers), which a stored object
	// always carries: minSamples 20, failureLimit 0, loadMatching StablePods
	// (TestModelshipRolloutRunsTheCRDsDefaults holds them to the CRD).
	m.ms.Spec.Rollout.Analysis.MinSamples = 20
	m.ms.Spec.Rollout.FailureLimit = 0
	m.ms.Spec.Rollout.LoadMatching = v1alpha1.LoadMatchingStablePods
	// The simulated Prometheus scrapes every 15s (as the peers' 1m queries assume): the window
	// is then 4 scrapes, 1m, instead of the 4m a 60s scrape (the API's assumption) needs.
	m.ms.Spec.Rollout.Analysis.ScrapeInterval = &v1alpha1.Duration{Duration: 15 * time.Second}
	for i := 0; i < 10 && m.ms.Status.Phase != v1alpha1.PhaseHealthy; i++ {
		m.pass("r1", m.start, nil, nil)
	}
	if m.ms.Status.Stable != nil {
		m.stable = m.ms.Status.Stable.Color
	}
	return m
}

// EditRollout changes spec.rollout, the API's defaults otherwise (see NewModelshipRollout),
// before the rollout.
func (m *ModelshipRollout) EditRollout(edit func(*v1alpha1.RolloutSpec)) { edit(&m.ms.Spec.Rollout) }

// Name implements Canary.
func (m *ModelshipRollout) Name() string { return "modelship" }

// observe is what the controller observes with the warm-up check's readiness gate on the pods:
// a pod is Ready, and counted in its Deployment's readyReplicas, once it serves (its model
// loaded); v is nil before the fleet runs.
func (m *ModelshipRollout) observe(rev string, v *View) rollout.Observation {
	o := rollout.Observation{Revision: rev, Image: "vllm:" + rev, DesiredReplicas: m.Total, Colors: map[v1alpha1.Color]rollout.ColorObservation{}}
	for c, d := range m.deps {
		warm, warmPods := true, d.replicas
		if v != nil {
			color := stableColor
			if c != m.stable {
				color = candidateColor
			}
			pods, loaded := v.Loaded(color)
			warm, warmPods = pods > 0 && loaded == pods, loaded
		}
		o.Colors[c] = rollout.ColorObservation{Exists: true, Revision: d.rev, Image: "vllm:" + d.rev, Replicas: d.replicas,
			ReadyReplicas: warmPods, AvailableReplicas: warmPods, UpdatedReplicas: d.replicas, Warm: warm, WarmPods: warmPods}
	}
	return o
}

// pass runs Next once and applies its plans to the simulated Deployments (pods Ready at once).
func (m *ModelshipRollout) pass(rev string, now time.Time, meas *rollout.Measurement, v *View) rollout.Decision {
	o := m.observe(rev, v)
	o.Measurement = meas
	d := rollout.Next(m.ms, o, now)
	plan.RolloutConditions(&d.Status, d.Report) // as the controller's plan does: the next pass reads them
	for c, p := range d.Plans {
		dep := m.deps[c]
		if dep == nil {
			dep = &msDep{}
			m.deps[c] = dep
		}
		dep.rev, dep.replicas = p.Revision, p.Replicas
	}
	m.ms.Status = d.Status
	return d
}

// Tick implements Canary.
func (m *ModelshipRollout) Tick(v *View) (int32, int32, Outcome) {
	now := m.start.Add(v.Now)
	if !m.started {
		m.started = true
		m.ms.Generation++
	}
	var meas *rollout.Measurement
	if rollout.MeasureDue(m.ms, now) {
		look := rollout.MeasureLook(m.ms, now)
		meas = &rollout.Measurement{At: now, Results: m.measure(v, rollout.MeasureWindow(m.ms, now), look, now)}
		for _, r := range meas.Results {
			if r.Verdict == v1alpha1.VerdictFail {
				m.failures = append(m.failures, fmt.Sprintf("step %d at %.1f windows: %s", look.Step, look.Info, r.Message))
			}
		}
	}
	d := m.pass("r2", now, meas, v)
	cand := m.otherColor()
	pods := int32(0)
	if dep := m.deps[cand]; dep != nil && dep.rev == "r2" {
		pods = dep.replicas
	}
	switch {
	case m.ms.Status.Phase == v1alpha1.PhaseRolledBack:
		return 0, 0, OutcomeRolledBack
	case m.ms.Status.Stable != nil && m.ms.Status.Stable.Revision == "r2":
		return 100, m.Total, OutcomePromoted
	}
	return d.Weights[cand], pods, OutcomeInProgress
}

func (m *ModelshipRollout) otherColor() v1alpha1.Color {
	if m.stable == v1alpha1.Blue {
		return v1alpha1.Green
	}
	return v1alpha1.Blue
}

// measure judges each effective metric of the spec on the colors' windows.
func (m *ModelshipRollout) measure(v *View, window time.Duration, look analysis.Look, at time.Time) []v1alpha1.MetricResult {
	cand, stable := v.Window(candidateColor, window), v.Window(stableColor, window)
	var slo *v1alpha1.LatencySLO
	if m.ms.Spec.Autoscaling != nil {
		slo = m.ms.Spec.Autoscaling.SLO
	}
	ms, _ := metrics.EffectiveMetrics(metrics.WithSLO(m.ms.Spec.Rollout.Analysis, slo))
	minSamples := m.ms.Spec.Rollout.Analysis.MinSamples
	count := func(w ColorWindow) metrics.Sample {
		return metrics.Sample{Status: metrics.OK, Value: w.Finished}
	}
	errRatio := func(w ColorWindow) metrics.Sample {
		if w.Finished == 0 {
			return metrics.Sample{Status: metrics.NoData, Message: "no request finished"}
		}
		return metrics.Sample{Status: metrics.OK, Value: w.Failed / w.Finished}
	}
	var out []v1alpha1.MetricResult
	for _, mt := range ms {
		if mt.Histogram != nil {
			pick := func(w ColorWindow) analysis.HistogramSample {
				switch mt.Name {
				case metrics.MetricITLP95:
					return analysis.HistogramSample{Histogram: w.ITL, Groups: w.ITLPods, Requests: count(w)}
				case metrics.MetricE2EP95:
					return analysis.HistogramSample{Histogram: w.E2E, Groups: w.E2EPods, Requests: count(w)}
				}
				return analysis.HistogramSample{Histogram: w.TTFT, Groups: w.TTFTPods, Requests: count(w)}
			}
			out = append(out, analysis.JudgeHistogram(mt, pick(cand), pick(stable), minSamples, look, at))
			continue
		}
		if mt.PerUnit != nil {
			// decode-per-token, the presets' per-unit metric: the pods' decode seconds over
			// their decoded tokens.
			c := analysis.PerUnitSample{Units: cand.DecodeUnits(), Requests: count(cand)}
			s := analysis.PerUnitSample{Units: stable.DecodeUnits(), Requests: count(stable)}
			if analysis.PairsOverTime(c.Units, s.Units) {
				// As the controller: the blocks are read only where the pods are too few.
				scrape := rollout.ScrapeInterval(m.ms)
				c.Blocks, s.Blocks = v.DecodeBlocks(candidateColor, window, scrape), v.DecodeBlocks(stableColor, window, scrape)
			}
			out = append(out, analysis.JudgePerUnit(mt, c, s, minSamples, look, at))
			continue
		}
		if mt.Name == metrics.MetricAbortRatio {
			// The simulated clients never give up: no aborts on either color.
			none := func(w ColorWindow) metrics.Sample {
				if w.Finished == 0 {
					return metrics.Sample{Status: metrics.NoData, Message: "no request finished"}
				}
				return metrics.Sample{Status: metrics.OK}
			}
			out = append(out, analysis.JudgeProportion(mt, none(cand), none(stable), count(cand), count(stable), minSamples, look, at))
			continue
		}
		out = append(out, analysis.Judge(mt, errRatio(cand), errRatio(stable), count(cand), minSamples, at))
	}
	// As analysis.Run: the latency verdicts hold while the stable color is saturated.
	return analysis.HoldIfSaturated(ms, out, stable.Saturation)
}
