package metrics

import "math"

// Autoscaling signal queries. Each is one query for every ModelServer of the cluster (not one
// per object): it returns one series per pod, grouped by the labels that name the pod, and the
// autoscaler picks its pods' values out of PodValues' map. The grouping keeps both label
// variants (namespace/pod and exported_namespace/exported_pod, see PodValues); a label that a
// series lacks is simply empty in its group.
//
// The serving signals read vLLM's metric and, with `or`, SGLang's equivalent, so a pod running
// either server is measured (a pod serves one of them; `or` keeps the left side if both exist).
const (
	// QueryGPUUtilization is each pod's average GPU utilization in percent, 0..100, over its
	// GPUs, from NVIDIA's DCGM exporter (DCGM_FI_DEV_GPU_UTIL; the exporter must map GPUs to
	// pods, its default in the GPU Operator). A GPU no pod holds is attributed to the
	// exporter's own pod and never matches a ModelServer's pods.
	QueryGPUUtilization = `avg by (namespace, pod, exported_namespace, exported_pod) (DCGM_FI_DEV_GPU_UTIL)`

	// QueryRequestsWaiting is each pod's number of queued requests: vLLM's
	// vllm:num_requests_waiting, or SGLang's sglang:num_queue_reqs. Summed over a pod's engines
	// (data-parallel vLLM exposes one series per engine).
	QueryRequestsWaiting = `sum by (namespace, pod, exported_namespace, exported_pod) (vllm:num_requests_waiting) or sum by (namespace, pod, exported_namespace, exported_pod) (sglang:num_queue_reqs)`

	// QueryRequestsRunning is each pod's number of requests being generated: vLLM's
	// vllm:num_requests_running, or SGLang's sglang:num_running_reqs.
	QueryRequestsRunning = `sum by (namespace, pod, exported_namespace, exported_pod) (vllm:num_requests_running) or sum by (namespace, pod, exported_namespace, exported_pod) (sglang:num_running_reqs)`

	// QueryKVCacheUsage is each pod's KV-cache use, 0..1: vLLM's vllm:kv_cache_usage_perc
	// (despite its name a fraction), its older name vllm:gpu_cache_usage_perc (vLLM before
	// 0.10), or SGLang's sglang:token_usage. Averaged over a pod's engines.
	QueryKVCacheUsage = `avg by (namespace, pod, exported_namespace, exported_pod) (vllm:kv_cache_usage_perc) or avg by (namespace, pod, exported_namespace, exported_pod) (vllm:gpu_cache_usage_perc) or avg by (namespace, pod, exported_namespace, exported_pod) (sglang:token_usage)`
)

// Labels that name the pod a series describes.
const (
	LabelNamespace         = "namespace"
	LabelPod               = "pod"
	LabelExportedNamespace = "exported_namespace"
	LabelExportedPod       = "exported_pod"
)

// PodKey names a pod.
type PodKey struct {
	Namespace string
	Pod       string
}

// PodValues reads the pod each series describes and averages the values of each pod (several
// series per pod, e.g. one per GPU). The pod is exported_pod when a series has it (the
// exporter's own pod label, renamed by Prometheus because it collides with the scrape target's
// when honor_labels is false, as for the DCGM exporter), else pod; likewise and independently
// exported_namespace, else namespace. Series naming no pod and NaN or ±Inf values are skipped.
// A pod absent from the map has no data: it must not be read as zero.
func PodValues(series []Series) map[PodKey]float64 {
	type acc struct {
		sum float64
		n   int
	}
	accs := map[PodKey]*acc{}
	for _, s := range series {
		if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
			continue
		}
		key, ok := podOf(s.Labels)
		if !ok {
			continue
		}
		a := accs[key]
		if a == nil {
			a = &acc{}
			accs[key] = a
		}
		a.sum += s.Value
		a.n++
	}
	out := make(map[PodKey]float64, len(accs))
	for k, a := range accs {
		out[k] = a.sum / float64(a.n)
	}
	return out
}

// podOf reads the namespace and the pod of a series, each from its exported_ label whenever
// the series has it, else from the plain label, independently: Prometheus renames only the
// labels that collide with a target label (dcgm-exporter scraped with a namespace target label
// but no pod one gives exported_namespace beside the workload's pod).
func podOf(labels map[string]string) (PodKey, bool) {
	k := PodKey{Namespace: labels[LabelNamespace], Pod: labels[LabelPod]}
	if ns := labels[LabelExportedNamespace]; ns != "" {
		k.Namespace = ns
	}
	if pod := labels[LabelExportedPod]; pod != "" {
		k.Pod = pod
	}
	return k, k.Pod != "" && k.Namespace != ""
}
