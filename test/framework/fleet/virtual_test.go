package fleet

import (
	"reflect"
	"testing"
	"time"
)

// runTraceSlice replays two minutes of the Azure trace in virtual time against a blue color of
// two pods and a slower, error-prone green pod taking 20%, with a third blue pod that becomes
// Ready at 30s and loads for 30s. It checks invariants every virtual second and returns the fleet.
func runTraceSlice(t *testing.T, seed uint64) (*Fleet, int) {
	t.Helper()
	tr, err := LoadTrace("testdata/azure-conv-5min.csv")
	if err != nil {
		t.Fatalf("LoadTrace: %v", err)
	}
	replay, err := NewReplay(tr.Slice(0, 2*time.Minute), ReplayOptions{Speed: 1, RateScale: 1.5, Seed: seed})
	if err != nil {
		t.Fatalf("NewReplay: %v", err)
	}
	f := New(Config{Seed: seed, MaxTokens: 512}, t0)
	f.SetPod(newPod("blue-1"))
	f.SetPod(newPod("blue-2"))
	f.SetPod(newPod("blue-3", withLoadDelay(30*time.Second), func(p *Pod) { p.ReadySince = t0.Add(30 * time.Second) }))
	f.SetPod(newPod("green-1", withColor("green"), withProfile(Profile{LatencyMultiplier: 3, ErrorProbability: 0.1})))
	f.SetWeights("ns", "llm", map[string]int32{"blue": 80, "green": 20})

	submitted := 0
	for sec := 1; sec <= 150; sec++ {
		now := t0.Add(time.Duration(sec) * time.Second)
		for _, a := range replay.Until(now.Sub(t0)) {
			o := f.Submit("ns", "llm", Request{Arrival: t0.Add(a.At), ContextTokens: a.ContextTokens, GeneratedTokens: a.GeneratedTokens})
			submitted++
			if o.Pod == "ns/blue-3" && !t0.Add(a.At).After(t0.Add(time.Minute)) {
				t.Fatalf("blue-3 got a request at %v, before its model loaded at 60s", a.At)
			}
		}
		f.Advance(now)
		if !f.Now().Equal(now) {
			t.Fatalf("fleet at %v, want %v", f.Now(), now)
		}
		for _, s := range f.Pods() {
			c := s.Pod.Capacity
			if s.Running > c.MaxBatch || s.KVCacheUsage < 0 || s.KVCacheUsage > 1 || s.GPUUtilization < 0 || s.GPUUtilization > 100 {
				t.Fatalf("at %ds pod %s out of bounds: %+v", sec, s.Pod.Name, s)
			}
		}
	}
	if !replay.Done() {
		t.Fatal("replay not done after the slice")
	}
	return f, submitted
}

func TestVirtualTimeReplayOfATraceSlice(t *testing.T) {
	f, submitted := runTraceSlice(t, 42)
	if submitted < 600 {
		t.Fatalf("only %d requests in two minutes at 1.5x", submitted)
	}

	// Every request is accounted for: refused at the gateway, finished, or still on a pod.
	accounted := int(f.GatewayCount("ns", "llm", "blue", CodeUnavailable) + f.GatewayCount("ns", "llm", "green", CodeUnavailable))
	stats := map[string]PodStatus{}
	for _, s := range f.Pods() {
		stats[s.Pod.Name] = s
		accounted += s.Running + s.Waiting
		for _, n := range s.Success {
			accounted += int(n)
		}
	}
	if accounted != submitted {
		t.Errorf("accounted %d requests, submitted %d", accounted, submitted)
	}

	// Green takes about 20% and is slower and failing; blue-3 joined once loaded.
	green := stats["green-1"]
	var blueDone, greenDone uint64
	for _, n := range green.Success {
		greenDone += n
	}
	for _, name := range []string{"blue-1", "blue-2", "blue-3"} {
		for _, n := range stats[name].Success {
			blueDone += n
		}
	}
	share := float64(greenDone) / float64(greenDone+blueDone)
	if share < 0.15 || share > 0.25 {
		t.Errorf("green served %.2f of the requests, want about 0.2", share)
	}
	if green.Success[FinishAbort] == 0 || stats["blue-1"].Success[FinishAbort] != 0 {
		t.Errorf("aborts: green %d blue-1 %d, want some on green only", green.Success[FinishAbort], stats["blue-1"].Success[FinishAbort])
	}
	if ratio := float64(green.Success[FinishAbort]) / float64(greenDone); ratio < 0.05 || ratio > 0.16 {
		t.Errorf("green error ratio %.3f, want about 0.1", ratio)
	}
	blueTTFT := stats["blue-1"].TTFTSum / float64(stats["blue-1"].TTFTCount)
	greenTTFT := green.TTFTSum / float64(green.TTFTCount)
	if greenTTFT < 2*blueTTFT {
		t.Errorf("green mean TTFT %v, want well above blue's %v", greenTTFT, blueTTFT)
	}
	if stats["blue-3"].TTFTCount == 0 {
		t.Error("blue-3 never served after loading")
	}
	if stats["blue-1"].Success[FinishLength] == 0 {
		t.Error("no request reached max tokens 512 (finished_reason=length)")
	}

	// The window reports the whole run.
	w := f.TakeWindow()
	if len(w) != 1 || w[0].Requests != submitted || !w[0].HasTTFT || w[0].Pods["blue"].Serving != 3 || w[0].Duration != 150*time.Second {
		t.Errorf("window %+v", w)
	}
	if again := f.TakeWindow(); again[0].Requests != 0 {
		t.Errorf("a second window still counts %d requests", again[0].Requests)
	}
}

func TestVirtualTimeReplayIsDeterministic(t *testing.T) {
	a, na := runTraceSlice(t, 3)
	b, nb := runTraceSlice(t, 3)
	if na != nb || !reflect.DeepEqual(a.Pods(), b.Pods()) {
		t.Errorf("two runs with seed 3 differ")
	}
}
