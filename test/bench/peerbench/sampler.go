// Package peerbench runs the side-by-side scenarios of `make bench-peers`: modelship against the
// real peers (KEDA feeding kube-controller-manager's HPA, Flagger with the Gateway API provider)
// on one local stack (test/framework/stack), the fleet simulator replaying the same trace to
// each contender in turn. What it measures it reads from the simulator and the API server, never
// from Prometheus: a scenario stops Prometheus on purpose, and the figures must not stop with it.
package peerbench

import (
	"context"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/test/bench/scalebench"
	"github.com/modelship/modelship/test/framework/fleet"
)

// Point is what the sampler saw of one contender's namespace at one moment. Counters are
// cumulative since the sampler started and survive simulator restarts and pod deletions.
type Point struct {
	At time.Time
	// Desired is the replicas the contender's scaler asks for (-1: not known).
	Desired int32
	// Pods are the model-server pods on a node and not finished; Ready the Ready ones among them;
	// GPUs what they hold.
	Pods, Ready, GPUs int
	// Phase and Weight are the rollout's phase and the candidate's (canary's) traffic weight.
	Phase  string
	Weight int32
	// Served counts successful requests by the image of the pod that served them.
	Served map[string]float64
	// Responses counts the simulated Gateway's responses by HTTP code.
	Responses map[string]float64
	// TTFT and ITL are the cumulative latency histograms of the namespace's pods.
	TTFT, ITL metrics.Histogram
	// Why is State.Why at the point.
	Why string
}

// State is a contender's own view of its workload: what its scaler asks for and where its
// rollout stands.
type State struct {
	Desired int32
	Phase   string
	Weight  int32
	// Why is what the scaler said of its count, where it says it (modelship: see scalerSaid).
	Why string
}

// Sampler reads the fleet simulator's /metrics and the namespace's pods every Interval.
type Sampler struct {
	Client    client.Client
	SimURL    string
	Namespace string
	// State reads the contender's state; nil leaves Desired at -1.
	State    func(ctx context.Context) (State, error)
	Interval time.Duration

	mu     sync.Mutex
	points []Point
	images map[string]string // pod -> image, of every pod seen
	acc    accumulator
}

// Run samples until ctx ends.
func (s *Sampler) Run(ctx context.Context) {
	if s.Interval <= 0 {
		s.Interval = 2 * time.Second
	}
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		s.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Points returns a copy of the points so far.
func (s *Sampler) Points() []Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Point(nil), s.points...)
}

func (s *Sampler) sample(ctx context.Context) {
	now := time.Now()
	p := Point{At: now, Desired: -1}
	var pods corev1.PodList
	if err := s.Client.List(ctx, &pods, client.InNamespace(s.Namespace)); err == nil {
		s.mu.Lock()
		if s.images == nil {
			s.images = map[string]string{}
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			gpus := podGPUs(pod)
			if gpus == 0 {
				continue
			}
			s.images[pod.Name] = modelImage(pod)
			if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
				continue
			}
			p.Pods++
			p.GPUs += gpus
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && pod.DeletionTimestamp == nil {
					p.Ready++
				}
			}
		}
		s.mu.Unlock()
	}
	if s.State != nil {
		if st, err := s.State(ctx); err == nil {
			p.Desired, p.Phase, p.Weight, p.Why = st.Desired, st.Phase, st.Weight, st.Why
		}
	}
	families, err := scrape(ctx, s.SimURL+"/metrics")
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.acc.add(s.Namespace, families, s.images)
	}
	p.Served, p.Responses = cloneMap(s.acc.served), cloneMap(s.acc.responses)
	p.TTFT, p.ITL = s.acc.histogram(fleet.MetricTTFT), s.acc.histogram(fleet.MetricITL)
	s.points = append(s.points, p)
}

func podGPUs(pod *corev1.Pod) int {
	n := 0
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Limits["nvidia.com/gpu"]; ok {
			n += int(q.Value())
		}
	}
	return n
}

