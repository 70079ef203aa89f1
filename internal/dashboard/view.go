package dashboard

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/health"
)

// Row is one ModelServer as the fleet page shows it.
type Row struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Phase is status.phase, "Unknown" before the controller wrote one.
	Phase string `json:"phase"`
	// Health is the kstatus reading of the conditions: Current, InProgress or Failed.
	Health string `json:"health"`
	// HealthMessage says why, in words.
	HealthMessage string `json:"healthMessage"`
	// Stable and Candidate are the colors, nil when absent.
	Stable    *ColorView `json:"stable,omitempty"`
	Candidate *ColorView `json:"candidate,omitempty"`
	// Weights is the traffic split in percent.
	Weights v1alpha1.Weights `json:"weights"`
	// InProgress is true while a rollout can be paused, promoted or aborted.
	InProgress bool `json:"inProgress"`
	// Step is "step k of n (w%)" during a rollout, else "".
	Step string `json:"step"`
	// Paused mirrors spec.paused.
	Paused bool `json:"paused"`
	// Replicas and ReadyReplicas count both colors.
	Replicas      int32 `json:"replicas"`
	ReadyReplicas int32 `json:"readyReplicas"`
	// DesiredReplicas is the autoscaler's count, 0 without autoscaling.
	DesiredReplicas int32 `json:"desiredReplicas,omitempty"`
	// GPUUtilization is the autoscaler's last gpuUtilization reading ("" when none).
	GPUUtilization string `json:"gpuUtilization,omitempty"`
	// Generation and ObservedGeneration tell a stale status apart.
	Generation         int64 `json:"generation"`
	ObservedGeneration int64 `json:"observedGeneration"`
}

// ColorView is one color's revision and pods.
type ColorView struct {
	Color    string `json:"color"`
	Revision string `json:"revision"`
	Image    string `json:"image,omitempty"`
	Replicas int32  `json:"replicas"`
	Ready    int32  `json:"ready"`
	Warm     bool   `json:"warm,omitempty"`
}

// StepView is one step of the rollout's timeline.
type StepView struct {
	// Index counts from 1.
	Index int `json:"index"`
	// Weight is the candidate's share at this step.
	Weight int32 `json:"weight"`
	// State is done, current or pending.
	State string `json:"state"`
}

// Measurement is one analysis result the dashboard saw, at the step it was taken.
type Measurement struct {
	Step      int32  `json:"step"`
	Revision  string `json:"revision"`
	Metric    string `json:"metric"`
	Candidate string `json:"candidate,omitempty"`
	Stable    string `json:"stable,omitempty"`
	Bound     string `json:"bound,omitempty"`
	Verdict   string `json:"verdict"`
	// Samples is the sample count the analysis reported ("candidate 40, stable 360"), if any.
	Samples string    `json:"samples,omitempty"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
}

// Sample is the replicas, weights and GPU utilization at one moment, for the charts.
type Sample struct {
	At              time.Time `json:"at"`
	BlueReady       int32     `json:"blueReady"`
	BlueReplicas    int32     `json:"blueReplicas"`
	GreenReady      int32     `json:"greenReady"`
	GreenReplicas   int32     `json:"greenReplicas"`
	CandidateWeight int32     `json:"candidateWeight"`
	// GPUUtilization is NaN-free: nil when unknown.
	GPUUtilization *float64 `json:"gpuUtilization,omitempty"`
}

// EventView is one Kubernetes Event about the ModelServer.
type EventView struct {
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Count   int32     `json:"count"`
	Last    time.Time `json:"last"`
}

// HistoryView is one revision of status.history.
type HistoryView struct {
	Revision string    `json:"revision"`
	Image    string    `json:"image,omitempty"`
	Outcome  string    `json:"outcome"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
	// Current is true for the revision spec.template names now.
	Current bool `json:"current"`
}

