package signals

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/metrics"
)

// Source is one way of measuring what a ModelServer's autoscaler decides on, in the style of
// KEDA's scalers: the built-in signals, a custom PromQL query, the resource or external metrics
// API, the latency SLOs. Fetch may block on the network: Cache runs it off the reconcile
// workers. A source that cannot measure says so in its observations (metrics.Error or NoData,
// never a zero); the error is for logs.
type Source interface {
	// Name names the source in logs ("builtin", "prometheus", "resource/cpu", ...).
	Name() string
	// Fetch measures the target at now.
	Fetch(ctx context.Context, t Target, now time.Time) (Signals, error)
}

// Target is the ModelServer a pass measures: its spec and names, and its pods as the pass saw
// them.
type Target struct {
	// ModelServer is read, never changed.
	ModelServer *v1alpha1.ModelServer
	// Ready are the Ready pods of both colors, ReadyPods the same pods in full (for the resource
	// metrics API's requests).
	Ready     []autoscale.PodKey
	ReadyPods []corev1.Pod
	// Pools are the ModelServer's InferencePools and their Ready pods (endpoint picker signals).
	Pools []autoscale.Pool
	// Route is the name of the HTTPRoute that carries the ModelServer's traffic (the gateway
	// metric counts requests at it).
	Route string
}

// Signals is what sources measured for one ModelServer (see autoscale.Input). A zero
// RequestsWaiting, TTFTP95, ITLP95 or Load (empty Status) was not measured by the source.
type Signals struct {
	Observations    []autoscale.Observation
	RequestsWaiting autoscale.Observation
	// RequestsRunning is the requests running in the Ready pods, for the SLO's batch guard;
	// KVCacheUsage their KV-cache use, averaged, for its KV guard.
	RequestsRunning autoscale.Observation
	KVCacheUsage    autoscale.Observation
	TTFTP95, ITLP95 autoscale.Observation
	// Load is the token work for spec.autoscaling.slo.
	Load autoscale.Observation
	// Served is the requests finished per second, for spec.autoscaling.slo's fast path.
	Served autoscale.Observation
}

// Deps are what the sources fetch with.
type Deps struct {
	// Snapshots is the built-in signals' cache; nil without Prometheus.
	Snapshots *SnapshotCache
	// Prometheus answers custom queries and the latency SLOs; nil without Prometheus.
	Prometheus metrics.Querier
	// Policy is checked on every query as it runs.
	Policy metrics.QueryPolicy
	// MetricsAPIs reads metrics.k8s.io and external.metrics.k8s.io; nil when not configured.
	MetricsAPIs MetricsAPIs
	// GatewayNamespace is the namespace label of the gateway's own series
	// (--gateway-metrics-namespace); empty refuses the gateway metric.
	GatewayNamespace string
}

// noPrometheus is the message of a metric that needs the Prometheus the controller has not.
const noPrometheus = "no Prometheus configured (--prometheus-url)"

// Sources builds the sources of ms's autoscaling spec: the built-in signals (or, without
// Prometheus, an error for each built-in metric), one source per custom metric in spec order,
// the latency SLOs when spec.autoscaling.slo or a learnCapacity metric sets one, and the token
// work for spec.autoscaling.slo.
func (d Deps) Sources(ms *v1alpha1.ModelServer) []Source {
	spec := ms.Spec.Autoscaling
	if spec == nil {
		return nil
	}
	var out []Source
	if d.Snapshots != nil {
		out = append(out, builtin{d.Snapshots})
	}
	names := autoscale.MetricNames(spec.Metrics)
	var missing []string
	for i, m := range spec.Metrics {
		switch {
		case m.Prometheus != nil:
			out = append(out, promQL{name: names[i], query: m.Prometheus.Query, prom: d.Prometheus, policy: d.Policy})
		case m.Resource != nil:
			out = append(out, resourceMetric{name: names[i], resource: m.Resource.Name, apis: d.MetricsAPIs})
		case m.External != nil:
			out = append(out, externalMetric{name: names[i], metric: m.External, apis: d.MetricsAPIs, policy: d.Policy})
		case m.Gateway != nil:
			out = append(out, gatewayMetric{name: names[i], metric: m.Gateway, prom: d.Prometheus, policy: d.Policy, namespace: d.GatewayNamespace})
		default:
			missing = append(missing, names[i])
		}
	}
	if d.Snapshots == nil && len(missing) > 0 {
		out = append(out, unavailable{names: missing, message: noPrometheus})
	}
	if d.Prometheus != nil {
		if l := latencyOf(ms); l.ttft || l.itl {
			l.prom, l.policy = d.Prometheus, d.Policy
			out = append(out, l)
		}
	}
	if spec.SLO != nil {
		out = append(out, tokenWork{prom: d.Prometheus, policy: d.Policy})
	}
	return out
}