func modelImage(pod *corev1.Pod) string {
	for _, c := range pod.Spec.Containers {
		if _, ok := c.Resources.Limits["nvidia.com/gpu"]; ok {
			return c.Image
		}
	}
	return ""
}

func scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return scalebench.ScrapeMetrics(ctx, url)
}

// accumulator turns the simulator's counters, which restart with the simulator and vanish with
// their pods, into totals that only grow: each series adds what it grew since it was last seen,
// or its whole value when it is new or went back (a restart).
type accumulator struct {
	last      map[string]float64
	served    map[string]float64
	responses map[string]float64
	buckets   map[string]map[float64]float64 // metric -> le -> count
}

func (a *accumulator) grow(key string, v float64) float64 {
	if a.last == nil {
		a.last = map[string]float64{}
	}
	prev, seen := a.last[key]
	a.last[key] = v
	if !seen || v < prev {
		return v
	}
	return v - prev
}

func (a *accumulator) add(ns string, families map[string]*dto.MetricFamily, images map[string]string) {
	if a.served == nil {
		a.served, a.responses, a.buckets = map[string]float64{}, map[string]float64{}, map[string]map[float64]float64{}
	}
	for _, m := range families[fleet.MetricRequestSuccess].GetMetric() {
		l := labelMap(m)
		if l["namespace"] != ns {
			continue
		}
		d := a.grow(seriesKey(fleet.MetricRequestSuccess, l), counterValue(m))
		a.served[images[l["pod"]]] += d
	}
	for _, m := range families[fleet.MetricGatewayResponses].GetMetric() {
		l := labelMap(m)
		if l["namespace"] != ns {
			continue
		}
		a.responses[l["code"]] += a.grow(seriesKey(fleet.MetricGatewayResponses, l), counterValue(m))
	}
	for _, name := range []string{fleet.MetricTTFT, fleet.MetricITL} {
		if a.buckets[name] == nil {
			a.buckets[name] = map[float64]float64{}
		}
		for _, m := range families[name].GetMetric() {
			l := labelMap(m)
			if l["namespace"] != ns {
				continue
			}
			h := m.GetHistogram()
			for _, b := range h.GetBucket() {
				le := b.GetUpperBound()
				a.buckets[name][le] += a.grow(seriesKey(name, l)+"le="+strconv.FormatFloat(le, 'g', -1, 64), float64(b.GetCumulativeCount()))
			}
			a.buckets[name][math.Inf(1)] += a.grow(seriesKey(name, l)+"le=+Inf", float64(h.GetSampleCount()))
		}
	}
}

func (a *accumulator) histogram(name string) metrics.Histogram {
	h := make(metrics.Histogram, 0, len(a.buckets[name]))
	for le, c := range a.buckets[name] {
		h = append(h, metrics.Bucket{UpperBound: le, Count: c})
	}
	sort.Slice(h, func(i, j int) bool { return h[i].UpperBound < h[j].UpperBound })
	return h
}

// counterValue reads a counter, or an untyped sample (text without a TYPE line).
func counterValue(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetUntyped().GetValue()
}

func labelMap(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func seriesKey(name string, l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(name)
	for _, k := range keys {
		b.WriteString("," + k + "=" + l[k])
	}
	return b.String()
}

func cloneMap(m map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Delta is the histogram of the observations between two cumulative histograms of the same
// buckets (a later minus an earlier).
func Delta(later, earlier metrics.Histogram) metrics.Histogram {
	before := map[float64]float64{}
	for _, b := range earlier {
		before[b.UpperBound] = b.Count
	}
	out := make(metrics.Histogram, 0, len(later))
	for _, b := range later {
		out = append(out, metrics.Bucket{UpperBound: b.UpperBound, Count: math.Max(0, b.Count-before[b.UpperBound])})
	}
	return out
}
