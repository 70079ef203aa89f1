// Command scrape60s checks the vLLM preset against a real Prometheus scraping at its default
// 60s interval: it serves a small vLLM-like exposition (2 requests/s, 10% failing with
// finished_reason="error", p95 time to first token 0.5s), runs the prometheus binary on it
// (Debian's package: hack/prometheus.sh), waits for five scrapes and prints each preset query's
// answer over the old 1m window and over the 4m window the scrape interval now gives, then the
// autoscaler's latency and token-work queries over the fixed 1m they had and over its serving
// window (autoscale.ServingWindow).
// It takes about five minutes: go run ./hack/scrape60s
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/window"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "scrape60s:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "scrape60s")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	start := time.Now()
	var lc net.ListenConfig
	expo, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go http.Serve(expo, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { //nolint:errcheck,gosec // a local test server
		n := int(time.Since(start).Seconds() * 2)
		fmt.Fprintf(w, "# TYPE vllm:time_to_first_token_seconds histogram\n"+
			"vllm:time_to_first_token_seconds_bucket{model_name=\"llama\",le=\"0.1\"} %d\n"+
			"vllm:time_to_first_token_seconds_bucket{model_name=\"llama\",le=\"0.5\"} %d\n"+
			"vllm:time_to_first_token_seconds_bucket{model_name=\"llama\",le=\"+Inf\"} %d\n"+
			"vllm:time_to_first_token_seconds_count{model_name=\"llama\"} %d\n"+
			"# TYPE vllm:request_success_total counter\n"+
			"vllm:request_success_total{model_name=\"llama\",finished_reason=\"stop\"} %d\n"+
			"vllm:request_success_total{model_name=\"llama\",finished_reason=\"error\"} %d\n"+
			"# TYPE vllm:prompt_tokens_total counter\n"+
			"vllm:prompt_tokens_total{model_name=\"llama\"} %d\n"+
			"# TYPE vllm:generation_tokens_total counter\n"+
			"vllm:generation_tokens_total{model_name=\"llama\"} %d\n",
			n/10, n*9/10, n, n, n*9/10, n/10, n*4000, n*750)
	}))
	promAddr, err := freeAddr(ctx)
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf("global: {scrape_interval: 60s}\nscrape_configs:\n- job_name: vllm\n  static_configs:\n  - targets: [%q]\n    labels: {namespace: ml, pod: llama-green-5f7c9d8b6-abcde}\n", expo.Addr().String())
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting prometheus (hack/prometheus.sh installs it): %w", err)
	}
	defer cmd.Process.Kill() //nolint:errcheck // best effort
	fmt.Println("waiting 4m30s for five scrapes at 60s...")
	time.Sleep(4*time.Minute + 30*time.Second)
	p, err := metrics.NewPrometheus(metrics.Config{URL: "http://" + promAddr})
	if err != nil {
		return err
	}
	for _, window := range []string{"1m", metrics.AnalysisWindow(window.Of(30*time.Second, time.Minute))} {
		v := metrics.Vars{Namespace: "ml", Name: "llama", Color: "green", Revision: "5f7c9d8b6", Pods: metrics.PodRegex("llama-green"), Window: window}
		for _, q := range []struct{ name, tmpl string }{
			{"ttft-p95", metrics.VLLMTTFTP95}, {"error-ratio", metrics.VLLMErrorRatio}, {"samples", metrics.VLLMSampleQuery},
		} {
			query, err := metrics.Render(q.tmpl, v)
			if err != nil {
				return err
			}
			s := p.Scalar(ctx, query, time.Now())
			fmt.Printf("FIGURE: scrape 60s, window %s, %s: %s %g %s\n", window, q.name, s.Status, s.Value, s.Message)
		}
	}
	// The autoscaler's serving window (autoscale.ServingWindow of the default 15s interval and
	// this 60s scrape) and the fixed 1m it replaced: the latency that learnCapacity and
	// spec.autoscaling.slo read, and the slo's token work (2 requests/s of 4000 prompt and 750
	// generated tokens: 0.5 + 0.5, one nominal replica).
	for _, w := range []string{"1m", metrics.PromDuration(autoscale.ServingWindow(autoscale.DefaultInterval, time.Minute))} {
		v := metrics.Vars{Namespace: "ml", Name: "llama", Pods: "(?:" + metrics.PodRegex("llama-blue") + "|" + metrics.PodRegex("llama-green") + ")", Window: w}
		for _, q := range []struct{ name, tmpl string }{{"autoscaling ttft-p95", metrics.VLLMTTFTP95}, {"slo token work", metrics.VLLMTokenWork}} {
			query, err := metrics.Render(q.tmpl, v)
			if err != nil {
				return err
			}
			s := p.Scalar(ctx, query, time.Now())
			fmt.Printf("FIGURE: scrape 60s, serving window %s, %s: %s %g %s\n", w, q.name, s.Status, s.Value, s.Message)
		}
	}
	return nil
}

func freeAddr(ctx context.Context) (string, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}
