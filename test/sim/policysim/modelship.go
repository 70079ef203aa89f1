package policysim

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/signals"
	"github.com/modelship/modelship/internal/window"
)

// Modelship is modelship's autoscaler: package autoscale's Decide, the function the controller
// calls, fed the same observations the controller's SignalCache would read from Prometheus,
// with its status carried from one pass to the next as the controller does.
type Modelship struct {
	Label string
	Spec  v1alpha1.AutoscalingSpec
	// Start anchors virtual time to a wall clock for Decide's timestamps.
	Start time.Time
	// BatchLimit is the replicas' batch limit (fleet.Capacity.MaxBatch), as the controller
	// reads it from the pod template's --max-num-seqs; 0: not stated.
	BatchLimit int32
	// Work converts the token rates into the "prometheus" metric's value (replica-seconds of
	// work per second) when the spec has a prometheus metric.
	Work func(Signals) float64
	// Decisions, when set, gets one line per pass: what Decide read, the capacity the slo
	// learnt, and the count it returned with its proposals' messages (what an SRE reads in
	// status.autoscaling, as a timeline).
	Decisions io.Writer

	prev      *v1alpha1.AutoscalingStatus
	readyHist []readySample
	work      trend // the work series, for its trend (signals.TrendQuery)
	loads     trend // the token work series of the slo, for its trend
}

// trend is a total metric's series as signals.TrendQuery reads it: its subquery samples the
// load every TrendStep, a sample counts once the load has been above zero over the whole
// serving window before it (its rate's window full), the trend is deriv over TrendWindow of
// those samples, and there is none until they number TrendMinSpan/TrendStep + 1. (A count, not
// a span: after a hole, the samples before and after it may span TrendMinSpan while too few to
// count; read as a span, a workload idle 5 minutes in 15 had a trend at each return from its
// trickle before the hole and its first minute after, a rise projected over the cold start to
// 1.7 times its load, where Prometheus answers nothing.)
type trend struct {
	since time.Duration // when the load last became positive
	on    bool          // positive now
	step  int64         // the last TrendStep sampled, +1 (0: none yet)
	xs    []sample
}

// add records v at now (win: the serving window) and returns the trend.
func (tr *trend) add(now time.Duration, v float64, win time.Duration) (float64, bool) {
	switch {
	case !(v > 0):
		tr.gap()
	case !tr.on:
		tr.since, tr.on = now, true
	}
	// The subquery's steps are TrendStep apart: a pass that reaches a new one samples it.
	if k := int64(now/signals.TrendStep) + 1; k > tr.step {
		tr.step = k
		if tr.full(now, win) {
			tr.xs = append(tr.xs, sample{at: now, v: v})
		}
	}
	for len(tr.xs) > 0 && tr.xs[0].at <= now-signals.TrendWindow {
		tr.xs = tr.xs[1:]
	}
	if len(tr.xs) < int(signals.TrendMinSpan/signals.TrendStep)+1 {
		return 0, false
	}
	return Deriv(tr.xs)
}

// full: the load has been positive at each of ScrapesPerWindow steps of the window before now
// (the last included), as signals.FilledQuery answers.
func (tr *trend) full(now, win time.Duration) bool {
	return tr.on && now-tr.since >= win-win/window.ScrapesPerWindow
}

// gap records a pass without a positive answer: the load starts again when it comes back.
func (tr *trend) gap() { tr.on = false }

type sample struct {
	at time.Duration
	v  float64
}

// Deriv is PromQL's deriv: the least-squares slope per second of the samples.
func Deriv(xs []sample) (float64, bool) {
	if len(xs) < 2 {
		return 0, false
	}
	var st, sv, stt, stv float64
	n := float64(len(xs))
	for _, x := range xs {
		t := x.at.Seconds()
		st += t
		sv += x.v
		stt += t * t
		stv += t * x.v
	}
	d := n*stt - st*st
	if d == 0 {
		return 0, false
	}
	return (n*stv - st*sv) / d, true
}

// readySample is the Ready replicas a pass read.
type readySample struct {
	at    time.Duration
	ready int32
}

