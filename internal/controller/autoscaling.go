package controller

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	externalv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/capacity"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/rollout"
)

// MetricsAPIs reads the Kubernetes metrics APIs for resource and external autoscaling metrics
// (metrics-server, prometheus-adapter, KEDA's metrics server).
type MetricsAPIs interface {
	// PodMetrics lists metrics.k8s.io usage of the pods matching selector.
	PodMetrics(ctx context.Context, namespace string, selector labels.Selector) ([]metricsv1beta1.PodMetrics, error)
	// External lists one external metric's values.
	External(ctx context.Context, namespace, metric string, selector labels.Selector) (*externalv1beta1.ExternalMetricValueList, error)
}

// autoscale decides the total replica count of an autoscaled ModelServer: it observes the
// signals (one grouped query per signal per interval for all ModelServers), the GPU capacity
// and quota, and asks the pure autoscale.Decide. obs is the rollout observation of this pass,
// used to count the pods a total needs across both colors.
func (r *ModelServerReconciler) autoscale(ctx context.Context, ms *v1alpha1.ModelServer, obs rollout.Observation, now time.Time) (*autoscale.Output, error) {
	spec := *ms.Spec.Autoscaling
	var pods corev1.PodList
	if err := r.List(ctx, &pods, r.podsOf(ms, client.MatchingLabels(ms.SelectorLabels()))...); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	var readyKeys []autoscale.PodKey
	var readyPods []corev1.Pod
	var starting int32
	readyOf := map[string]int32{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if podReady(p) {
			readyKeys = append(readyKeys, autoscale.PodKey{Namespace: p.Namespace, Name: p.Name})
			readyPods = append(readyPods, *p)
			readyOf[p.Labels[v1alpha1.LabelColor]]++
		} else {
			starting++
		}
	}
	// The endpoint picker reports per InferencePool; each color's pool weighs by its Ready pods.
	var pools []autoscale.Pool
	if ms.UsesInferencePools() {
		for _, c := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
			pools = append(pools, autoscale.Pool{Key: autoscale.PodKey{Namespace: ms.Namespace, Name: ms.PoolName(c)}, Ready: readyOf[string(c)]})
		}
	}

	var observations []autoscale.Observation
	waiting := autoscale.Observation{Metric: autoscale.MetricRequestsWaiting, Status: metrics.NoData, Message: "no signals"}
	if r.Signals != nil {
		snap, err := r.Signals.Get(ctx, now)
		if err != nil {
			// Failed signals come out as Error observations: the count holds.
			ctrl.LoggerFrom(ctx).V(1).Info("Autoscaling signals unavailable", "error", err.Error())
		}
		if snap != nil {
			observations = snap.Observe(spec, readyKeys, pools...)
			waiting = snap.RequestsWaiting(readyKeys)
		}
	}
	names := autoscale.MetricNames(spec.Metrics)
	for i, m := range spec.Metrics {
		switch {
		case m.Prometheus != nil:
			observations = append(observations, r.customMetric(ctx, ms, names[i], m.Prometheus.Query, now))
		case m.Resource != nil:
			observations = append(observations, r.resourceMetric(ctx, ms, names[i], m.Resource.Name, readyPods))
		case m.External != nil:
			observations = append(observations, r.externalMetric(ctx, ms, names[i], m.External))
		case m.Gateway != nil:
			observations = append(observations, r.gatewayMetric(ctx, ms, names[i], m.Gateway, now))
		}
	}
	if r.Signals == nil {
		for _, n := range names {
			if !hasObservation(observations, n) {
				observations = append(observations, autoscale.Observation{Metric: n, Status: metrics.Error, Message: "no Prometheus configured (--prometheus-url)"})
			}
		}
	}

	ttft, itl := r.latencySLOs(ctx, ms, now)
	load := autoscale.Observation{Metric: autoscale.MetricSLO, Status: metrics.NoData, Message: "no slo"}
	if spec.SLO != nil {
		load = r.tokenWork(ctx, ms, now)
	}

	var revision string
	if ms.Status.Stable != nil {
		revision = ms.Status.Stable.Revision
	}

	current := desiredReplicas(ms)
	need := podsFor(ms, obs, now)
	fit, err := r.capacity(ctx, ms, pods.Items, need(current), need(max(spec.MaxReplicas, current))-need(current))
	if err != nil {
		return nil, err
	}
	out := autoscale.Decide(autoscale.Input{
		Spec: spec, Current: current, Ready: int32(len(readyKeys)), Starting: starting,
		Observations: observations, RequestsWaiting: waiting, TTFTP95: ttft, ITLP95: itl, Load: load, ServingWindow: servingWindow(ms), Revision: revision, BothColorsReady: len(readyOf) > 1, Previous: ms.Status.Autoscaling, Capacity: fit, PodsFor: need,
	}, now)
	return &out, nil
}

