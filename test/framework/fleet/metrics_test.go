package fleet

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// scrape renders the fleet's metrics in Prometheus text format.
func scrape(t *testing.T, f *Fleet) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(f); err != nil {
		t.Fatalf("register: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var b strings.Builder
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatalf("encode: %v", err)
		}
	}
	return b.String()
}

func TestMetricsUseVLLMAndDCGMNamesAndLabels(t *testing.T) {
	f := newFleet(newPod("a", func(p *Pod) { p.GPUs = 2 }))
	f.Submit("ns", "llm", Request{Arrival: t0, ContextTokens: 100, GeneratedTokens: 3})
	f.Advance(t0.Add(time.Second))
	text := scrape(t, f)
	want := []string{
		`vllm:num_requests_running{model_name="llama",namespace="ns",pod="a"} 0`,
		`vllm:num_requests_waiting{model_name="llama",namespace="ns",pod="a"} 0`,
		`vllm:kv_cache_usage_perc{model_name="llama",namespace="ns",pod="a"} 0`,
		`vllm:gpu_cache_usage_perc{model_name="llama",namespace="ns",pod="a"} 0`,
		`vllm:time_to_first_token_seconds_bucket{model_name="llama",namespace="ns",pod="a",le="0.01"} 1`,
		`vllm:time_to_first_token_seconds_bucket{model_name="llama",namespace="ns",pod="a",le="2560"} 1`,
		`vllm:inter_token_latency_seconds_bucket{model_name="llama",namespace="ns",pod="a",le="0.025"} 2`,
		`vllm:e2e_request_latency_seconds_bucket{model_name="llama",namespace="ns",pod="a",le="7680"} 1`,
		`vllm:e2e_request_latency_seconds_count{model_name="llama",namespace="ns",pod="a"} 1`,
		`vllm:request_success_total{finished_reason="stop",model_name="llama",namespace="ns",pod="a"} 1`,
		`vllm:request_success_total{finished_reason="length",model_name="llama",namespace="ns",pod="a"} 0`,
		`vllm:request_success_total{finished_reason="abort",model_name="llama",namespace="ns",pod="a"} 0`,
		`vllm:prompt_tokens_total{model_name="llama",namespace="ns",pod="a"} 100`,
		`vllm:generation_tokens_total{model_name="llama",namespace="ns",pod="a"} 3`,
		`fleetsim_gateway_responses_total{code="200",color="blue",modelserver="llm",namespace="ns"} 1`,
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("missing %s", w)
		}
	}
	for _, gpu := range []string{`gpu="0"`, `gpu="1"`} {
		found := false
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "DCGM_FI_DEV_GPU_UTIL{") && strings.Contains(line, gpu) &&
				strings.Contains(line, `pod="a"`) && strings.Contains(line, `namespace="ns"`) &&
				strings.Contains(line, `container="vllm"`) && strings.Contains(line, `UUID="GPU-`) {
				found = true
			}
		}
		if !found {
			t.Errorf("no DCGM_FI_DEV_GPU_UTIL series with %s and the pod's labels in\n%s", gpu, text)
		}
	}
}

// TestEndpointPickerMetricsPerPool: as an endpoint picker, the fleet reports each pool's average
// queue and KV-cache over the pods that serve, their number, and each model name's running
// requests; a pool without serving pods reports zero ready pods and no averages.
func TestEndpointPickerMetricsPerPool(t *testing.T) {
	f := newFleet(newPod("b1"), newPod("b2"), newPod("g1", func(p *Pod) { p.Color = "green"; p.Ready = false }))
	f.SetPools([]PoolRef{{Namespace: "ns", Name: "llm-blue", ModelServer: "llm", Color: "blue"}, {Namespace: "ns", Name: "llm-green", ModelServer: "llm", Color: "green"}})
	// Far more concurrent requests than two pods batch: some wait.
	for i := range 600 {
		f.Submit("ns", "llm", Request{Arrival: t0.Add(time.Duration(i) * time.Millisecond), ContextTokens: 2000, GeneratedTokens: 500})
	}
	f.Advance(t0.Add(time.Second))
	var waiting, running int
	for _, s := range f.Pods() {
		if s.Pod.Color == "blue" {
			waiting += s.Waiting
			running += s.Running
		}
	}
	if waiting == 0 || running == 0 {
		t.Fatalf("no queue to report (waiting %d, running %d)", waiting, running)
	}
	text := scrape(t, f)
	for _, w := range []string{
		fmt.Sprintf(`inference_pool_average_queue_size{name="llm-blue",namespace="ns"} %g`, float64(waiting)/2),
		`inference_pool_ready_pods{name="llm-blue",namespace="ns"} 2`,
		`inference_pool_ready_pods{name="llm-green",namespace="ns"} 0`,
		fmt.Sprintf(`inference_objective_running_requests{model_name="llama",namespace="ns"} %d`, running),
		`inference_pool_average_kv_cache_utilization{name="llm-blue",namespace="ns"}`,
	} {
		if !strings.Contains(text, w) {
			t.Errorf("missing %s", w)
		}
	}
	if strings.Contains(text, `inference_pool_average_queue_size{name="llm-green"`) {
		t.Error("a pool without serving pods reports an average queue")
	}
	f.SetPools(nil)
	if strings.Contains(scrape(t, f), "inference_pool_") {
		t.Error("pools still reported after they are gone")
	}
}

