package signals

import (
	"testing"
	"time"

	"github.com/modelship/modelship/internal/autoscale"

	"github.com/modelship/modelship/internal/metrics"
)

// TestLatencyQueriesAnswerAtTheDefaultScrapeInterval runs the p95 latency queries that
// capacity learning and an SLO read (the vLLM preset's TTFT and ITL), and the SLO's token work, through Prometheus's
// engine over series scraped every 60s, Prometheus's default: over the serving window the
// scrape interval gives (4m) they answer; over a fixed 1m window (one sample per series, no
// rate) they return nothing, and learning from latency would silently never happen. At a 15s
// scrape interval the window stays one minute.
func TestLatencyQueriesAnswerAtTheDefaultScrapeInterval(t *testing.T) {
	render := func(tmpl string, w time.Duration) string {
		q, err := metrics.Render(tmpl, metrics.Vars{Namespace: "ml", Pods: "(?:llama-blue-[a-z0-9]+-[a-z0-9]+|llama-green-[a-z0-9]+-[a-z0-9]+)", Window: metrics.PromDuration(w)})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	if w := autoscale.ServingWindow(autoscale.DefaultInterval, 15*time.Second); w != time.Minute {
		t.Fatalf("autoscale.ServingWindow(15s, 15s) = %s, want the last minute", w)
	}
	// 120 requests a minute, every TTFT under 0.5s and every token under 0.05s. The samples are
	// taken at whole minutes and the queries evaluated half a minute later, as a real scrape is
	// not aligned with the controller's clock.
	const pod = `namespace="ml",pod="llama-blue-5f7c9d8b6-abcde"`
	series := map[string]string{
		`vllm:time_to_first_token_seconds_bucket{` + pod + `,le="0.1"}`:  "0x20",
		`vllm:time_to_first_token_seconds_bucket{` + pod + `,le="0.5"}`:  "0+120x20",
		`vllm:time_to_first_token_seconds_bucket{` + pod + `,le="+Inf"}`: "0+120x20",
		`vllm:inter_token_latency_seconds_bucket{` + pod + `,le="0.05"}`: "0+6000x20",
		`vllm:inter_token_latency_seconds_bucket{` + pod + `,le="+Inf"}`: "0+6000x20",
		// 8000 prompt and 1500 generated tokens a second: half a nominal replica's each, a token
		// work of 1 (compared within 0.001: the rate's extrapolation leaves float noise).
		`vllm:prompt_tokens_total{` + pod + `}`:     "0+480000x20",
		`vllm:generation_tokens_total{` + pod + `}`: "0+90000x20",
		// The 120 requests a minute finish, 100 stopped and 20 at their length: 2 a second.
		`vllm:request_success_total{` + pod + `,finished_reason="stop"}`:   "0+100x20",
		`vllm:request_success_total{` + pod + `,finished_reason="length"}`: "0+20x20",
		`sglang:num_requests_total{` + pod + `}`:                           "0+120x20",
	}
	scrape := 60 * time.Second
	// histogram_quantile interpolates within the bucket: the p95 of (0.1, 0.5] is
	// 0.1 + 0.4 * 0.95 = 0.48; of (0, 0.05], 0.0475.
	runPromtool(t, []promCase{
		{name: "the p95 TTFT over the serving window at a 60s scrape", interval: "60s", series: series, expr: render(metrics.VLLMTTFTP95, autoscale.ServingWindow(autoscale.DefaultInterval, scrape)), at: "10m30s", want: num(0.48)},
		{name: "the p95 ITL over the serving window at a 60s scrape", interval: "60s", series: series, expr: render(metrics.VLLMITLP95, autoscale.ServingWindow(autoscale.DefaultInterval, scrape)), at: "10m30s", want: num(0.0475)},
		{name: "the token work over the serving window at a 60s scrape", interval: "60s", series: series, expr: "abs((" + render(metrics.VLLMTokenWork, autoscale.ServingWindow(autoscale.DefaultInterval, scrape)) + ") - 1) < bool 0.001", at: "10m30s", want: num(1)},
		{name: "the requests served per second over the serving window at a 60s scrape", interval: "60s", series: series, expr: "abs((" + render(metrics.VLLMRequestRate, autoscale.ServingWindow(autoscale.DefaultInterval, scrape)) + ") - 2) < bool 0.001", at: "10m30s", want: num(1)},
		{name: "SGLang's requests served per second over the serving window at a 60s scrape", interval: "60s", series: series, expr: "abs((" + render(metrics.SGLangRequestRate, autoscale.ServingWindow(autoscale.DefaultInterval, scrape)) + ") - 2) < bool 0.001", at: "10m30s", want: num(1)},
		{name: "no token work over a fixed 1m window at a 60s scrape", interval: "60s", series: series, expr: render(metrics.VLLMTokenWork, time.Minute), at: "10m30s"},
		{name: "no p95 TTFT over a fixed 1m window at a 60s scrape", interval: "60s", series: series, expr: render(metrics.VLLMTTFTP95, time.Minute), at: "10m30s"},
		{name: "no p95 ITL over a fixed 1m window at a 60s scrape", interval: "60s", series: series, expr: render(metrics.VLLMITLP95, time.Minute), at: "10m30s"},
	})
}
