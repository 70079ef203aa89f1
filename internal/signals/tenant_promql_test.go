package signals

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/modelship/modelship/internal/autoscale"

	"github.com/modelship/modelship/internal/metrics"
)

// promVector checks with promtool that Prometheus's engine answers expr, over series stored as
// scraped, with exactly want (labels and values), and returns want for the Go side to read:
// what the controller then indexes is what Prometheus answered.
func promVector(t *testing.T, stored map[string]float64, expr string, want []metrics.Series) []metrics.Series {
	t.Helper()
	bin := promtool(t)
	type sample struct {
		Labels string  `json:"labels"`
		Value  float64 `json:"value"`
	}
	type input struct {
		Series string `json:"series"`
		Values string `json:"values"`
	}
	var in []input
	for s, v := range stored {
		b, _ := json.Marshal(v)
		in = append(in, input{Series: s, Values: string(b) + "x10"})
	}
	exp := []sample{}
	for _, s := range want {
		names := make([]string, 0, len(s.Labels))
		for k := range s.Labels {
			names = append(names, k)
		}
		sort.Strings(names)
		pairs := make([]string, len(names))
		for i, k := range names {
			b, _ := json.Marshal(s.Labels[k])
			pairs[i] = k + "=" + string(b)
		}
		exp = append(exp, sample{Labels: "{" + strings.Join(pairs, ",") + "}", Value: s.Value})
	}
	doc, err := json.Marshal(map[string]any{"rule_files": []string{}, "evaluation_interval": "15s", "tests": []any{map[string]any{
		"interval": "15s", "input_series": in,
		"promql_expr_test": []any{map[string]any{"expr": expr, "eval_time": "1m", "exp_samples": exp}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "test.yml")
	if err := os.WriteFile(f, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "test", "rules", f).CombinedOutput(); err != nil {
		t.Fatalf("%s: promtool: %v\n%s", expr, err, strings.TrimSpace(string(out)))
	}
	return want
}

// Tenant a's pod, scraped by the shipped PodMonitor (honorLabels: false), writes series about
// tenant b's pod into its own exposition. Prometheus keeps a's pod as namespace and pod and
// renames what a wrote to exported_namespace and exported_pod. b's autoscaling reads only what
// b's pod and the GPU exporter report.
func TestATenantsForgedSeriesDoNotSteerAnotherTenantsAutoscaling(t *testing.T) {
	const (
		forger   = `job="monitoring/modelship-model-servers",namespace="a",pod="a-llama-0",exported_namespace="b",exported_pod="b-llama-0"`
		exporter = `job="nvidia-dcgm-exporter",namespace="gpu-operator",pod="nvidia-dcgm-exporter-x7k2p",exported_namespace="b",exported_pod="b-llama-0"`
		bsPod    = `job="monitoring/modelship-model-servers",namespace="b",pod="b-llama-0"`
	)
	labels := func(kv ...string) map[string]string {
		l := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	gpu := promVector(t, map[string]float64{
		`DCGM_FI_DEV_GPU_UTIL{` + exporter + `,gpu="0",exported_container="vllm"}`: 90,
		`DCGM_FI_DEV_GPU_UTIL{` + forger + `,gpu="0"}`:                             0,
	}, QueryGPUUtilization, []metrics.Series{
		{Labels: labels("job", "nvidia-dcgm-exporter", "namespace", "gpu-operator", "pod", "nvidia-dcgm-exporter-x7k2p", "exported_namespace", "b", "exported_pod", "b-llama-0"), Value: 90},
		{Labels: labels("job", "monitoring/modelship-model-servers", "namespace", "a", "pod", "a-llama-0", "exported_namespace", "b", "exported_pod", "b-llama-0"), Value: 0},
	})
	waiting := promVector(t, map[string]float64{
		`vllm:num_requests_waiting{` + bsPod + `,model_name="llama"}`:  2,
		`vllm:num_requests_waiting{` + forger + `,model_name="llama"}`: 1000,
	}, QueryRequestsWaiting, []metrics.Series{
		{Labels: labels("namespace", "b", "pod", "b-llama-0"), Value: 2},
		{Labels: labels("namespace", "a", "pod", "a-llama-0"), Value: 1000},
	})
	kv := promVector(t, map[string]float64{
		`vllm:kv_cache_usage_perc{` + bsPod + `}`:  0.5,
		`vllm:kv_cache_usage_perc{` + forger + `}`: 1,
	}, QueryKVCacheUsage, []metrics.Series{
		{Labels: labels("namespace", "b", "pod", "b-llama-0"), Value: 0.5},
		{Labels: labels("namespace", "a", "pod", "a-llama-0"), Value: 1},
	})

	q := &fakeQuerier{series: map[string][]metrics.Series{QueryGPUUtilization: gpu, QueryRequestsWaiting: waiting, QueryKVCacheUsage: kv}}
	snap, err := Fetch(context.Background(), q, DefaultQueries(), t0)
	if err != nil {
		t.Fatal(err)
	}
	spec := newSpec(1, 10, withGPU(70), withWaiting(5), withKV("0.8"))
	for _, c := range []struct {
		pod  autoscale.PodKey
		want []float64 // GPU utilization, requests waiting, KV-cache usage
	}{
		{pod("b", "b-llama-0"), []float64{90, 2, 0.5}},
		{pod("a", "a-llama-0"), []float64{0, 1000, 1}},
	} {
		got := snap.Observe(spec, []autoscale.PodKey{c.pod})
		for i, o := range got {
			if o.Status != metrics.OK || o.Value != c.want[i] {
				t.Errorf("%s reads %s %v (%s), want %v", c.pod.Namespace+"/"+c.pod.Name, o.Metric, o.Value, o.Status, c.want[i])
			}
		}
	}
}
