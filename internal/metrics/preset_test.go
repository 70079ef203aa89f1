package metrics

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

var candidateVars = Vars{
	Namespace: "ml",
	Name:      "llama",
	Color:     "green",
	Revision:  "5f7c9d8b6",
	Pods:      PodRegex("llama-green"),
	Window:    "2m",
}

const candidateSelector = `namespace="ml",pod=~"llama-green-[a-z0-9]+-[a-z0-9]+"`

func quantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// balanced reports whether brackets and double-quoted strings are balanced in a rendered query:
// a cheap check that rendering produced something PromQL can parse.
func balanced(q string) bool {
	var stack []rune
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	inString := false
	for i := 0; i < len(q); i++ {
		c := rune(q[i])
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '(', '[', '{':
			stack = append(stack, c)
		case ')', ']', '}':
			if len(stack) == 0 || stack[len(stack)-1] != pairs[c] {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return !inString && len(stack) == 0
}

func TestServingPresets(t *testing.T) {
	type histograms struct{ ttft, itl, itlOld, e2e string }
	cases := []struct {
		preset       v1alpha1.AnalysisPreset
		hist         histograms
		engineErrors string // the engine's failed requests, as selected
		engineTotal  string // the engine's finished requests
		metrics      int    // how many metrics the preset has
		// decode is decode-per-token's numerator and denominator per pod, as rendered.
		decode [2]string
	}{
		{
			preset:       v1alpha1.AnalysisPresetVLLM,
			hist:         histograms{"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds", "vllm:e2e_request_latency_seconds"},
			engineErrors: `vllm:request_success_total{` + candidateSelector + `,finished_reason="error"}[2m]`,
			engineTotal:  `vllm:request_success_total{` + candidateSelector + `}[2m]`,
			metrics:      4, // and abort-ratio, relative to stable
			decode: [2]string{
				`sum by (pod) (increase(vllm:request_decode_time_seconds_sum{` + candidateSelector + `}[2m]))`,
				`sum by (pod) (increase(vllm:request_generation_tokens_sum{` + candidateSelector + `}[2m])) - sum by (pod) (increase(vllm:request_generation_tokens_count{` + candidateSelector + `}[2m]))`,
			},
		},
		{
			preset:       v1alpha1.AnalysisPresetSGLang,
			hist:         histograms{"sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds", "sglang:e2e_request_latency_seconds"},
			engineErrors: `sglang:num_aborted_requests_total{` + candidateSelector + `}[2m]`,
			engineTotal:  `sglang:num_requests_total{` + candidateSelector + `}[2m]`,
			metrics:      3,
			decode: [2]string{
				`sum by (pod) (increase(sglang:inter_token_latency_seconds_sum{` + candidateSelector + `}[2m]))`,
				`sum by (pod) (increase(sglang:inter_token_latency_seconds_count{` + candidateSelector + `}[2m]))`,
			},
		},
	}
	wantBounds := map[string]struct{ max, ratio string }{
		MetricTTFTP95:        {ratio: "1.2"},
		MetricITLP95:         {ratio: "1.2"},
		MetricE2EP95:         {ratio: "1.2"},
		MetricErrorRatio:     {max: "0.05"},
		MetricAbortRatio:     {ratio: "1.5"},
		MetricDecodePerToken: {ratio: "1.1"},
	}
	httpErrors := `http_requests_total{` + candidateSelector + `,status=~"5.."}[2m]`
	httpTotal := `http_requests_total{` + candidateSelector + `}[2m]`
	for _, tc := range cases {
		ms, sample := Preset(tc.preset)
		if len(ms) != tc.metrics {
			t.Fatalf("%s: %d metrics, want %d", tc.preset, len(ms), tc.metrics)
		}
		rendered := map[string]string{}
		for _, m := range ms {
			t.Run(string(tc.preset)+" "+m.Name+" has its bound and renders a balanced query selecting the color's pods", func(t *testing.T) {
				want, ok := wantBounds[m.Name]
				if !ok {
					t.Fatalf("unexpected metric %q", m.Name)
				}
				if !sameQuantity(m.Max, want.max) || !sameQuantity(m.MaxRatioToStable, want.ratio) || m.Min != nil {
					t.Errorf("bounds max=%v ratio=%v min=%v, want %+v", m.Max, m.MaxRatioToStable, m.Min, want)
				}
				q, err := Render(m.Query, candidateVars)
				if err != nil {
					t.Fatal(err)
				}
				rendered[m.Name] = q
				if !balanced(q) {
					t.Errorf("unbalanced query: %s", q)
				}
				if !strings.Contains(q, candidateSelector) || !strings.Contains(q, "[2m]") {
					t.Errorf("query does not select the candidate's pods over the window: %s", q)
				}
				if strings.Count(q, "{") != strings.Count(q, candidateSelector) {
					t.Errorf("a selector of the query lacks the pod filter: %s", q)
				}
			})
		}
		t.Run(string(tc.preset)+" latencies are p95s of the server's histograms, inter-token latency under its new and old names; TTFT and e2e only with an absolute bound", func(t *testing.T) {
			ttft, e2e := P95Max(tc.preset, MetricTTFTP95, quantity("2")), P95Max(tc.preset, MetricE2EP95, quantity("30"))
			for _, m := range []*v1alpha1.AnalysisMetric{ttft, e2e} {
				if m.MaxRatioToStable != nil || m.Histogram == nil {
					t.Errorf("%s: ratio %v histogram %v; want an absolute bound judged from the buckets", m.Name, m.MaxRatioToStable, m.Histogram)
				}
				q, err := Render(m.Query, candidateVars)
				if err != nil {
					t.Fatal(err)
				}
				rendered[m.Name] = q
			}
			if !sameQuantity(ttft.Max, "2") || !sameQuantity(e2e.Max, "30") {
				t.Errorf("bounds %v and %v; want 2 and 30", ttft.Max, e2e.Max)
			}
			for name, want := range map[string]string{
				MetricTTFTP95: "histogram_quantile(0.95, sum by (le) (rate(" + tc.hist.ttft + "_bucket{" + candidateSelector + "}[2m])))",
				MetricITLP95:  "histogram_quantile(0.95, sum by (le) (rate(" + tc.hist.itl + "_bucket{" + candidateSelector + "}[2m]) or rate(" + tc.hist.itlOld + "_bucket{" + candidateSelector + "}[2m])))",
				MetricE2EP95:  "histogram_quantile(0.95, sum by (le) (rate(" + tc.hist.e2e + "_bucket{" + candidateSelector + "}[2m])))",
			} {
				if rendered[name] != want {
					t.Errorf("%s:\ngot  %s\nwant %s", name, rendered[name], want)
				}
			}
		})
		for _, pu := range []struct {
			name  string
			parts [2]string
		}{{MetricDecodePerToken, tc.decode}} {
			t.Run(string(tc.preset)+" "+pu.name+" is judged per pod, on seconds over tokens", func(t *testing.T) {
				m := ms[slices.IndexFunc(ms, func(m v1alpha1.AnalysisMetric) bool { return m.Name == pu.name })]
				if m.PerUnit == nil || m.Histogram != nil {
					t.Fatalf("%s is not a per-unit metric: %+v", pu.name, m)
				}
				for i, tmpl := range []string{m.PerUnit.NumeratorQuery, m.PerUnit.DenominatorQuery} {
					q, err := Render(tmpl, candidateVars)
					if err != nil {
						t.Fatal(err)
					}
					if q != pu.parts[i] {
						t.Errorf("part %d:\ngot  %s\nwant %s", i, q, pu.parts[i])
					}
				}
			})
		}
		t.Run(string(tc.preset)+" the error ratio is the worse of the HTTP 5xx ratio and the engine's, each 0 without errors and absent without requests", func(t *testing.T) {
			want := `max(label_replace((sum(increase(` + httpErrors + `)) or vector(0)) / sum(increase(` + httpTotal + `)), "source", "http", "", "")` +
				` or label_replace((sum(increase(` + tc.engineErrors + `)) or vector(0)) / sum(increase(` + tc.engineTotal + `)), "source", "engine", "", ""))`
			if rendered[MetricErrorRatio] != want {
				t.Errorf("got  %s\nwant %s", rendered[MetricErrorRatio], want)
			}
		})
		t.Run(string(tc.preset)+" the sample query is the larger of the HTTP and the engine request counts", func(t *testing.T) {
			q, err := Render(sample, candidateVars)
			if err != nil {
				t.Fatal(err)
			}
			want := `max(label_replace(sum(increase(` + httpTotal + `)), "source", "http", "", "") or label_replace(sum(increase(` + tc.engineTotal + `)), "source", "engine", "", ""))`
			if q != want {
				t.Errorf("got  %s\nwant %s", q, want)
			}
		})
	}
}

// sameQuantity reports whether q equals want ("" meaning unset).
func sameQuantity(q *resource.Quantity, want string) bool {
	if q == nil || want == "" {
		return q == nil && want == ""
	}
	return q.Cmp(resource.MustParse(want)) == 0
}

func TestPresetNames(t *testing.T) {
	t.Run("the empty preset is the API's default, vllm", func(t *testing.T) {
		def, defSample := Preset("")
		vllm, vllmSample := Preset(v1alpha1.AnalysisPresetVLLM)
		if len(def) != len(vllm) || defSample != vllmSample || len(def) == 0 {
			t.Fatalf("Preset(\"\") = %d metrics, want vllm's %d", len(def), len(vllm))
		}
	})
	t.Run("the none preset has no metrics and no sample query", func(t *testing.T) {
		ms, sample := Preset(v1alpha1.AnalysisPresetNone)
		if len(ms) != 0 || sample != "" {
			t.Fatalf("got %v, %q", ms, sample)
		}
	})
	t.Run("each call returns its own copies", func(t *testing.T) {
		first, _ := Preset(v1alpha1.AnalysisPresetVLLM)
		first[0].MaxRatioToStable.Set(99)
		first[0].Query = "changed"
		second, _ := Preset(v1alpha1.AnalysisPresetVLLM)
		if !sameQuantity(second[0].MaxRatioToStable, "1.2") || second[0].Query == "changed" {
			t.Fatalf("a caller's change leaked into the preset: %+v", second[0])
		}
	})
}

func TestEffectiveMetrics(t *testing.T) {
	custom := v1alpha1.AnalysisMetric{Name: "success-rate", Query: `x{pod=~"{{.Pods}}"}`, Min: quantity("0.99")}
	tighterTTFT := v1alpha1.AnalysisMetric{Name: MetricTTFTP95, Query: VLLMTTFTP95, Max: quantity("500m")}
	tighterITL := v1alpha1.AnalysisMetric{Name: MetricITLP95, Query: VLLMITLP95, Max: quantity("50m")}
	cases := []struct {
		name       string
		spec       v1alpha1.AnalysisSpec
		wantNames  []string
		wantSample string
		check      func(t *testing.T, ms []v1alpha1.AnalysisMetric)
	}{
		{
			name:       "the vllm preset alone gives its four metrics and its sample query",
			spec:       v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM},
			wantNames:  []string{MetricITLP95, MetricDecodePerToken, MetricErrorRatio, MetricAbortRatio},
			wantSample: VLLMSampleQuery,
		},
		{
			name:       "a user metric is added after the preset's",
			spec:       v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM, Metrics: []v1alpha1.AnalysisMetric{custom}},
			wantNames:  []string{MetricITLP95, MetricDecodePerToken, MetricErrorRatio, MetricAbortRatio, "success-rate"},
			wantSample: VLLMSampleQuery,
		},
		{
			name:       "a user metric with a preset metric's name replaces it in place",
			spec:       v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM, Metrics: []v1alpha1.AnalysisMetric{tighterITL}},
			wantNames:  []string{MetricITLP95, MetricDecodePerToken, MetricErrorRatio, MetricAbortRatio},
			wantSample: VLLMSampleQuery,
			check: func(t *testing.T, ms []v1alpha1.AnalysisMetric) {
				if ms[0].MaxRatioToStable != nil || !sameQuantity(ms[0].Max, "0.05") {
					t.Errorf("itl-p95 not replaced: %+v", ms[0])
				}
			},
		},
		{
			name:       "the user's TTFT SLO holds ttft-p95 to it, judged from the buckets",
			spec:       WithSLO(v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM}, &v1alpha1.LatencySLO{TTFTP95: &v1alpha1.Duration{Duration: 2 * time.Second}}),
			wantNames:  []string{MetricITLP95, MetricDecodePerToken, MetricErrorRatio, MetricAbortRatio, MetricTTFTP95},
			wantSample: VLLMSampleQuery,
			check: func(t *testing.T, ms []v1alpha1.AnalysisMetric) {
				m := ms[4]
				if m.MaxRatioToStable != nil || !sameQuantity(m.Max, "2") || m.Histogram == nil || m.Histogram.BucketQuery != VLLMTTFTBuckets {
					t.Errorf("ttft-p95 %+v; want at most 2 s on vLLM's TTFT buckets", m)
				}
			},
		},
		{
			name: "a user's ttft-p95 wins over the SLO's",
			spec: WithSLO(v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM, Metrics: []v1alpha1.AnalysisMetric{tighterTTFT}},
				&v1alpha1.LatencySLO{TTFTP95: &v1alpha1.Duration{Duration: 2 * time.Second}}),
			wantNames:  []string{MetricITLP95, MetricDecodePerToken, MetricErrorRatio, MetricAbortRatio, MetricTTFTP95},
			wantSample: VLLMSampleQuery,
			check: func(t *testing.T, ms []v1alpha1.AnalysisMetric) {
				if !sameQuantity(ms[4].Max, "0.5") {
					t.Errorf("ttft-p95 %+v; want the user's 0.5 s", ms[4])
				}
			},
		},
		{
			name:       "an SLO without a TTFT bound adds nothing",
			spec:       WithSLO(v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM}, &v1alpha1.LatencySLO{ITLP95: &v1alpha1.Duration{Duration: time.Second}}),
			wantNames:  []string{MetricITLP95, MetricDecodePerToken, MetricErrorRatio, MetricAbortRatio},
			wantSample: VLLMSampleQuery,
		},
		{
			name:       "the user's sample query wins over the preset's",
			spec:       v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM, SampleQuery: "sum(my_requests)"},
			wantNames:  []string{MetricITLP95, MetricDecodePerToken, MetricErrorRatio, MetricAbortRatio},
			wantSample: "sum(my_requests)",
		},
		{
			name:       "the none preset gives only the user's metrics and no sample query",
			spec:       v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetNone, Metrics: []v1alpha1.AnalysisMetric{custom}},
			wantNames:  []string{"success-rate"},
			wantSample: "",
		},
		{
			name:       "the none preset without metrics gives nothing",
			spec:       v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetNone},
			wantNames:  nil,
			wantSample: "",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms, sample := EffectiveMetrics(tc.spec)
			var names []string
			for _, m := range ms {
				names = append(names, m.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.wantNames, ",") {
				t.Errorf("names = %v, want %v", names, tc.wantNames)
			}
			if sample != tc.wantSample {
				t.Errorf("sample query = %q, want %q", sample, tc.wantSample)
			}
			if tc.check != nil {
				tc.check(t, ms)
			}
		})
	}
	t.Run("the result does not alias the spec", func(t *testing.T) {
		spec := v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetNone, Metrics: []v1alpha1.AnalysisMetric{{Name: "a", Query: "q", Max: quantity("1")}}}
		ms, _ := EffectiveMetrics(spec)
		ms[0].Max.Set(5)
		ms[0].Query = "changed"
		if !sameQuantity(spec.Metrics[0].Max, "1") || spec.Metrics[0].Query != "q" {
			t.Fatalf("spec changed: %+v", spec.Metrics[0])
		}
	})
}

// P95Max knows only the presets' TTFT and e2e latencies: none for preset none or another name.
func TestP95MaxIsThePresetsTTFTOrE2EOnly(t *testing.T) {
	if m := P95Max(v1alpha1.AnalysisPresetNone, MetricTTFTP95, quantity("2")); m != nil {
		t.Errorf("preset none: %+v, want nil", m)
	}
	if m := P95Max(v1alpha1.AnalysisPresetVLLM, MetricITLP95, quantity("2")); m != nil {
		t.Errorf("itl-p95: %+v, want nil (judged relative to stable, not by P95Max)", m)
	}
	if m := P95Max("", MetricE2EP95, quantity("30")); m == nil || m.Query != VLLME2EP95 {
		t.Errorf("the default preset's e2e-p95: %+v, want vLLM's", m)
	}
}
