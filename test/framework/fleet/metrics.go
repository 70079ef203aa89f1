package fleet

import (
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names, as vLLM and NVIDIA's DCGM exporter expose them.
const (
	MetricRequestsRunning  = "vllm:num_requests_running"
	MetricRequestsWaiting  = "vllm:num_requests_waiting"
	MetricKVCacheUsage     = "vllm:kv_cache_usage_perc"
	MetricGPUCacheUsage    = "vllm:gpu_cache_usage_perc"
	MetricTTFT             = "vllm:time_to_first_token_seconds"
	MetricITL              = "vllm:inter_token_latency_seconds"
	MetricE2E              = "vllm:e2e_request_latency_seconds"
	MetricRequestSuccess   = "vllm:request_success_total"
	MetricPromptTokens     = "vllm:prompt_tokens_total"
	MetricGenerationTokens = "vllm:generation_tokens_total"
	// vLLM v1's per-request histograms (vllm/v1/metrics/loggers.py), observed once per finished
	// request: its time waiting, in prefill and in decode (seconds, E2EBuckets), and its prompt
	// and generated tokens (TokenBuckets).
	MetricRequestQueueTime        = "vllm:request_queue_time_seconds"
	MetricRequestPrefillTime      = "vllm:request_prefill_time_seconds"
	MetricRequestDecodeTime       = "vllm:request_decode_time_seconds"
	MetricRequestPromptTokens     = "vllm:request_prompt_tokens"
	MetricRequestGenerationTokens = "vllm:request_generation_tokens"
	MetricGPUUtil                 = "DCGM_FI_DEV_GPU_UTIL"
	// The endpoint picker's metrics (Gateway API Inference Extension), per InferencePool and per
	// model name.
	MetricPoolQueueSize    = "inference_pool_average_queue_size"
	MetricPoolKVCache      = "inference_pool_average_kv_cache_utilization"
	MetricPoolReadyPods    = "inference_pool_ready_pods"
	MetricObjectiveRunning = "inference_objective_running_requests"
	// MetricGatewayResponses counts the Gateway's responses per ModelServer, color and code: the
	// simulated Gateway's (Submit), or a real one's as its client saw them
	// (CountGatewayResponse); it is the simulator's own, not vLLM's.
	MetricGatewayResponses = "fleetsim_gateway_responses_total"
)

// GPUModelName is the modelName label of the simulated GPUs.
const GPUModelName = "NVIDIA H100 80GB HBM3"

var (
	vllmLabels = []string{"namespace", "pod", "model_name"}
	dcgmLabels = []string{"gpu", "UUID", "device", "modelName", "Hostname", "container", "namespace", "pod"}

	descRunning   = prometheus.NewDesc(MetricRequestsRunning, "Number of requests in model execution batches.", vllmLabels, nil)
	descWaiting   = prometheus.NewDesc(MetricRequestsWaiting, "Number of requests waiting to be processed.", vllmLabels, nil)
	descKV        = prometheus.NewDesc(MetricKVCacheUsage, "KV-cache usage. 1 means 100 percent usage.", vllmLabels, nil)
	descGPUCache  = prometheus.NewDesc(MetricGPUCacheUsage, "GPU KV-cache usage. 1 means 100 percent usage (deprecated name).", vllmLabels, nil)
	descTTFT      = prometheus.NewDesc(MetricTTFT, "Histogram of time to first token in seconds.", vllmLabels, nil)
	descITL       = prometheus.NewDesc(MetricITL, "Histogram of inter-token latency in seconds.", vllmLabels, nil)
	descE2E       = prometheus.NewDesc(MetricE2E, "Histogram of e2e request latency in seconds.", vllmLabels, nil)
	descSuccess   = prometheus.NewDesc(MetricRequestSuccess, "Count of successfully processed requests.", append(slicesClone(vllmLabels), "finished_reason"), nil)
	descPrompt    = prometheus.NewDesc(MetricPromptTokens, "Number of prefill tokens processed.", vllmLabels, nil)
	descGen       = prometheus.NewDesc(MetricGenerationTokens, "Number of generation tokens processed.", vllmLabels, nil)
	descQueueTime = prometheus.NewDesc(MetricRequestQueueTime, "Histogram of time spent in WAITING phase for request.", vllmLabels, nil)
	descPrefill   = prometheus.NewDesc(MetricRequestPrefillTime, "Histogram of time spent in PREFILL phase for request.", vllmLabels, nil)
	descDecode    = prometheus.NewDesc(MetricRequestDecodeTime, "Histogram of time spent in DECODE phase for request.", vllmLabels, nil)
	descReqPrompt = prometheus.NewDesc(MetricRequestPromptTokens, "Number of prefill tokens processed.", vllmLabels, nil)
	descReqGen    = prometheus.NewDesc(MetricRequestGenerationTokens, "Number of generation tokens processed.", vllmLabels, nil)
	descGPUUtil   = prometheus.NewDesc(MetricGPUUtil, "GPU utilization (in %).", dcgmLabels, nil)
	descPoolQueue = prometheus.NewDesc(MetricPoolQueueSize, "The average number of requests pending in the model server queue.", []string{"namespace", "name"}, nil)
	descPoolKV    = prometheus.NewDesc(MetricPoolKVCache, "The average kv cache utilization for an inference server pool.", []string{"namespace", "name"}, nil)
	descPoolReady = prometheus.NewDesc(MetricPoolReadyPods, "The number of ready pods in the inference server pool.", []string{"namespace", "name"}, nil)
	descObjective = prometheus.NewDesc(MetricObjectiveRunning, "Inference objective number of running requests in each model.", []string{"namespace", "model_name"}, nil)
	descGateway   = prometheus.NewDesc(MetricGatewayResponses, "Responses of the simulated Gateway per ModelServer color and HTTP code.", []string{"namespace", "modelserver", "color", "code"}, nil)
)

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// Describe sends the descriptors of every metric the fleet exposes (prometheus.Collector).
func (f *Fleet) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunning, descWaiting, descKV, descGPUCache, descTTFT, descITL, descE2E, descSuccess, descPrompt, descGen, descQueueTime, descPrefill, descDecode, descReqPrompt, descReqGen, descGPUUtil, descGateway, descPoolQueue, descPoolKV, descPoolReady, descObjective} {
		ch <- d
	}
}

