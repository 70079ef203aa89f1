package signals

import (
	"maps"
	"math"
	"strings"
	"testing"

	"github.com/modelship/modelship/internal/autoscale"

	"github.com/modelship/modelship/internal/metrics"
)

func TestIndexByPod(t *testing.T) {
	cases := []struct {
		name   string
		series []metrics.Series
		want   map[autoscale.PodKey]float64
	}{
		{
			name: "reads namespace and pod of a directly scraped model server",
			series: []metrics.Series{
				{Labels: map[string]string{"namespace": "ml", "pod": "llama-blue-7d9c-abcde"}, Value: 3},
				{Labels: map[string]string{"namespace": "ml", "pod": "llama-blue-7d9c-fghij"}, Value: 0},
			},
			want: map[autoscale.PodKey]float64{
				{Namespace: "ml", Name: "llama-blue-7d9c-abcde"}: 3,
				{Namespace: "ml", Name: "llama-blue-7d9c-fghij"}: 0,
			},
		},
		{
			name: "prefers the exporter's renamed labels over the scrape target's",
			series: []metrics.Series{{Labels: map[string]string{
				"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x7k2p",
				"exported_namespace": "ml", "exported_pod": "llama-blue-7d9c-abcde",
			}, Value: 91}},
			want: map[autoscale.PodKey]float64{{Namespace: "ml", Name: "llama-blue-7d9c-abcde"}: 91},
		},
		{
			name: "reads the exporter's labels kept as namespace and pod with honor_labels",
			series: []metrics.Series{{Labels: map[string]string{
				"namespace": "ml", "pod": "llama-blue-7d9c-abcde", "container": "vllm", "gpu": "0",
			}, Value: 55}},
			want: map[autoscale.PodKey]float64{{Namespace: "ml", Name: "llama-blue-7d9c-abcde"}: 55},
		},
		{
			name: "averages the GPUs of one pod",
			series: []metrics.Series{
				{Labels: map[string]string{"namespace": "gpu-operator", "exported_namespace": "ml", "exported_pod": "p", "gpu": "0"}, Value: 90},
				{Labels: map[string]string{"namespace": "gpu-operator", "exported_namespace": "ml", "exported_pod": "p", "gpu": "1"}, Value: 70},
				{Labels: map[string]string{"namespace": "gpu-operator", "exported_namespace": "ml", "exported_pod": "q", "gpu": "2"}, Value: 10},
			},
			want: map[autoscale.PodKey]float64{{Namespace: "ml", Name: "p"}: 80, {Namespace: "ml", Name: "q"}: 10},
		},
		{
			name: "keeps pods of the same name in different namespaces apart",
			series: []metrics.Series{
				{Labels: map[string]string{"namespace": "a", "pod": "p"}, Value: 1},
				{Labels: map[string]string{"namespace": "b", "pod": "p"}, Value: 2},
			},
			want: map[autoscale.PodKey]float64{{Namespace: "a", Name: "p"}: 1, {Namespace: "b", Name: "p"}: 2},
		},
		{
			name: "falls back to the target's namespace when only the pod label was renamed",
			series: []metrics.Series{
				{Labels: map[string]string{"namespace": "gpu-operator", "pod": "exporter", "exported_pod": "p"}, Value: 4},
			},
			want: map[autoscale.PodKey]float64{{Namespace: "gpu-operator", Name: "p"}: 4},
		},
		{
			name: "files a series of another target under that target, whatever exported_* it wrote",
			series: []metrics.Series{
				{Labels: map[string]string{"namespace": "a", "pod": "a-llama-0", "exported_namespace": "b", "exported_pod": "b-llama-0"}, Value: 0},
				{Labels: map[string]string{"namespace": "gpu-operator", "pod": "dcgm", "exported_namespace": "b", "exported_pod": "b-llama-0"}, Value: 90},
			},
			want: map[autoscale.PodKey]float64{{Namespace: "a", Name: "a-llama-0"}: 0, {Namespace: "b", Name: "b-llama-0"}: 90},
		},
		{
			name: "reads the workload's namespace from exported_namespace when only the namespace label was renamed",
			series: []metrics.Series{
				{Labels: map[string]string{"namespace": "gpu-operator", "exported_namespace": "ml", "pod": "llama-blue-7d9c-abcde", "gpu": "0"}, Value: 60},
			},
			want: map[autoscale.PodKey]float64{{Namespace: "ml", Name: "llama-blue-7d9c-abcde"}: 60},
		},
		{
			name: "skips series that name no pod, and an empty exported_pod falls back to pod",
			series: []metrics.Series{
				{Labels: map[string]string{"namespace": "ml"}, Value: 1},
				{Labels: map[string]string{}, Value: 1},
				{Labels: map[string]string{"namespace": "gpu-operator", "pod": "exporter", "exported_pod": ""}, Value: 0},
			},
			want: map[autoscale.PodKey]float64{{Namespace: "gpu-operator", Name: "exporter"}: 0},
		},
		{
			name: "skips NaN and infinite values rather than averaging them in",
			series: []metrics.Series{
				{Labels: map[string]string{"namespace": "ml", "pod": "p"}, Value: math.NaN()},
				{Labels: map[string]string{"namespace": "ml", "pod": "p"}, Value: 40},
				{Labels: map[string]string{"namespace": "ml", "pod": "q"}, Value: math.Inf(1)},
			},
			want: map[autoscale.PodKey]float64{{Namespace: "ml", Name: "p"}: 40},
		},
		{
			name:   "no series is no pod, not pods at zero",
			series: nil,
			want:   map[autoscale.PodKey]float64{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := index(tc.series, DefaultGPUExporter.podOf)
			if !maps.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOnlyTheGPUExportersSeriesNameAWorkloadInExportedLabels(t *testing.T) {
	forged := map[string]string{"job": "monitoring/modelship-model-servers", "namespace": "a", "pod": "a-llama-0", "exported_namespace": "b", "exported_pod": "b-llama-0"}
	exporter := map[string]string{"job": "nvidia-dcgm-exporter", "namespace": "gpu-operator", "pod": "dcgm-x", "exported_namespace": "b", "exported_pod": "b-llama-0"}
	elsewhere := map[string]string{"job": "dcgm-exporter", "namespace": "monitoring", "pod": "dcgm-y", "exported_namespace": "b", "exported_pod": "b-llama-0"}
	cases := []struct {
		name     string
		exporter GPUExporter
		labels   map[string]string
		want     autoscale.PodKey
	}{
		{"the GPU Operator's exporter names the workload", DefaultGPUExporter, exporter, pod("b", "b-llama-0")},
		{"a tenant's pod is its own target, whatever it wrote", DefaultGPUExporter, forged, pod("a", "a-llama-0")},
		{"an exporter in another namespace is not trusted by default", DefaultGPUExporter, elsewhere, pod("monitoring", "dcgm-y")},
		{"an exporter named by its job", GPUExporter{Job: "dcgm-exporter"}, elsewhere, pod("b", "b-llama-0")},
		{"the job and the namespace must both match when both are set", GPUExporter{Namespace: "gpu-operator", Job: "dcgm-exporter"}, exporter, pod("gpu-operator", "dcgm-x")},
		{"no exporter configured trusts no exported_* label", GPUExporter{}, exporter, pod("gpu-operator", "dcgm-x")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.exporter.podOf(tc.labels); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if got := targetPod(forged); got != pod("a", "a-llama-0") {
		t.Errorf("a serving signal's series files under %v, want its target a/a-llama-0", got)
	}
}

func TestSignalQueries(t *testing.T) {
	podLabels := " by (namespace, pod) "
	cases := []struct {
		name    string
		query   string
		metrics []string
		by      string
	}{
		{"GPU utilization reads DCGM", QueryGPUUtilization, []string{"DCGM_FI_DEV_GPU_UTIL"}, " by (job, namespace, pod, exported_namespace, exported_pod) "},
		{"requests waiting reads vLLM and SGLang", QueryRequestsWaiting, []string{"vllm:num_requests_waiting", "sglang:num_queue_reqs"}, podLabels},
		{"KV-cache usage reads both vLLM names and SGLang", QueryKVCacheUsage, []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"}, podLabels},
		{"pool queue size reads the inference extension's and llm-d's names", QueryPoolQueueSize, []string{"inference_pool_average_queue_size", "llm_d_epp_average_queue_size"}, " by (namespace, name) "},
		{"pool saturation reads the flow controller's names", QueryPoolSaturation, []string{"inference_extension_flow_control_pool_saturation", "llm_d_epp_flow_control_pool_saturation"}, " by (namespace, inference_pool, name) "},
		{"running requests read InferenceObjective's, InferenceModel's and llm-d's names", QueryObjectiveRunning, []string{"inference_objective_running_requests", "inference_model_running_requests", "llm_d_epp_request_running"}, " by (namespace, model_name) "},
	}
	for _, tc := range cases {
		t.Run(tc.name+", grouped for every ModelServer at once", func(t *testing.T) {
			for _, m := range tc.metrics {
				if !strings.Contains(tc.query, "("+m+")") {
					t.Errorf("query lacks %s: %s", m, tc.query)
				}
			}
			if strings.Contains(tc.query, "{") {
				t.Errorf("query filters series, want one query for every ModelServer: %s", tc.query)
			}
			if n := strings.Count(tc.query, tc.by); n != len(tc.metrics) {
				t.Errorf("%d of %d metrics grouped%s: %s", n, len(tc.metrics), tc.by, tc.query)
			}
			if strings.Count(tc.query, "(") != strings.Count(tc.query, ")") {
				t.Errorf("unbalanced: %s", tc.query)
			}
		})
	}
}
