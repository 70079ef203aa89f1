package metrics

import (
	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// podSelector selects one color's pods; every preset query uses it. It assumes the usual
// scrape configuration (a PodMonitor or ServiceMonitor) that labels each series with the
// scraped pod's namespace and pod.
const podSelector = `namespace="{{.Namespace}}",pod=~"{{.Pods}}"`

// The vLLM preset (v1alpha1.AnalysisPresetVLLM), from the metrics vLLM serves on /metrics.
// Latencies are p95s over the window from vLLM's histograms; a color that served no request in
// the window has all-zero bucket rates, for which histogram_quantile returns NaN: NoData, never 0.
const (
	// VLLMTTFTP95 is the p95 time to first token, in seconds.
	VLLMTTFTP95 = `histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{` + podSelector + `}[{{.Window}}])))`

	// VLLMITLP95 is the p95 inter-token latency, in seconds. vLLM renamed
	// vllm:time_per_output_token_seconds to vllm:inter_token_latency_seconds; the query reads the
	// new name and, for pods that serve only the old one, the old name (`or` keeps the left side
	// where both exist: rate drops the metric name, so their label sets are equal).
	VLLMITLP95 = `histogram_quantile(0.95, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket{` + podSelector + `}[{{.Window}}]) or rate(vllm:time_per_output_token_seconds_bucket{` + podSelector + `}[{{.Window}}])))`

	// VLLME2EP95 is the p95 end-to-end request latency, in seconds.
	VLLME2EP95 = `histogram_quantile(0.95, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket{` + podSelector + `}[{{.Window}}])))`

	// VLLMTTFTBuckets is the time-to-first-token histogram's bucket counts over the window, the
	// source of ttft-p95's statistical judgement (v1alpha1.AnalysisHistogram).
	VLLMTTFTBuckets = `sum by (le) (increase(vllm:time_to_first_token_seconds_bucket{` + podSelector + `}[{{.Window}}]))`

	// VLLMITLBuckets is the inter-token latency histogram's bucket counts over the window (new
	// name, or the old one for pods that serve only it, as VLLMITLP95).
	VLLMITLBuckets = `sum by (le) (increase(vllm:inter_token_latency_seconds_bucket{` + podSelector + `}[{{.Window}}]) or increase(vllm:time_per_output_token_seconds_bucket{` + podSelector + `}[{{.Window}}]))`

	// VLLME2EBuckets is the end-to-end latency histogram's bucket counts over the window.
	VLLME2EBuckets = `sum by (le) (increase(vllm:e2e_request_latency_seconds_bucket{` + podSelector + `}[{{.Window}}]))`

	// VLLMErrorRatio is the share of finished requests that vLLM aborted
	// (finished_reason="abort": engine errors and clients that gave up), 0..1. The numerator
	// falls back to 0 (`or vector(0)`) so that no abort is 0, but no finished request at all
	// (absent or zero denominator) is NoData. Requests rejected before reaching the engine (a 4xx
	// from the OpenAI server) are not counted by vLLM.
	VLLMErrorRatio = `(sum(increase(vllm:request_success_total{` + podSelector + `,finished_reason="abort"}[{{.Window}}])) or vector(0)) / sum(increase(vllm:request_success_total{` + podSelector + `}[{{.Window}}]))`

	// VLLMSampleQuery counts the requests a color finished over the window; a measurement with
	// fewer than spec.rollout.analysis.minSamples is inconclusive.
	VLLMSampleQuery = `sum(increase(vllm:request_success_total{` + podSelector + `}[{{.Window}}]))`
)

// Names of the vLLM preset's metrics, as they appear in status.analysis.
const (
	MetricTTFTP95    = "ttft-p95"
	MetricITLP95     = "itl-p95"
	MetricE2EP95     = "e2e-p95"
	MetricErrorRatio = "error-ratio"
)

// The vLLM preset's bounds: each latency p95 at most 1.2x the stable color's, the error ratio
// at most 5%.
const (
	vllmLatencyRatioMilli  = 1200
	vllmMaxErrorRatioMilli = 50
)

// LatencyP95 is a preset's latency metric read from a Prometheus histogram: query is its scalar
// p95 (histogram_quantile, for people and dashboards), buckets the bucket counts over the window
// (`sum by (le) (increase(x_bucket{...}[{{.Window}}]))`) it is judged from, and maxRatio its bound
// relative to the stable color, judged with analysis' sample-size-aware test.
func LatencyP95(name, query, buckets string, maxRatio *resource.Quantity) v1alpha1.AnalysisMetric {
	return v1alpha1.AnalysisMetric{
		Name:             name,
		Query:            query,
		MaxRatioToStable: maxRatio,
		Histogram:        &v1alpha1.AnalysisHistogram{BucketQuery: buckets, Percentile: 95},
	}
}

// Preset returns the metrics and the sample query of a preset, freshly allocated (the caller
// may change them). The empty name is the API's default, vllm. AnalysisPresetNone and unknown
// names have neither metrics nor a sample query.
//
// vllm: ttft-p95, itl-p95 and e2e-p95 each at most 1.2x stable (maxRatioToStable), and
// error-ratio at most 0.05 (max); the sample query is VLLMSampleQuery.
func Preset(name v1alpha1.AnalysisPreset) (metrics []v1alpha1.AnalysisMetric, sampleQuery string) {
	switch name {
	case v1alpha1.AnalysisPresetVLLM, "":
		ratio := func() *resource.Quantity {
			return resource.NewMilliQuantity(vllmLatencyRatioMilli, resource.DecimalSI)
		}
		maxErr := resource.NewMilliQuantity(vllmMaxErrorRatioMilli, resource.DecimalSI)
		return []v1alpha1.AnalysisMetric{
			LatencyP95(MetricTTFTP95, VLLMTTFTP95, VLLMTTFTBuckets, ratio()),
			LatencyP95(MetricITLP95, VLLMITLP95, VLLMITLBuckets, ratio()),
			LatencyP95(MetricE2EP95, VLLME2EP95, VLLME2EBuckets, ratio()),
			{Name: MetricErrorRatio, Query: VLLMErrorRatio, Max: maxErr},
		}, VLLMSampleQuery
	default:
		return nil, ""
	}
}

// EffectiveMetrics merges a spec's preset with its metrics: a metric of spec.Metrics replaces
// the preset's metric of the same name (in the preset's place), the others follow in the
// spec's order. The spec's SampleQuery, when set, replaces the preset's. An empty sample query
// (preset none and no spec.sampleQuery) means there is nothing to count samples with.
func EffectiveMetrics(spec v1alpha1.AnalysisSpec) ([]v1alpha1.AnalysisMetric, string) {
	metrics, sampleQuery := Preset(spec.Preset)
	if spec.SampleQuery != "" {
		sampleQuery = spec.SampleQuery
	}
	index := make(map[string]int, len(metrics))
	for i, m := range metrics {
		index[m.Name] = i
	}
	for _, m := range spec.Metrics {
		m = *m.DeepCopy()
		if i, ok := index[m.Name]; ok {
			metrics[i] = m
			continue
		}
		index[m.Name] = len(metrics)
		metrics = append(metrics, m)
	}
	return metrics, sampleQuery
}