// Collect sends the current value of every series (prometheus.Collector). vLLM series exist for
// pods whose model is loaded (vLLM serves /metrics only then); DCGM series for every pod holding
// GPUs. A deleted pod's series are gone.
func (f *Fleet) Collect(ch chan<- prometheus.Metric) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.pods {
		p := r.pod
		for i := range p.GPUs {
			sendConst(ch, descGPUUtil, prometheus.GaugeValue, roundUtil(100*r.util),
				strconv.Itoa(i), gpuUUID(p, i), "nvidia"+strconv.Itoa(i), GPUModelName, p.Node, p.Container, p.Namespace, p.Name)
		}
		if r.loaded {
			collectVLLM(ch, r)
		}
	}
	for k, v := range f.gateway {
		sendConst(ch, descGateway, prometheus.CounterValue, float64(v), k.namespace, k.modelServer, k.color, k.code)
	}
	f.collectPools(ch)
}

// collectVLLM sends a loaded pod's vLLM series.
func collectVLLM(ch chan<- prometheus.Metric, r *replica) {
	p := r.pod
	lv := []string{p.Namespace, p.Name, p.ModelName}
	sendConst(ch, descRunning, prometheus.GaugeValue, float64(len(r.running)), lv...)
	sendConst(ch, descWaiting, prometheus.GaugeValue, float64(len(r.waiting)), lv...)
	kv := r.kvUsage()
	sendConst(ch, descKV, prometheus.GaugeValue, kv, lv...)
	sendConst(ch, descGPUCache, prometheus.GaugeValue, kv, lv...)
	sendHistogram(ch, descTTFT, r.ttft.count, r.ttft.sum, r.ttft.cumulative(), lv...)
	sendHistogram(ch, descITL, r.itl.count, r.itl.sum, r.itl.cumulative(), lv...)
	sendHistogram(ch, descE2E, r.e2e.count, r.e2e.sum, r.e2e.cumulative(), lv...)
	for _, h := range []struct {
		d *prometheus.Desc
		h *histogram
	}{{descQueueTime, &r.queueTime}, {descPrefill, &r.prefillTime}, {descDecode, &r.decodeTime}, {descReqPrompt, &r.promptTokensReq}, {descReqGen, &r.genTokensReq}} {
		sendHistogram(ch, h.d, h.h.count, h.h.sum, h.h.cumulative(), lv...)
	}
	for _, reason := range finishReasons {
		sendConst(ch, descSuccess, prometheus.CounterValue, float64(r.success[reason]), append(slicesClone(lv), reason)...)
	}
	sendConst(ch, descPrompt, prometheus.CounterValue, float64(r.promptTokens), lv...)
	sendConst(ch, descGen, prometheus.CounterValue, float64(r.generatedTokens), lv...)
}