// Gather runs sources one after the other and merges what they measured: the observations in
// order, requests waiting and the latencies from the source that measured them (NoData when
// none did). The error joins the sources' errors.
func Gather(ctx context.Context, sources []Source, t Target, now time.Time) (Signals, error) {
	out := Signals{
		RequestsWaiting: autoscale.Observation{Metric: autoscale.MetricRequestsWaiting, Status: metrics.NoData, Message: "no signals"},
		RequestsRunning: autoscale.Observation{Metric: autoscale.SignalRequestsRunning, Status: metrics.NoData, Message: "no signals"},
		KVCacheUsage:    autoscale.Observation{Metric: autoscale.MetricKVCacheUsage, Status: metrics.NoData, Message: "no signals"},
		TTFTP95:         autoscale.Observation{Status: metrics.NoData, Message: "no latency SLO"},
		Load:            autoscale.Observation{Metric: autoscale.MetricSLO, Status: metrics.NoData, Message: "no slo"},
		Served:          autoscale.Observation{Metric: autoscale.MetricSLO, Status: metrics.NoData, Message: "no slo"},
	}
	out.ITLP95 = out.TTFTP95
	var errs []error
	for _, s := range sources {
		got, err := s.Fetch(ctx, t, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Name(), err))
		}
		out.Observations = append(out.Observations, got.Observations...)
		if got.RequestsWaiting.Status != "" {
			out.RequestsWaiting = got.RequestsWaiting
		}
		if got.RequestsRunning.Status != "" {
			out.RequestsRunning = got.RequestsRunning
		}
		if got.KVCacheUsage.Status != "" {
			out.KVCacheUsage = got.KVCacheUsage
		}
		if got.TTFTP95.Status != "" {
			out.TTFTP95 = got.TTFTP95
		}
		if got.ITLP95.Status != "" {
			out.ITLP95 = got.ITLP95
		}
		if got.Load.Status != "" {
			out.Load = got.Load
		}
		if got.Served.Status != "" {
			out.Served = got.Served
		}
	}
	return out, errors.Join(errs...)
}

// builtin is the built-in signals (gpuUtilization, requestsWaiting, kvCacheUsage, saturation,
// endpointPicker): one grouped query per signal for all ModelServers, shared through the
// SnapshotCache and mapped onto the target's Ready pods in memory.
type builtin struct{ snapshots *SnapshotCache }

func (builtin) Name() string { return "builtin" }

func (b builtin) Fetch(ctx context.Context, t Target, now time.Time) (Signals, error) {
	snap, err := b.snapshots.Get(ctx, now)
	if snap == nil {
		// Failed signals come out as Error observations: the count holds.
		return Signals{}, err
	}
	return Signals{
		Observations:    snap.Observe(*t.ModelServer.Spec.Autoscaling, t.Ready, t.Pools...),
		RequestsWaiting: snap.RequestsWaiting(t.Ready),
		RequestsRunning: snap.RequestsRunning(t.Ready),
		KVCacheUsage:    snap.KVCacheUsage(t.Ready),
	}, err
}

// unavailable answers an error for each of its metrics: what measures them is not configured.
type unavailable struct {
	names   []string
	message string
}

func (unavailable) Name() string { return "unavailable" }

func (u unavailable) Fetch(context.Context, Target, time.Time) (Signals, error) {
	var out Signals
	for _, n := range u.names {
		out.Observations = append(out.Observations, autoscale.Observation{Metric: n, Status: metrics.Error, Message: u.message})
	}
	return out, nil
}

// promQL is a custom prometheus metric: the total load of the ModelServer, rendered for both
// colors, with its trend when spec.autoscaling.projectionHorizon is set.
type promQL struct {
	name, query string
	prom        metrics.Querier
	policy      metrics.QueryPolicy
}

func (p promQL) Name() string { return p.name }

func (p promQL) Fetch(ctx context.Context, t Target, now time.Time) (Signals, error) {
	return one(p.total(ctx, t.ModelServer, now)), nil
}

// total is the query's value for ms, with its trend when spec.autoscaling.projectionHorizon is
// set.
func (p promQL) total(ctx context.Context, ms *v1alpha1.ModelServer, now time.Time) autoscale.Observation {
	return p.value(ctx, ms, now, trending(ms), false)
}

// trending: ms projects its total metrics along their trend (spec.autoscaling.projectionHorizon).
func trending(ms *v1alpha1.ModelServer) bool {
	return ms.Spec.Autoscaling != nil && ms.Spec.Autoscaling.ProjectionHorizon.Duration > 0
}

