// Package telemetry is the controller's own Prometheus metrics, prefixed modelship_, served on
// its /metrics beside controller-runtime's: each ModelServer's rollout (phase, step, weights),
// analysis measurements and verdicts, replicas per color, autoscaling decisions and GPU limits,
// and the Prometheus queries the controller sends. Labels are bounded: namespace, name, color or
// role, metric, and small fixed sets (phase, verdict, reason); never revision hashes. A deleted
// ModelServer's series are removed.
package telemetry

import (
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Phases are the values of the phase label, every one exported (0 or 1) per ModelServer.
var Phases = []v1alpha1.Phase{v1alpha1.PhasePending, v1alpha1.PhaseProgressing, v1alpha1.PhasePaused,
	v1alpha1.PhaseAwaitingPromotion, v1alpha1.PhaseHealthy, v1alpha1.PhaseRolledBack, v1alpha1.PhaseDegraded}

var (
	phase = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "modelship_rollout_phase",
		Help: "1 for the ModelServer's current phase, 0 for the others."}, []string{"namespace", "name", "phase"})
	step = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "modelship_rollout_step",
		Help: "The rollout's current step (0: none or warming up)."}, []string{"namespace", "name"})
	weight = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "modelship_rollout_weight_percent",
		Help: "Traffic weight of the stable and candidate roles."}, []string{"namespace", "name", "role"})
	analysisValue = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "modelship_analysis_value",
		Help: "Last measured value of an analysis metric for the candidate and the stable color."}, []string{"namespace", "name", "metric", "role"})
	analysisVerdict = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "modelship_analysis_verdict",
		Help: "1 for the last verdict of an analysis metric (Pass, Fail, Inconclusive), 0 for the others."}, []string{"namespace", "name", "metric", "verdict"})
	replicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "modelship_replicas",
		Help: "Replicas of each color: desired (spec) and ready."}, []string{"namespace", "name", "color", "state"})
	desired = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "modelship_autoscaling_desired_replicas",
		Help: "The autoscaler's desired replica count."}, []string{"namespace", "name"})
	decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "modelship_autoscaling_decisions_total",
		Help: "Changes of the autoscaler's desired count, by reason (ScaledUp, ScaledDown)."}, []string{"namespace", "name", "reason"})
	limited = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "modelship_scaling_limited",
		Help: "1 while the desired count is capped, by reason (GPUCapacityLimited, GPUQuotaLimited, BoundsLimited, ConflictingAutoscaler)."}, []string{"namespace", "name", "reason"})
	queryDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "modelship_prometheus_query_duration_seconds",
		Help: "Latency of the controller's Prometheus queries.", Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}}, []string{"outcome"})
	queryErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "modelship_prometheus_query_errors_total",
		Help: "Prometheus queries that failed, by kind (timeout, error)."}, []string{"kind"})
)

var register sync.Once

// collectors are every metric of the package.
func collectors() []prometheus.Collector {
	return []prometheus.Collector{phase, step, weight, analysisValue, analysisVerdict, replicas, desired, decisions, limited,
		queryDuration, queryErrors}
}

// Register adds the metrics to controller-runtime's registry (served on /metrics). Safe to call
// more than once.
func Register() {
	register.Do(func() {
		ctrlmetrics.Registry.MustRegister(collectors()...)
	})
}

// MetricNames are the names of the metrics Register serves (a histogram by its base name),
// series or not.
func MetricNames() []string {
	var names []string
	for _, c := range collectors() {
		names = append(names, DescribedNames(c)...)
	}
	return names
}

// fqName reads a descriptor's metric name (Desc has no accessor).
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// DescribedNames are the names of the metrics a collector describes.
func DescribedNames(c prometheus.Collector) []string {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	var names []string
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

// Record exports a ModelServer's status as the controller just computed it.
func Record(ms *v1alpha1.ModelServer) {
	ns, name := ms.Namespace, ms.Name
	st := ms.Status
	for _, p := range Phases {
		phase.WithLabelValues(ns, name, string(p)).Set(b2f(st.Phase == p))
	}
	step.WithLabelValues(ns, name).Set(float64(st.Rollout.Step))
	weight.WithLabelValues(ns, name, "stable").Set(float64(st.Weights.Stable))
	weight.WithLabelValues(ns, name, "candidate").Set(float64(st.Weights.Candidate))
	analysisValue.DeletePartialMatch(prometheus.Labels{"namespace": ns, "name": name})
	analysisVerdict.DeletePartialMatch(prometheus.Labels{"namespace": ns, "name": name})
	for _, a := range st.Rollout.Analysis {
		for role, v := range map[string]string{"candidate": a.Candidate, "stable": a.Stable} {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				analysisValue.WithLabelValues(ns, name, a.Name, role).Set(f)
			}
		}
		for _, v := range []v1alpha1.Verdict{v1alpha1.VerdictPass, v1alpha1.VerdictFail, v1alpha1.VerdictInconclusive} {
			analysisVerdict.WithLabelValues(ns, name, a.Name, string(v)).Set(b2f(a.Verdict == v))
		}
	}
	for _, c := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
		var want, ready int32
		for _, cs := range []*v1alpha1.ColorStatus{st.Stable, st.Candidate} {
			if cs != nil && cs.Color == c {
				want, ready = cs.Replicas, cs.ReadyReplicas
			}
		}
		replicas.WithLabelValues(ns, name, string(c), "desired").Set(float64(want))
		replicas.WithLabelValues(ns, name, string(c), "ready").Set(float64(ready))
	}
	if a := st.Autoscaling; a != nil {
		desired.WithLabelValues(ns, name).Set(float64(a.DesiredReplicas))
	}
	limited.DeletePartialMatch(prometheus.Labels{"namespace": ns, "name": name})
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionScalingLimited); c != nil && c.Status == "True" {
		limited.WithLabelValues(ns, name, c.Reason).Set(1)
	}
}

// Decision counts a change of the autoscaler's desired count (reason ScaledUp or ScaledDown).
func Decision(ms *v1alpha1.ModelServer, reason string) {
	decisions.WithLabelValues(ms.Namespace, ms.Name, reason).Inc()
}

// Forget removes a deleted ModelServer's series.
func Forget(key types.NamespacedName) {
	labels := prometheus.Labels{"namespace": key.Namespace, "name": key.Name}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{phase, step, weight, analysisValue, analysisVerdict, replicas, desired, decisions, limited} {
		v.DeletePartialMatch(labels)
	}
}

// Query records one Prometheus query: its latency and, when it failed, whether it timed out.
func Query(took time.Duration, err error, timedOut bool) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
		kind := "error"
		if timedOut {
			kind = "timeout"
		}
		queryErrors.WithLabelValues(kind).Inc()
	}
	queryDuration.WithLabelValues(outcome).Observe(took.Seconds())
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