// Detail is everything the page of one ModelServer shows.
type Detail struct {
	Row
	Steps        []StepView                  `json:"steps"`
	Analysis     []Measurement               `json:"analysis"`
	Measurements []Measurement               `json:"measurements"`
	History      []HistoryView               `json:"history"`
	Conditions   []metav1.Condition          `json:"conditions"`
	Autoscaling  *v1alpha1.AutoscalingStatus `json:"autoscaling,omitempty"`
	Samples      []Sample                    `json:"samples"`
	// GPUSeries is GPU utilization per color from Prometheus, when a URL was given.
	GPUSeries map[string][]Point `json:"gpuSeries,omitempty"`
	// PrometheusError says why GPUSeries is missing when Prometheus was asked.
	PrometheusError string      `json:"prometheusError,omitempty"`
	Events          []EventView `json:"events"`
	// Actions lists the actions that apply now (pause, resume, promote, promote-full, abort).
	Actions []string `json:"actions"`
}

// Point is one value of a time series.
type Point struct {
	At    time.Time `json:"at"`
	Value float64   `json:"value"`
}

// RowOf is the fleet page's view of ms.
func RowOf(ms *v1alpha1.ModelServer) Row {
	st := ms.Status
	r := Row{
		Namespace:          ms.Namespace,
		Name:               ms.Name,
		Phase:              string(st.Phase),
		Stable:             colorView(st.Stable),
		Weights:            st.Weights,
		InProgress:         health.InProgress(ms),
		Step:               health.StepText(ms),
		Paused:             ms.Spec.Paused,
		Replicas:           st.Replicas,
		ReadyReplicas:      st.ReadyReplicas,
		Generation:         ms.Generation,
		ObservedGeneration: st.ObservedGeneration,
	}
	if r.Phase == "" {
		r.Phase = "Unknown"
	}
	if st.Candidate != nil && (r.InProgress || st.Phase == v1alpha1.PhaseRolledBack) {
		r.Candidate = colorView(st.Candidate)
	}
	r.Health, r.HealthMessage = kstatus(ms)
	if a := st.Autoscaling; a != nil {
		r.DesiredReplicas = a.DesiredReplicas
		for _, p := range a.Proposals {
			if p.Metric == "gpuUtilization" && p.Value != "" {
				r.GPUUtilization = p.Value
			}
		}
	}
	return r
}

func colorView(c *v1alpha1.ColorStatus) *ColorView {
	if c == nil {
		return nil
	}
	return &ColorView{Color: string(c.Color), Revision: c.Revision, Image: c.Image, Replicas: c.Replicas, Ready: c.ReadyReplicas, Warm: c.Warm}
}