// podsFor returns how many pods both colors run for a total replica count: the replicas of
// the rollout's plans for that total. Outside a rollout it is the total; during one the
// candidate is sized for its next weight on top of the stable color's total, and after a
// promotion the previous color is kept warm. rollout.Next is pure, so asking it costs no I/O.
func podsFor(ms *v1alpha1.ModelServer, obs rollout.Observation, now time.Time) func(int32) int32 {
	memo := map[int32]int32{}
	return func(total int32) int32 {
		if n, ok := memo[total]; ok {
			return n
		}
		o := obs
		o.DesiredReplicas = total
		var n int32
		for _, p := range rollout.Next(ms, o, now).Plans {
			n += p.Replicas
		}
		memo[total] = n
		return n
	}
}

func hasObservation(obs []autoscale.Observation, name string) bool {
	for _, o := range obs {
		if o.Metric == name {
			return true
		}
	}
	return false
}

// bothColors are the template keys of a query about the whole ModelServer (both colors' pods
// and pools, over the autoscaler's serving window: its interval, at least four scrape
// intervals of spec.rollout.analysis.scrapeInterval, which defaultSpec fills from the
// controller's --prometheus-scrape-interval).
func bothColors(ms *v1alpha1.ModelServer) metrics.Vars {
	return metrics.Vars{
		Namespace: ms.Namespace, Name: ms.Name, Pods: "(?:" + metrics.PodRegex(ms.DeploymentName(v1alpha1.Blue)) + "|" + metrics.PodRegex(ms.DeploymentName(v1alpha1.Green)) + ")",
		Pool:   "(?:" + regexp.QuoteMeta(ms.PoolName(v1alpha1.Blue)) + "|" + regexp.QuoteMeta(ms.PoolName(v1alpha1.Green)) + ")",
		Window: metrics.PromDuration(servingWindow(ms)),
	}
}

// servingWindow is the window of the autoscaler's ModelServer-wide queries: its interval, at
// least four of spec.rollout.analysis.scrapeInterval (autoscale.ServingWindow).
func servingWindow(ms *v1alpha1.ModelServer) time.Duration {
	var interval, scrape time.Duration
	if a := ms.Spec.Autoscaling; a != nil {
		interval = a.Interval.Duration
	}
	if interval <= 0 {
		interval = autoscale.DefaultInterval
	}
	if si := ms.Spec.Rollout.Analysis.ScrapeInterval; si != nil {
		scrape = si.Duration
	}
	return autoscale.ServingWindow(interval, scrape)
}

// tokenWork is the token work of the ModelServer's pods over the serving window, for
// spec.autoscaling.slo (SGLang's token counters with the sglang analysis preset, else vLLM's),
// with its trend when spec.autoscaling.projectionHorizon is set.
func (r *ModelServerReconciler) tokenWork(ctx context.Context, ms *v1alpha1.ModelServer, now time.Time) autoscale.Observation {
	tmpl := metrics.VLLMTokenWork
	if ms.Spec.Rollout.Analysis.Preset == v1alpha1.AnalysisPresetSGLang {
		tmpl = metrics.SGLangTokenWork
	}
	return r.customMetric(ctx, ms, autoscale.MetricSLO, tmpl, now)
}

