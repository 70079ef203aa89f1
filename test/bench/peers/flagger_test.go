package peers

import (
	"regexp"
	"testing"
)

func TestPodRegex(t *testing.T) {
	for _, tc := range []struct {
		pod           string
		canary, prime bool
	}{
		{"llm-7d9f8c6b5-x2k4q", true, false},
		{"llm-primary-6c8d9f7b4-ab1cd", false, true},
		{"llm2-7d9f8c6b5-x2k4q", false, false},
		{"other-llm-7d9f8c6b5-x2k4q", false, false},
	} {
		// Prometheus anchors label regexes at both ends.
		canary := regexp.MustCompile("^(?:" + PodRegex("llm", false) + ")$").MatchString(tc.pod)
		primary := regexp.MustCompile("^(?:" + PodRegex("llm", true) + ")$").MatchString(tc.pod)
		if canary != tc.canary || primary != tc.prime {
			t.Errorf("%s: canary %v primary %v, want %v %v", tc.pod, canary, primary, tc.canary, tc.prime)
		}
	}
}

func TestQuantileQuery(t *testing.T) {
	got := QuantileQuery("vllm:e2e_request_latency_seconds", 0.99, false)
	want := `histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket{namespace="{{ namespace }}",pod=~"{{ target }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"}[{{ interval }}])))`
	if got != want {
		t.Errorf("QuantileQuery = %s\nwant %s", got, want)
	}
}
