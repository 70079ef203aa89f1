package policysim

import (
	"math"
	"testing"
	"time"

	"github.com/modelship/modelship/test/framework/fleet"
)

func podStatus(name string, loaded bool, util float64, prompt, gen uint64, waiting int) fleet.PodStatus {
	return fleet.PodStatus{Pod: fleet.Pod{Name: name}, Loaded: loaded, GPUUtilization: util, PromptTokens: prompt, GeneratedTokens: gen, Waiting: waiting}
}

func TestScrapeAveragesOverServingPodsAndRatesCountersOverAMinute(t *testing.T) {
	s := newScraper()
	s.scrape(0, []fleet.PodStatus{podStatus("a", true, 50, 0, 0, 0)}, 1, Signals{})
	s.scrape(30*time.Second, []fleet.PodStatus{podStatus("a", true, 50, 3000, 600, 0)}, 1, Signals{})
	sig := s.scrape(60*time.Second, []fleet.PodStatus{
		podStatus("a", true, 80, 6000, 1200, 2),
		podStatus("b", false, 0, 0, 0, 3), // still loading: not in the GPU average, its queue counts
	}, 2, Signals{})
	if !sig.HasGPU || sig.GPUUtilization != 80 || sig.Ready != 1 || sig.Pods != 2 {
		t.Fatalf("gauges: %+v; want GPU 80 over the 1 serving pod of 2", sig)
	}
	if sig.Waiting != 5 {
		t.Fatalf("waiting %v, want 5", sig.Waiting)
	}
	if math.Abs(sig.PromptTPS-100) > 1e-9 || math.Abs(sig.GeneratedTPS-20) > 1e-9 {
		t.Fatalf("rates %v/%v, want 100/20 tokens per second over the minute", sig.PromptTPS, sig.GeneratedTPS)
	}
	// With no serving pod there is no GPU value (never a zero).
	if sig := s.scrape(75*time.Second, []fleet.PodStatus{podStatus("b", false, 0, 0, 0, 0)}, 1, Signals{}); sig.HasGPU {
		t.Fatalf("GPU value without a serving pod: %+v", sig)
	}
}