// PodCollector exposes one pod's vLLM series, as that pod's own vLLM serves them on its
// /metrics: the series Collect sends for it, without DCGM's (another exporter's) or the
// Gateway's and endpoint picker's. It sends nothing while the model loads or once the pod is
// gone.
func (f *Fleet) PodCollector(namespace, name string) prometheus.Collector {
	return podCollector{f: f, key: namespace + "/" + name}
}

type podCollector struct {
	f   *Fleet
	key string
}

// Describe sends the vLLM descriptors.
func (c podCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunning, descWaiting, descKV, descGPUCache, descTTFT, descITL, descE2E, descSuccess, descPrompt, descGen, descQueueTime, descPrefill, descDecode, descReqPrompt, descReqGen} {
		ch <- d
	}
}

// Collect sends the pod's vLLM series.
func (c podCollector) Collect(ch chan<- prometheus.Metric) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	if r, ok := c.f.pods[c.key]; ok && r.loaded {
		collectVLLM(ch, r)
	}
}

// collectPools sends what an endpoint picker reports for each InferencePool: the average queue
// and KV-cache use over the pool's pods that serve (Ready and loaded), their number, and the
// running requests of each model name over the pools of a namespace. A pool with no serving
// pod reports its ready pods only (the picker has nothing to average).
func (f *Fleet) collectPools(ch chan<- prometheus.Metric) {
	type objective struct{ namespace, model string }
	running := map[objective]int{}
	for _, pool := range f.pools {
		var n, waiting int
		var kv float64
		for _, r := range f.pods {
			p := r.pod
			if p.Namespace != pool.Namespace || p.ModelServer != pool.ModelServer || p.Color != pool.Color || !p.Ready || p.Terminating || !r.loaded {
				continue
			}
			n++
			waiting += len(r.waiting)
			kv += r.kvUsage()
			running[objective{p.Namespace, p.ModelName}] += len(r.running)
		}
		sendConst(ch, descPoolReady, prometheus.GaugeValue, float64(n), pool.Namespace, pool.Name)
		if n == 0 {
			continue
		}
		sendConst(ch, descPoolQueue, prometheus.GaugeValue, float64(waiting)/float64(n), pool.Namespace, pool.Name)
		sendConst(ch, descPoolKV, prometheus.GaugeValue, kv/float64(n), pool.Namespace, pool.Name)
	}
	for o, v := range running {
		sendConst(ch, descObjective, prometheus.GaugeValue, float64(v), o.namespace, o.model)
	}
}

// roundUtil reports utilization as DCGM does: a whole percent.
func roundUtil(u float64) float64 {
	return float64(int(u + 0.5))
}

// gpuUUID derives a stable GPU UUID from the pod and the GPU index.
func gpuUUID(p Pod, i int) string {
	h := fnv.New128a()
	_, _ = fmt.Fprintf(h, "%s/%s/%s/%d", p.Namespace, p.Name, p.UID, i)
	b := h.Sum(nil)
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// sendConst sends a constant metric, or an invalid metric carrying the error (never a panic).
func sendConst(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, lv ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, lv...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}

// sendHistogram sends a constant histogram, or an invalid metric carrying the error.
func sendHistogram(ch chan<- prometheus.Metric, d *prometheus.Desc, count uint64, sum float64, buckets map[float64]uint64, lv ...string) {
	m, err := prometheus.NewConstHistogram(d, count, sum, buckets, lv...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}