// latencySLOs returns the p95 time to first token and inter-token latency of the ModelServer's
// pods over the serving window (see bothColors), each queried only when spec.autoscaling.slo or
// a learnCapacity metric sets its SLO (from
// SGLang's histograms with the sglang analysis preset, else vLLM's).
func (r *ModelServerReconciler) latencySLOs(ctx context.Context, ms *v1alpha1.ModelServer, now time.Time) (ttft, itl autoscale.Observation) {
	ttft = autoscale.Observation{Status: metrics.NoData, Message: "no latency SLO"}
	itl = ttft
	if r.Prometheus == nil {
		return ttft, itl
	}
	var wantTTFT, wantITL bool
	if slo := ms.Spec.Autoscaling.SLO; slo != nil {
		wantTTFT, wantITL = slo.TTFTP95 != nil, slo.ITLP95 != nil
	}
	for _, m := range ms.Spec.Autoscaling.Metrics {
		if m.Prometheus != nil && m.Prometheus.LearnCapacity != nil {
			wantTTFT = wantTTFT || m.Prometheus.LearnCapacity.TimeToFirstTokenP95 != nil
			wantITL = wantITL || m.Prometheus.LearnCapacity.InterTokenLatencyP95 != nil
		}
	}
	qTTFT, qITL := metrics.VLLMTTFTP95, metrics.VLLMITLP95
	if ms.Spec.Rollout.Analysis.Preset == v1alpha1.AnalysisPresetSGLang {
		qTTFT, qITL = metrics.SGLangTTFTP95, metrics.SGLangITLP95
	}
	query := func(tmpl string) autoscale.Observation {
		q, err := metrics.Render(tmpl, bothColors(ms))
		if err != nil {
			return autoscale.Observation{Status: metrics.Error, Message: err.Error()}
		}
		return autoscale.FromSample("", metrics.Enforce(r.Prometheus, r.QueryPolicy, ms.Namespace).Scalar(ctx, q, now))
	}
	var wg sync.WaitGroup
	if wantTTFT {
		wg.Go(func() { ttft = query(qTTFT) })
	}
	if wantITL {
		wg.Go(func() { itl = query(qITL) })
	}
	wg.Wait()
	return ttft, itl
}

func (r *ModelServerReconciler) customMetric(ctx context.Context, ms *v1alpha1.ModelServer, name, tmpl string, now time.Time) autoscale.Observation {
	q, err := metrics.Render(tmpl, bothColors(ms))
	if err != nil {
		return autoscale.Observation{Metric: name, Status: metrics.Error, Message: err.Error()}
	}
	if r.Prometheus == nil {
		return autoscale.Observation{Metric: name, Status: metrics.Error, Message: "no Prometheus configured (--prometheus-url)"}
	}
	// The query is checked against the policy as it runs, not only its template.
	prom := metrics.Enforce(r.Prometheus, r.QueryPolicy, ms.Namespace)
	o := autoscale.FromSample(name, prom.Scalar(ctx, q, now))
	if ms.Spec.Autoscaling != nil && ms.Spec.Autoscaling.ProjectionHorizon.Duration > 0 && o.Status == metrics.OK {
		o = autoscale.WithTrend(o, prom.Scalar(ctx, autoscale.TrendQuery(q), now))
	}
	return o
}

// gatewayMetric is the request rate at the ModelServer's route over the last minute, counted
// by the gateway (metrics.GatewayRequestRate): a query the controller renders itself, reading
// the gateway's own scrape target (--gateway-metrics-namespace) and the route by name.
func (r *ModelServerReconciler) gatewayMetric(ctx context.Context, ms *v1alpha1.ModelServer, name string, m *v1alpha1.GatewayRequestsMetric, now time.Time) autoscale.Observation {
	if r.Prometheus == nil {
		return autoscale.Observation{Metric: name, Status: metrics.Error, Message: "no Prometheus configured (--prometheus-url)"}
	}
	if r.GatewayMetricsNamespace == "" {
		return autoscale.Observation{Metric: name, Status: metrics.Error, Message: "the controller runs without --gateway-metrics-namespace"}
	}
	vars := bothColors(ms)
	vars.Route, vars.GatewayNamespace = metrics.TraefikName(routeTarget(ms).Name), r.GatewayMetricsNamespace
	q, err := metrics.Render(metrics.GatewayRequestRate(m.Source), vars)
	if err != nil {
		return autoscale.Observation{Metric: name, Status: metrics.Error, Message: err.Error()}
	}
	return autoscale.FromSample(name, metrics.Enforce(r.Prometheus, r.QueryPolicy, ms.Namespace, q).Scalar(ctx, q, now))
}

func (r *ModelServerReconciler) resourceMetric(ctx context.Context, ms *v1alpha1.ModelServer, name string, res corev1.ResourceName, ready []corev1.Pod) autoscale.Observation {
	if r.MetricsAPIs == nil {
		return autoscale.Observation{Metric: name, Status: metrics.Error, Message: "the resource metrics API is not configured"}
	}
	usage, err := r.MetricsAPIs.PodMetrics(ctx, ms.Namespace, labels.SelectorFromSet(ms.SelectorLabels()))
	if err != nil {
		return autoscale.Observation{Metric: name, Status: metrics.Error, Message: err.Error()}
	}
	return autoscale.ResourceObservation(name, res, ready, usage)
}