// readyOverWindow is the controller's Ready pods averaged over the serving window, from the
// Ready replicas the passes read (each pod counted from when it came Ready there; here a pod
// come Ready between two passes counts half the interval): 0 until the passes span a window.
func (m *Modelship) readyOverWindow(now time.Duration, ready int32) float64 {
	win := m.servingWindow()
	m.readyHist = append(m.readyHist, readySample{now, ready})
	for len(m.readyHist) > 1 && m.readyHist[1].at <= now-win {
		m.readyHist = m.readyHist[1:]
	}
	if m.readyHist[0].at > now-win {
		return 0
	}
	var area float64
	for i := 1; i < len(m.readyHist); i++ {
		a, b := m.readyHist[i-1], m.readyHist[i]
		from := max(a.at, now-win)
		if b.at <= from {
			continue // two passes at one time: nothing between them
		}
		// Ready moves between a's and b's: linear in between, as its average.
		ra := float64(a.ready) + float64(b.ready-a.ready)*float64(from-a.at)/float64(b.at-a.at)
		area += (ra + float64(b.ready)) / 2 * (b.at - from).Seconds()
	}
	return area / win.Seconds()
}

// Name implements Policy.
func (m *Modelship) Name() string { return m.Label }

// Interval implements Policy.
func (m *Modelship) Interval() time.Duration {
	if d := m.Spec.Interval.Duration; d > 0 {
		return d
	}
	return autoscale.DefaultInterval
}

// Decide implements Policy.
func (m *Modelship) Decide(s Signals) int32 {
	var obs []autoscale.Observation
	ms := m.Spec.Metrics
	if len(ms) == 0 {
		ms = []v1alpha1.AutoscalingMetric{{GPUUtilization: &v1alpha1.GPUUtilizationMetric{Target: autoscale.DefaultGPUUtilizationTarget}}}
	}
	for _, n := range autoscale.MetricNames(ms) {
		o := autoscale.Observation{Metric: n, Status: metrics.OK}
		if s.MetricsMissing {
			o.Status, o.Message = metrics.NoData, "the query returned no series"
			obs = append(obs, o)
			continue
		}
		switch n {
		case autoscale.MetricGPUUtilization:
			o.Value, o.Pods = s.GPUUtilization, s.Ready
			if !s.HasGPU {
				o.Status = metrics.NoData
			}
		case autoscale.MetricRequestsWaiting:
			o.Value = s.Waiting
		case autoscale.MetricKVCacheUsage:
			o.Value, o.Pods = s.KVCacheUsage, s.Ready
			if s.Ready == 0 {
				o.Status = metrics.NoData
			}
		case autoscale.MetricPrometheus:
			if m.Work == nil || s.NoRates {
				o.Status = metrics.NoData
				m.work.gap()
				break
			}
			o.Value = m.Work(s)
			o.Trend, o.HasTrend = m.work.add(s.Now, o.Value, m.servingWindow())
		case autoscale.MetricSaturation:
			o = m.saturation(s)
		default:
			o.Status = metrics.NoData
		}
		obs = append(obs, o)
	}
	waiting := autoscale.Observation{Metric: autoscale.MetricRequestsWaiting, Status: metrics.OK, Value: s.Waiting}
	if s.MetricsMissing || s.Ready == 0 {
		waiting.Status = metrics.NoData
	}
	// The requests running in the Ready pods, as Snapshot.RequestsRunning sums them (a pod
	// draining its requests is not Ready).
	running := autoscale.Observation{Metric: autoscale.SignalRequestsRunning, Status: metrics.OK}
	for _, p := range s.PerPod {
		running.Value += p.Running
	}
	// Their KV-cache use, averaged over them as Snapshot.KVCacheUsage does.
	kv := autoscale.Observation{Metric: autoscale.MetricKVCacheUsage, Status: metrics.OK, Value: s.KVCacheUsage, Pods: s.Ready}
	if s.MetricsMissing || s.Ready == 0 {
		running.Status, kv.Status = metrics.NoData, metrics.NoData
	}
	ttft := autoscale.Observation{Status: metrics.NoData, Value: s.TTFTP95}
	itl := autoscale.Observation{Status: metrics.NoData, Value: s.ITLP95}
	if s.HasLatency && !s.MetricsMissing {
		ttft.Status, itl.Status = metrics.OK, metrics.OK
	}
	in := autoscale.Input{
		Spec: m.Spec, Current: s.Pods, Ready: s.Ready, Starting: s.Pods - s.Ready, ReadyOverWindow: m.readyOverWindow(s.Now, s.Ready),
		Observations: obs, RequestsWaiting: waiting, RequestsRunning: running, BatchLimit: m.BatchLimit, KVCacheUsage: kv, TTFTP95: ttft, ITLP95: itl, Previous: m.prev,
		ServingWindow: m.servingWindow(),
	}
	if m.Spec.SLO != nil {
		in.Load = m.load(s)
		in.Served = autoscale.Observation{Metric: autoscale.MetricSLO, Status: metrics.OK, Value: s.Served}
		if s.MetricsMissing || s.NoRates {
			in.Served = autoscale.Observation{Metric: autoscale.MetricSLO, Status: metrics.NoData, Message: "the query returned no series"}
		}
	}
	out := autoscale.Decide(in, m.Start.Add(s.Now))
	st := out.Status
	m.prev = &st
	if m.Decisions != nil {
		writeDecision(m.Decisions, s, in, out)
	}
	return out.Desired
}