// value is the query's value over ms's pods, with its trend when trend is set and whether its
// window is still filling (FilledQuery) when filling is set.
func (p promQL) value(ctx context.Context, ms *v1alpha1.ModelServer, now time.Time, trend, filling bool) autoscale.Observation {
	q, err := metrics.Render(p.query, BothColors(ms))
	if err != nil {
		return autoscale.Observation{Metric: p.name, Status: metrics.Error, Message: err.Error()}
	}
	if p.prom == nil {
		return autoscale.Observation{Metric: p.name, Status: metrics.Error, Message: noPrometheus}
	}
	// The query is checked against the policy as it runs, not only its template.
	prom := metrics.Enforce(p.prom, p.policy, ms.Namespace)
	o := FromSample(p.name, prom.Scalar(ctx, q, now))
	if o.Status != metrics.OK {
		return o
	}
	win := autoscale.ServingWindowOf(ms)
	if trend {
		o = WithTrend(o, prom.Scalar(ctx, TrendQuery(q, win), now))
	}
	if filling {
		o = WithFilling(o, prom.Scalar(ctx, FilledQuery(q, win), now))
	}
	return o
}

// tokenWork is the token work of the ModelServer's pods over the serving window, for
// spec.autoscaling.slo (SGLang's token counters with the sglang analysis preset, else vLLM's),
// with its trend when spec.autoscaling.projectionHorizon is set.
type tokenWork struct {
	prom   metrics.Querier
	policy metrics.QueryPolicy
}

func (tokenWork) Name() string { return autoscale.MetricSLO }

func (w tokenWork) Fetch(ctx context.Context, t Target, now time.Time) (Signals, error) {
	tmpl, rate := metrics.VLLMTokenWork, metrics.VLLMRequestRate
	if t.ModelServer.Spec.Rollout.Analysis.Preset == v1alpha1.AnalysisPresetSGLang {
		tmpl, rate = metrics.SGLangTokenWork, metrics.SGLangRequestRate
	}
	p := promQL{name: autoscale.MetricSLO, query: tmpl, prom: w.prom, policy: w.policy}
	// The token work tells whether its window is full: the slo learns nothing from a rate
	// the traffic has not filled.
	out := Signals{Load: p.value(ctx, t.ModelServer, now, trending(t.ModelServer), true), Served: autoscale.Observation{Metric: autoscale.MetricSLO, Status: metrics.NoData, Message: "token work has no data"}}
	if out.Load.Status == metrics.OK {
		// The served rate only matters beside the token work (the fast path reads both).
		// Without a trend: the fast path reads its level only.
		p.query = rate
		out.Served = p.value(ctx, t.ModelServer, now, false, false)
	}
	return out, nil
}

// resourceMetric is a resource metric's average utilization over the Ready pods, from
// metrics.k8s.io.
type resourceMetric struct {
	name     string
	resource corev1.ResourceName
	apis     MetricsAPIs
}

func (r resourceMetric) Name() string { return r.name }

func (r resourceMetric) Fetch(ctx context.Context, t Target, _ time.Time) (Signals, error) {
	if r.apis == nil {
		return one(autoscale.Observation{Metric: r.name, Status: metrics.Error, Message: "the resource metrics API is not configured"}), nil
	}
	ms := t.ModelServer
	usage, err := r.apis.PodMetrics(ctx, ms.Namespace, labels.SelectorFromSet(ms.SelectorLabels()))
	if err != nil {
		return one(autoscale.Observation{Metric: r.name, Status: metrics.Error, Message: err.Error()}), nil
	}
	return one(ResourceObservation(r.name, r.resource, t.ReadyPods, usage)), nil
}

// externalMetric is an external metric's total, from external.metrics.k8s.io.
type externalMetric struct {
	name   string
	metric *v1alpha1.ExternalMetric
	apis   MetricsAPIs
	policy metrics.QueryPolicy
}

func (e externalMetric) Name() string { return e.name }

func (e externalMetric) Fetch(ctx context.Context, t Target, _ time.Time) (Signals, error) {
	if err := e.policy.CheckExternal(); err != nil {
		return one(autoscale.Observation{Metric: e.name, Status: metrics.Error, Message: err.Error()}), nil
	}
	if e.apis == nil {
		return one(autoscale.Observation{Metric: e.name, Status: metrics.Error, Message: "the external metrics API is not configured"}), nil
	}
	sel := labels.Everything()
	if e.metric.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(e.metric.Selector)
		if err != nil {
			return one(autoscale.Observation{Metric: e.name, Status: metrics.Error, Message: fmt.Sprintf("external metric selector: %v", err)}), nil
		}
		sel = s
	}
	list, err := e.apis.External(ctx, t.ModelServer.Namespace, e.metric.MetricName, sel)
	return one(ExternalObservation(e.name, list, err)), nil
}