func (r *ModelServerReconciler) externalMetric(ctx context.Context, ms *v1alpha1.ModelServer, name string, m *v1alpha1.ExternalMetric) autoscale.Observation {
	if err := r.QueryPolicy.CheckExternal(); err != nil {
		return autoscale.Observation{Metric: name, Status: metrics.Error, Message: err.Error()}
	}
	if r.MetricsAPIs == nil {
		return autoscale.Observation{Metric: name, Status: metrics.Error, Message: "the external metrics API is not configured"}
	}
	sel := labels.Everything()
	if m.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(m.Selector)
		if err != nil {
			return autoscale.Observation{Metric: name, Status: metrics.Error, Message: fmt.Sprintf("external metric selector: %v", err)}
		}
		sel = s
	}
	list, err := r.MetricsAPIs.External(ctx, ms.Namespace, m.MetricName, sel)
	return autoscale.ExternalObservation(name, list, err)
}

// capacity says how many more pods fit the GPUs of matching nodes and the namespace quota,
// beyond the pods both colors run now (current) and wanting want more. own are the
// ModelServer's pods; the nodes and the GPUs all pods hold come from the shared clusterView.
func (r *ModelServerReconciler) capacity(ctx context.Context, ms *v1alpha1.ModelServer, own []corev1.Pod, current, want int32) (*capacity.FitResult, error) {
	if capacity.PodGPUs(&ms.Spec.Template.Spec) == 0 || want <= 0 {
		return nil, nil
	}
	cluster, err := r.cluster.get(ctx, r.Client, r.Now())
	if err != nil {
		return nil, err
	}
	var quotas corev1.ResourceQuotaList
	if err := r.List(ctx, &quotas, client.InNamespace(ms.Namespace)); err != nil {
		return nil, fmt.Errorf("listing resource quotas: %w", err)
	}
	fit := capacity.FitCluster(cluster, capacity.FitInput{
		Template: ms.Spec.Template, Namespace: ms.Namespace, ModelServer: ms.Name, Replicas: current,
		Pods: own, Quotas: quotas.Items, Want: want,
	})
	if fit.Limited && fit.Reason == v1alpha1.ReasonGPUCapacityLimited && fit.MatchingNodes == 0 {
		// No node matches the template at all: nodes come on demand here (cluster-autoscaler,
		// Karpenter), so free GPUs are unknown rather than zero and nothing is clamped. (A GPU
		// quota is then enforced by the API server when the pods are created.)
		return nil, nil
	}
	return &fit, nil
}

// scaledObjectGVK is KEDA's ScaledObject.
var scaledObjectGVK = schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}

// conflictingAutoscalers names HPAs and KEDA ScaledObjects that target the ModelServer's
// Deployments (or the ModelServer itself), which would fight modelship over replicas.
func (r *ModelServerReconciler) conflictingAutoscalers(ctx context.Context, ms *v1alpha1.ModelServer) ([]string, error) {
	targets := map[string]bool{"Deployment/" + ms.DeploymentName(v1alpha1.Blue): true, "Deployment/" + ms.DeploymentName(v1alpha1.Green): true, "ModelServer/" + ms.Name: true}
	var found []string
	var hpas autoscalingv2.HorizontalPodAutoscalerList
	if err := r.List(ctx, &hpas, client.InNamespace(ms.Namespace)); err != nil {
		return nil, fmt.Errorf("listing HorizontalPodAutoscalers: %w", err)
	}
	for _, h := range hpas.Items {
		if targets[h.Spec.ScaleTargetRef.Kind+"/"+h.Spec.ScaleTargetRef.Name] {
			found = append(found, "HorizontalPodAutoscaler/"+h.Name)
		}
	}
	if !r.scaledObjects {
		// KEDA is not installed (checked once at start): no ScaledObject can fight us.
		return found, nil
	}
	scaled := &unstructured.UnstructuredList{}
	scaled.SetGroupVersionKind(scaledObjectGVK.GroupVersion().WithKind("ScaledObjectList"))
	if err := r.cacheReader.List(ctx, scaled, client.InNamespace(ms.Namespace)); err == nil {
		for _, s := range scaled.Items {
			kind, _, _ := unstructured.NestedString(s.Object, "spec", "scaleTargetRef", "kind")
			name, _, _ := unstructured.NestedString(s.Object, "spec", "scaleTargetRef", "name")
			if kind == "" {
				kind = "Deployment"
			}
			if targets[kind+"/"+name] {
				found = append(found, "ScaledObject/"+s.GetName())
			}
		}
	} else if !meta.IsNoMatchError(err) && !strings.Contains(err.Error(), "no matches for kind") {
		return nil, fmt.Errorf("listing KEDA ScaledObjects: %w", err)
	}
	return found, nil
}