// kstatus reads the conditions as kstatus does (Stalled wins, then Reconciling, then Ready),
// treating a status older than the spec as InProgress.
func kstatus(ms *v1alpha1.ModelServer) (string, string) {
	st := ms.Status
	if st.ObservedGeneration < ms.Generation {
		return "InProgress", "the controller has not observed generation " + strconv.FormatInt(ms.Generation, 10) + " yet"
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return "Failed", c.Reason + ": " + c.Message
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReconciling); c != nil && c.Status == metav1.ConditionTrue {
		return "InProgress", c.Reason + ": " + c.Message
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c != nil {
		if c.Status == metav1.ConditionTrue {
			return "Current", c.Message
		}
		return "InProgress", c.Reason + ": " + c.Message
	}
	return "InProgress", "no conditions yet"
}

// StepsOf is the rollout's timeline: each step done, current or pending.
func StepsOf(ms *v1alpha1.ModelServer) []StepView {
	steps := health.Steps(ms)
	out := make([]StepView, 0, len(steps))
	cur := int(ms.Status.Rollout.Step)
	inProgress := health.InProgress(ms)
	for i, w := range steps {
		s := StepView{Index: i + 1, Weight: w, State: "pending"}
		switch {
		case !inProgress:
			if ms.Status.Phase == v1alpha1.PhaseHealthy {
				s.State = "done"
			}
		case i+1 < cur:
			s.State = "done"
		case i+1 == cur:
			s.State = "current"
		}
		out = append(out, s)
	}
	return out
}

// The analysis reports sample counts in its messages: "samples: candidate 40, stable 360" or
// "too few samples: 12 < 50".
var (
	samplesPattern = regexp.MustCompile(`samples: (candidate [^;()]+)`)
	tooFewPattern  = regexp.MustCompile(`too few samples: ([0-9.]+) < ([0-9]+)`)
)

// MeasurementsOf turns status.rollout.analysis into the measurements of the current step.
func MeasurementsOf(ms *v1alpha1.ModelServer) []Measurement {
	out := make([]Measurement, 0, len(ms.Status.Rollout.Analysis))
	rev := ""
	if ms.Status.Candidate != nil {
		rev = ms.Status.Candidate.Revision
	}
	for _, a := range ms.Status.Rollout.Analysis {
		m := Measurement{
			Step: ms.Status.Rollout.Step, Revision: rev, Metric: a.Name, Candidate: a.Candidate, Stable: a.Stable,
			Bound: a.Bound, Verdict: string(a.Verdict), Message: a.Message, At: a.At.Time,
		}
		if s := samplesPattern.FindStringSubmatch(a.Message); s != nil {
			m.Samples = strings.TrimSpace(s[1])
		} else if s := tooFewPattern.FindStringSubmatch(a.Message); s != nil {
			m.Samples = s[1] + " (needs " + s[2] + ")"
		}
		out = append(out, m)
	}
	return out
}

// SampleOf is the chart point of ms at now.
func SampleOf(ms *v1alpha1.ModelServer, now time.Time) Sample {
	s := Sample{At: now, CandidateWeight: ms.Status.Weights.Candidate}
	for _, c := range []*v1alpha1.ColorStatus{ms.Status.Stable, ms.Status.Candidate} {
		if c == nil {
			continue
		}
		switch c.Color {
		case v1alpha1.Blue:
			s.BlueReady, s.BlueReplicas = c.ReadyReplicas, c.Replicas
		case v1alpha1.Green:
			s.GreenReady, s.GreenReplicas = c.ReadyReplicas, c.Replicas
		}
	}
	if a := ms.Status.Autoscaling; a != nil {
		for _, p := range a.Proposals {
			if p.Metric != "gpuUtilization" || p.Value == "" {
				continue
			}
			if v, err := strconv.ParseFloat(p.Value, 64); err == nil {
				s.GPUUtilization = &v
			}
		}
	}
	return s
}

// HistoryOf is status.history newest first, marking the revision the spec names now.
func HistoryOf(ms *v1alpha1.ModelServer, current string) []HistoryView {
	out := make([]HistoryView, 0, len(ms.Status.History))
	for _, h := range ms.Status.History {
		out = append(out, HistoryView{Revision: h.Revision, Image: h.Image, Outcome: string(h.Outcome), Reason: h.Reason,
			At: h.At.Time, Current: h.Revision == current})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	return out
}

// ActionsOf lists the actions that apply to ms now, in the order the page shows them.
func ActionsOf(ms *v1alpha1.ModelServer) []string {
	var out []string
	if health.InProgress(ms) {
		if ms.Spec.Paused {
			out = append(out, ActionResume)
		} else {
			out = append(out, ActionPause)
		}
		out = append(out, ActionPromote, ActionPromoteFull, ActionAbort)
	} else if ms.Spec.Paused {
		out = append(out, ActionResume)
	}
	if ms.Status.Stable != nil && len(ms.Status.History) > 0 {
		out = append(out, ActionRollback)
	}
	return out
}

// EventsOf is the events about ms, newest first, at most limit.
func EventsOf(events []corev1.Event, limit int) []EventView {
	out := make([]EventView, 0, len(events))
	for _, e := range events {
		last := e.LastTimestamp.Time
		if last.IsZero() {
			last = e.EventTime.Time
		}
		if last.IsZero() {
			last = e.CreationTimestamp.Time
		}
		n := e.Count
		if n == 0 {
			n = 1
		}
		out = append(out, EventView{Type: e.Type, Reason: e.Reason, Message: e.Message, Count: n, Last: last})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Last.After(out[j].Last) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