// gatewayMetric is the request rate at the ModelServer's route over the last minute, counted by
// the gateway (metrics.GatewayRequestRate): a query the controller renders itself, reading the
// gateway's own scrape target (Deps.GatewayNamespace) and the route by name.
type gatewayMetric struct {
	name      string
	metric    *v1alpha1.GatewayRequestsMetric
	prom      metrics.Querier
	policy    metrics.QueryPolicy
	namespace string
}

func (g gatewayMetric) Name() string { return g.name }

func (g gatewayMetric) Fetch(ctx context.Context, t Target, now time.Time) (Signals, error) {
	if g.prom == nil {
		return one(autoscale.Observation{Metric: g.name, Status: metrics.Error, Message: noPrometheus}), nil
	}
	if g.namespace == "" {
		return one(autoscale.Observation{Metric: g.name, Status: metrics.Error, Message: "the controller runs without --gateway-metrics-namespace"}), nil
	}
	ms := t.ModelServer
	vars := BothColors(ms)
	vars.Route, vars.GatewayNamespace = metrics.TraefikName(t.Route), g.namespace
	q, err := metrics.Render(metrics.GatewayRequestRate(g.metric.Source), vars)
	if err != nil {
		return one(autoscale.Observation{Metric: g.name, Status: metrics.Error, Message: err.Error()}), nil
	}
	return one(FromSample(g.name, metrics.Enforce(g.prom, g.policy, ms.Namespace, q).Scalar(ctx, q, now))), nil
}

// latency is the p95 time to first token and inter-token latency of the ModelServer's pods over
// the serving window, each queried only when spec.autoscaling.slo or a learnCapacity metric
// sets its SLO (from SGLang's
// histograms with the sglang analysis preset, else vLLM's).
type latency struct {
	ttft, itl bool
	prom      metrics.Querier
	policy    metrics.QueryPolicy
}

func latencyOf(ms *v1alpha1.ModelServer) latency {
	var l latency
	if slo := ms.Spec.Autoscaling.SLO; slo != nil {
		l.ttft, l.itl = slo.TTFTP95 != nil, slo.ITLP95 != nil
	}
	for _, m := range ms.Spec.Autoscaling.Metrics {
		if m.Prometheus != nil && m.Prometheus.LearnCapacity != nil {
			l.ttft = l.ttft || m.Prometheus.LearnCapacity.TimeToFirstTokenP95 != nil
			l.itl = l.itl || m.Prometheus.LearnCapacity.InterTokenLatencyP95 != nil
		}
	}
	return l
}

func (latency) Name() string { return "latency" }

func (l latency) Fetch(ctx context.Context, t Target, now time.Time) (Signals, error) {
	ms := t.ModelServer
	qTTFT, qITL := metrics.VLLMTTFTP95, metrics.VLLMITLP95
	if ms.Spec.Rollout.Analysis.Preset == v1alpha1.AnalysisPresetSGLang {
		qTTFT, qITL = metrics.SGLangTTFTP95, metrics.SGLangITLP95
	}
	query := func(tmpl string) autoscale.Observation {
		q, err := metrics.Render(tmpl, BothColors(ms))
		if err != nil {
			return autoscale.Observation{Status: metrics.Error, Message: err.Error()}
		}
		return FromSample("", metrics.Enforce(l.prom, l.policy, ms.Namespace).Scalar(ctx, q, now))
	}
	var out Signals
	var wg sync.WaitGroup
	if l.ttft {
		wg.Go(func() { out.TTFTP95 = query(qTTFT) })
	}
	if l.itl {
		wg.Go(func() { out.ITLP95 = query(qITL) })
	}
	wg.Wait()
	return out, nil
}

func one(o autoscale.Observation) Signals { return Signals{Observations: []autoscale.Observation{o}} }

// BothColors are the template keys of a query about the whole ModelServer (both colors' pods
// and pools, over the autoscaler's serving window: its interval, at least four scrape
// intervals of spec.rollout.analysis.scrapeInterval, which the controller fills from its
// --prometheus-scrape-interval; see autoscale.ServingWindowOf).
func BothColors(ms *v1alpha1.ModelServer) metrics.Vars {
	return metrics.Vars{
		Namespace: ms.Namespace, Name: ms.Name, Pods: "(?:" + metrics.PodRegex(ms.DeploymentName(v1alpha1.Blue)) + "|" + metrics.PodRegex(ms.DeploymentName(v1alpha1.Green)) + ")",
		Pool:   "(?:" + regexp.QuoteMeta(ms.PoolName(v1alpha1.Blue)) + "|" + regexp.QuoteMeta(ms.PoolName(v1alpha1.Green)) + ")",
		Window: metrics.PromDuration(autoscale.ServingWindowOf(ms)),
	}
}