// simNamespace names the simulated pods for the grouped signal queries.
const simNamespace = "sim"

// saturation observes the saturation metric as the controller does: the grouped per-pod
// KV-cache and queue series through signals.Fetch and Snapshot.Observe over the serving pods.
func (m *Modelship) saturation(s Signals) autoscale.Observation {
	q := podSeries{}
	var ready []autoscale.PodKey
	for _, p := range s.PerPod {
		l := map[string]string{"namespace": simNamespace, "pod": p.Name}
		q[signals.QueryKVCacheUsage] = append(q[signals.QueryKVCacheUsage], metrics.Series{Labels: l, Value: p.KVCacheUsage})
		q[signals.QueryRequestsWaiting] = append(q[signals.QueryRequestsWaiting], metrics.Series{Labels: l, Value: p.Waiting})
		ready = append(ready, autoscale.PodKey{Namespace: simNamespace, Name: p.Name})
	}
	snap, _ := signals.Fetch(context.Background(), q, signals.Queries{KVCacheUsage: signals.QueryKVCacheUsage, RequestsWaiting: signals.QueryRequestsWaiting}, m.Start.Add(s.Now))
	for _, o := range snap.Observe(m.Spec, ready) {
		if o.Metric == autoscale.MetricSaturation {
			return o
		}
	}
	return autoscale.Observation{Metric: autoscale.MetricSaturation, Status: metrics.NoData, Message: "not observed"}
}

// podSeries answers the grouped signal queries from memory.
type podSeries map[string][]metrics.Series

func (p podSeries) Scalar(context.Context, string, time.Time) metrics.Sample {
	return metrics.Sample{Status: metrics.NoData}
}

func (p podSeries) Vector(_ context.Context, q string, _ time.Time) ([]metrics.Series, error) {
	return p[q], nil
}

// scrapeInterval is the simulated Prometheus's (policysim.Run scrapes every Config.ScrapeInterval,
// 15s in every run of make bench-sim).
const scrapeInterval = 15 * time.Second

// load observes the token work the controller queries for spec.autoscaling.slo
// (metrics.VLLMTokenWork: the prompt and generated token rates over the serving window), with
// its trend as signals.TrendQuery measures it and whether its window is filling as
// signals.FilledQuery tells.
func (m *Modelship) load(s Signals) autoscale.Observation {
	o := autoscale.Observation{Metric: autoscale.MetricSLO, Status: metrics.OK, Value: metrics.TokenWork(s.PromptTPS, s.GeneratedTPS)}
	if s.MetricsMissing || s.NoRates {
		m.loads.gap()
		return autoscale.Observation{Metric: autoscale.MetricSLO, Status: metrics.NoData, Message: "the query returned no series"}
	}
	o.Trend, o.HasTrend = m.loads.add(s.Now, o.Value, m.servingWindow())
	o.Filling = !m.loads.full(s.Now, m.servingWindow())
	return o
}

// servingWindow is the window the controller's rates and latencies are read over.
func (m *Modelship) servingWindow() time.Duration {
	return autoscale.ServingWindow(m.Interval(), scrapeInterval)
}

// writeDecision writes one pass of Modelship.Decisions.
func writeDecision(w io.Writer, s Signals, in autoscale.Input, out autoscale.Output) {
	var b strings.Builder
	fmt.Fprintf(&b, "t=%s pods=%d ready=%d load=%.3f served=%.2f waiting=%.0f running=%.0f kv=%.2f ttft_p95=%.2f itl_p95=%.3f desired=%d",
		s.Now.Round(time.Second), s.Pods, s.Ready, in.Load.Value, s.Served, s.Waiting, s.Running, s.KVCacheUsage, s.TTFTP95, s.ITLP95, out.Desired)
	for _, c := range out.Status.LearnedCapacities {
		fmt.Fprintf(&b, " %s: per_replica=%s floor=%s ceiling=%s request_work=%s last_miss=%s latency_floor=%s",
			c.Metric, c.PerReplica, c.Floor, c.Ceiling, c.RequestWork, c.LastMissLoad, c.LatencyFloor)
	}
	for _, p := range out.Status.Proposals {
		if p.Message != "" {
			fmt.Fprintf(&b, " | %s: %s", p.Metric, p.Message)
		}
	}
	b.WriteByte('\n')
	_, _ = io.WriteString(w, b.String())
}