// vLLM v1 observes, per finished request, its queue, prefill and decode times and its prompt
// and generated tokens: the histograms that let a judge read a version's speed per token with
// queueing left out.
func TestPerRequestHistogramsAreVLLMs(t *testing.T) {
	f := newFleet(newPod("a"))
	f.Submit("ns", "llm", Request{Arrival: t0, ContextTokens: 100, GeneratedTokens: 3})
	f.Advance(t0.Add(time.Second))
	text := scrape(t, f)
	lbl := `model_name="llama",namespace="ns",pod="a"`
	want := []string{
		`vllm:request_queue_time_seconds_count{` + lbl + `} 1`,
		`vllm:request_queue_time_seconds_bucket{` + lbl + `,le="0.3"} 1`,
		`vllm:request_prefill_time_seconds_bucket{` + lbl + `,le="7680"} 1`,
		`vllm:request_decode_time_seconds_count{` + lbl + `} 1`,
		`vllm:request_prompt_tokens_bucket{` + lbl + `,le="50"} 0`,
		`vllm:request_prompt_tokens_bucket{` + lbl + `,le="100"} 1`,
		`vllm:request_prompt_tokens_bucket{` + lbl + `,le="100000"} 1`,
		`vllm:request_prompt_tokens_sum{` + lbl + `} 100`,
		`vllm:request_generation_tokens_bucket{` + lbl + `,le="2"} 0`,
		`vllm:request_generation_tokens_bucket{` + lbl + `,le="5"} 1`,
		`vllm:request_generation_tokens_sum{` + lbl + `} 3`,
		`vllm:request_generation_tokens_count{` + lbl + `} 1`,
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("missing %s", w)
		}
	}
	if strings.Contains(text, `vllm:request_prompt_tokens_bucket{`+lbl+`,le="200000"}`) {
		t.Errorf("a token bucket above max_model_len %d", MaxModelLen)
	}
}

// The decode time per decoded token (decode seconds over generated tokens less each request's
// first) is the time per token of the pod's batch: a lone sequence's 15 ms, 1.5x that on a
// build 1.5x slower; the queue and prefill times are apart from it.
func TestDecodeTimePerDecodedTokenFollowsTheBuildsSpeed(t *testing.T) {
	perToken := func(mult float64) (perToken, queue float64) {
		f := newFleet(newPod("a", withProfile(Profile{LatencyMultiplier: mult})))
		for i := range 4 {
			f.Submit("ns", "llm", Request{Arrival: t0.Add(time.Duration(i) * 3 * time.Second), ContextTokens: 1000, GeneratedTokens: 101})
		}
		f.Advance(t0.Add(20 * time.Second))
		r := podStatus(t, f, "a").Requests
		if r.Requests != 4 || r.GenerationTokens != 404 || r.PromptTokens != 4000 {
			t.Fatalf("requests %+v; want 4 requests of 1000 prompt and 101 generated tokens", r)
		}
		return r.DecodeSeconds / (r.GenerationTokens - float64(r.Requests)), r.QueueSeconds
	}
	base, q := perToken(1)
	if math.Abs(base-0.015) > 0.001 || q != 0 {
		t.Errorf("decode seconds per decoded token %.4f, queue %.3f s; want 0.015 (a lone sequence) and 0", base, q)
	}
	slow, _ := perToken(1.5)
	if r := slow / base; math.Abs(r-1.5) > 0.02 {
		t.Errorf("a 1.5x slower build decodes at %.3fx the time per token; want 1.5x", r)
	}
}
