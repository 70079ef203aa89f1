package metrics

import (
	"strings"
	"testing"

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

func metricByName(ms []v1alpha1.AnalysisMetric, name string) (v1alpha1.AnalysisMetric, bool) {
	for _, m := range ms {
		if m.Name == name {
			return m, true
		}
	}
	return v1alpha1.AnalysisMetric{}, false
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

func TestVLLMPreset(t *testing.T) {
	ms, sample := Preset(v1alpha1.AnalysisPresetVLLM)
	wantBounds := map[string]struct{ max, ratio string }{
		MetricTTFTP95:    {ratio: "1.2"},
		MetricITLP95:     {ratio: "1.2"},
		MetricE2EP95:     {ratio: "1.2"},
		MetricErrorRatio: {max: "0.05"},
	}
	if len(ms) != len(wantBounds) {
		t.Fatalf("%d metrics, want %d", len(ms), len(wantBounds))
	}
	for _, m := range ms {
		t.Run(m.Name+" has its bound and renders a balanced query selecting the color's pods", func(t *testing.T) {
			want, ok := wantBounds[m.Name]
			if !ok {
				t.Fatalf("unexpected metric %q", m.Name)
			}
			if !sameQuantity(m.Max, want.max) {
				t.Errorf("max = %v, want %q", m.Max, want.max)
			}
			if !sameQuantity(m.MaxRatioToStable, want.ratio) {
				t.Errorf("maxRatioToStable = %v, want %q", m.MaxRatioToStable, want.ratio)
			}
			if m.Min != nil {
				t.Errorf("min = %s, want none", m.Min)
			}
			q, err := Render(m.Query, candidateVars)
			if err != nil {
				t.Fatal(err)
			}
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
	t.Run("latencies are p95s of vLLM's histograms", func(t *testing.T) {
		for name, metric := range map[string]string{
			MetricTTFTP95: "vllm:time_to_first_token_seconds_bucket",
			MetricITLP95:  "vllm:inter_token_latency_seconds_bucket",
			MetricE2EP95:  "vllm:e2e_request_latency_seconds_bucket",
		} {
			m, _ := metricByName(ms, name)
			if !strings.HasPrefix(m.Query, "histogram_quantile(0.95, sum by (le) (rate("+metric) {
				t.Errorf("%s: %s", name, m.Query)
			}
		}
	})
	t.Run("inter-token latency falls back to vLLM's older metric name", func(t *testing.T) {
		m, _ := metricByName(ms, MetricITLP95)
		if !strings.Contains(m.Query, "or rate(vllm:time_per_output_token_seconds_bucket{") {
			t.Errorf("no fallback: %s", m.Query)
		}
	})
	t.Run("the error ratio counts zero aborts as 0 but no finished request as no data", func(t *testing.T) {
		m, _ := metricByName(ms, MetricErrorRatio)
		num, den, ok := strings.Cut(m.Query, " / ")
		if !ok {
			t.Fatalf("not a ratio: %s", m.Query)
		}
		if !strings.Contains(num, `finished_reason="abort"`) || !strings.HasSuffix(num, "or vector(0))") {
			t.Errorf("numerator: %s", num)
		}
		if strings.Contains(den, "vector(0)") || strings.Contains(den, "finished_reason") {
			t.Errorf("denominator must count all finished requests and stay absent without data: %s", den)
		}
	})
	t.Run("the sample query counts the color's finished requests over the window", func(t *testing.T) {
		q, err := Render(sample, candidateVars)
		if err != nil {
			t.Fatal(err)
		}
		want := `sum(increase(vllm:request_success_total{` + candidateSelector + `}[2m]))`
		if q != want {
			t.Errorf("got  %s\nwant %s", q, want)
		}
	})
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
			wantNames:  []string{MetricTTFTP95, MetricITLP95, MetricE2EP95, MetricErrorRatio},
			wantSample: VLLMSampleQuery,
		},
		{
			name:       "a user metric is added after the preset's",
			spec:       v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM, Metrics: []v1alpha1.AnalysisMetric{custom}},
			wantNames:  []string{MetricTTFTP95, MetricITLP95, MetricE2EP95, MetricErrorRatio, "success-rate"},
			wantSample: VLLMSampleQuery,
		},
		{
			name:       "a user metric with a preset metric's name replaces it in place",
			spec:       v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM, Metrics: []v1alpha1.AnalysisMetric{tighterTTFT}},
			wantNames:  []string{MetricTTFTP95, MetricITLP95, MetricE2EP95, MetricErrorRatio},
			wantSample: VLLMSampleQuery,
			check: func(t *testing.T, ms []v1alpha1.AnalysisMetric) {
				if ms[0].MaxRatioToStable != nil || !sameQuantity(ms[0].Max, "0.5") {
					t.Errorf("ttft-p95 not replaced: %+v", ms[0])
				}
			},
		},
		{
			name:       "the user's sample query wins over the preset's",
			spec:       v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM, SampleQuery: "sum(my_requests)"},
			wantNames:  []string{MetricTTFTP95, MetricITLP95, MetricE2EP95, MetricErrorRatio},
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
