package fleet

import (
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// podOpt changes a test pod.
type podOpt func(*Pod)

func withColor(c string) podOpt            { return func(p *Pod) { p.Color = c } }
func withLoadDelay(d time.Duration) podOpt { return func(p *Pod) { p.LoadDelay = d } }
func withProfile(pr Profile) podOpt        { return func(p *Pod) { p.Profile = pr } }
func withCapacity(c Capacity) podOpt       { return func(p *Pod) { p.Capacity = c } }
func notReady() podOpt                     { return func(p *Pod) { p.Ready = false; p.ReadySince = time.Time{} } }

// newPod is a Ready, loaded blue pod of ModelServer "llm" in namespace "ns".
func newPod(name string, opts ...podOpt) Pod {
	p := Pod{
		Namespace: "ns", Name: name, UID: "uid-" + name, ModelServer: "llm", Color: "blue",
		Revision: "r1", ModelName: "llama", Container: "vllm", Node: "node-1", GPUs: 1,
		Ready: true, ReadySince: t0.Add(-time.Hour),
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func newFleet(pods ...Pod) *Fleet {
	f := New(Config{Step: 5 * time.Millisecond, Seed: 1}, t0)
	for _, p := range pods {
		f.SetPod(p)
	}
	f.SetWeights("ns", "llm", map[string]int32{"blue": 100, "green": 0})
	return f
}

func podStatus(t *testing.T, f *Fleet, name string) PodStatus {
	t.Helper()
	for _, s := range f.Pods() {
		if s.Pod.Name == name {
			return s
		}
	}
	t.Fatalf("pod %s not in fleet", name)
	return PodStatus{}
}

func TestReplicaModel(t *testing.T) {
	small := Capacity{PrefillTokensPerSecond: 10000, DecodeTokensPerSecond: 1000, MinInterTokenLatency: 10 * time.Millisecond, MaxBatch: 4, KVCacheTokens: 100000}
	tests := []struct {
		name string
		pod  Pod
		// burst requests submitted at t0, each ctx/gen tokens
		burst, ctx, gen int
		after           time.Duration
		check           func(t *testing.T, f *Fleet, outcomes []Outcome)
	}{
		{
			name: "a burst within the batch size runs with nothing waiting",
			pod:  newPod("a", withCapacity(small)), burst: 3, ctx: 100, gen: 500, after: 200 * time.Millisecond,
			check: func(t *testing.T, f *Fleet, _ []Outcome) {
				s := podStatus(t, f, "a")
				if s.Running != 3 || s.Waiting != 0 {
					t.Errorf("running=%d waiting=%d, want 3 and 0", s.Running, s.Waiting)
				}
			},
		},
		{
			name: "queueing grows past the batch size",
			pod:  newPod("a", withCapacity(small)), burst: 20, ctx: 100, gen: 500, after: 200 * time.Millisecond,
			check: func(t *testing.T, f *Fleet, _ []Outcome) {
				s := podStatus(t, f, "a")
				if s.Running != 4 || s.Waiting != 16 {
					t.Errorf("running=%d waiting=%d, want 4 and 16", s.Running, s.Waiting)
				}
			},
		},
		{
			name: "queueing grows when the KV cache cannot hold another sequence",
			pod: newPod("a", withCapacity(Capacity{PrefillTokensPerSecond: 10000, DecodeTokensPerSecond: 1000,
				MinInterTokenLatency: 10 * time.Millisecond, MaxBatch: 64, KVCacheTokens: 2500})),
			burst: 5, ctx: 400, gen: 600, after: 100 * time.Millisecond,
			check: func(t *testing.T, f *Fleet, _ []Outcome) {
				s := podStatus(t, f, "a")
				if s.Running != 2 || s.Waiting != 3 {
					t.Errorf("running=%d waiting=%d, want 2 (2x1000 tokens of 2500) and 3", s.Running, s.Waiting)
				}
			},
		},
		{
			name: "a cold pod serves nothing: requests fail with 503 and it exposes no vLLM series",
			pod:  newPod("a", withLoadDelay(time.Minute), func(p *Pod) { p.ReadySince = t0 }), burst: 5, ctx: 100, gen: 10, after: time.Second,
			check: func(t *testing.T, f *Fleet, outcomes []Outcome) {
				for _, o := range outcomes {
					if o.Code != CodeUnavailable || o.Pod != "" {
						t.Errorf("outcome %+v, want 503 without a pod", o)
					}
				}
				if got := f.GatewayCount("ns", "llm", "blue", CodeUnavailable); got != 5 {
					t.Errorf("gateway 503 count %d, want 5", got)
				}
				if loaded, known := f.Loaded("ns", "a", t0.Add(59*time.Second)); loaded || !known {
					t.Errorf("loaded=%v known=%v before the load delay, want false true", loaded, known)
				}
				if loaded, _ := f.Loaded("ns", "a", t0.Add(time.Minute)); !loaded {
					t.Errorf("not loaded after the load delay")
				}
				if text := scrape(t, f); strings.Contains(text, `vllm:num_requests_running{`) {
					t.Errorf("cold pod exposes vLLM series:\n%s", text)
				}
			},
		},
		{
			name: "a pod held by a readiness gate loads its model (its warm-up check passes) and takes no traffic",
			pod:  newPod("a", withLoadDelay(time.Minute), func(p *Pod) { p.Ready, p.ReadySince = false, t0 }), burst: 2, ctx: 100, gen: 10,
			after: time.Second,
			check: func(t *testing.T, f *Fleet, outcomes []Outcome) {
				if outcomes[0].Code != CodeUnavailable {
					t.Errorf("outcome %+v, want 503", outcomes[0])
				}
				if loaded, _ := f.Loaded("ns", "a", t0.Add(time.Minute)); !loaded {
					t.Errorf("not loaded after the load delay: a warm-up gate waiting for it would never open")
				}
			},
		},
		{
			name: "a not-Ready pod takes no traffic",
			pod:  newPod("a", notReady()), burst: 2, ctx: 100, gen: 10, after: time.Second,
			check: func(t *testing.T, f *Fleet, outcomes []Outcome) {
				if outcomes[0].Code != CodeUnavailable {
					t.Errorf("outcome %+v, want 503", outcomes[0])
				}
			},
		},
		{
			name: "a lone request's TTFT is its prefill time and its e2e adds one ITL per further token",
			pod:  newPod("a", withCapacity(small)), burst: 1, ctx: 1000, gen: 11, after: time.Second,
			check: func(t *testing.T, f *Fleet, _ []Outcome) {
				s := podStatus(t, f, "a")
				if s.TTFTCount != 1 || math.Abs(s.TTFTSum-0.1) > 0.006 {
					t.Errorf("ttft count=%d sum=%v, want 1 and 0.1s (1000 tokens at 10000/s)", s.TTFTCount, s.TTFTSum)
				}
				r := f.pods["ns/a"]
				if e2e := r.e2e.sum; math.Abs(e2e-0.2) > 0.011 {
					t.Errorf("e2e %v, want 0.2s (0.1 prefill + 10 tokens x 10ms)", e2e)
				}
				if r.itl.count != 10 || r.generatedTokens != 11 || r.promptTokens != 1000 {
					t.Errorf("itl count=%d generated=%d prompt=%d, want 10, 11, 1000", r.itl.count, r.generatedTokens, r.promptTokens)
				}
				if s.Success[FinishStop] != 1 {
					t.Errorf("success %v, want one stop", s.Success)
				}
			},
		},
		{
			name: "every request fails as abort with a 500 when the revision's error probability is 1",
			pod:  newPod("a", withProfile(Profile{ErrorProbability: 1})), burst: 7, ctx: 100, gen: 5, after: 2 * time.Second,
			check: func(t *testing.T, f *Fleet, _ []Outcome) {
				s := podStatus(t, f, "a")
				if s.Success[FinishAbort] != 7 || s.Success[FinishStop] != 0 {
					t.Errorf("success %v, want 7 abort", s.Success)
				}
				if got := f.GatewayCount("ns", "llm", "blue", CodeServerError); got != 7 {
					t.Errorf("gateway 500 count %d, want 7", got)
				}
				if s.TTFTCount != 0 {
					t.Errorf("aborted requests observed a TTFT")
				}
			},
		},
		{
			name: "KV-cache use is the tokens the running requests reserve over the capacity",
			pod: newPod("a", withCapacity(Capacity{PrefillTokensPerSecond: 100000, DecodeTokensPerSecond: 1000,
				MinInterTokenLatency: time.Second, MaxBatch: 8, KVCacheTokens: 10000})),
			burst: 2, ctx: 1000, gen: 1000, after: 100 * time.Millisecond,
			check: func(t *testing.T, f *Fleet, _ []Outcome) {
				// Prefill is done in 20ms; at 1 token/s each request holds 1000 + 1 tokens, and
				// reserves its whole sequence, 1000 + 1000: what the scheduler counts.
				s := podStatus(t, f, "a")
				if math.Abs(s.KVCacheUsage-0.4) > 1e-9 {
					t.Errorf("kv usage %v, want 0.4", s.KVCacheUsage)
				}
			},
		},
		{
			name: "an idle loaded pod reports no GPU utilization",
			pod:  newPod("a"), burst: 0, after: time.Second,
			check: func(t *testing.T, f *Fleet, _ []Outcome) {
				if u := podStatus(t, f, "a").GPUUtilization; u != 0 {
					t.Errorf("gpu util %v, want 0", u)
				}
			},
		},
		{
			name: "a saturated pod reports near full GPU utilization",
			pod:  newPod("a"), burst: 200, ctx: 200, gen: 2000, after: 5 * time.Second,
			check: func(t *testing.T, f *Fleet, _ []Outcome) {
				if u := podStatus(t, f, "a").GPUUtilization; u < 95 || u > 100 {
					t.Errorf("gpu util %v, want 95..100", u)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(tt.pod)
			var outcomes []Outcome
			for range tt.burst {
				outcomes = append(outcomes, f.Submit("ns", "llm", Request{Arrival: t0, ContextTokens: tt.ctx, GeneratedTokens: tt.gen}))
			}
			f.Advance(t0.Add(tt.after))
			tt.check(t, f, outcomes)
		})
	}
}

// meanTTFT runs the same load on a pod with a profile and returns the mean TTFT.
func meanTTFT(t *testing.T, pr Profile) (float64, float64) {
	t.Helper()
	f := newFleet(newPod("a", withProfile(pr)))
	for i := range 50 {
		f.Submit("ns", "llm", Request{Arrival: t0.Add(time.Duration(i) * 50 * time.Millisecond), ContextTokens: 1500, GeneratedTokens: 100})
	}
	f.Advance(t0.Add(30 * time.Second))
	s := podStatus(t, f, "a")
	r := f.pods["ns/a"]
	if s.TTFTCount != 50 {
		t.Fatalf("ttft count %d, want 50", s.TTFTCount)
	}
	return s.TTFTSum / float64(s.TTFTCount), r.itl.sum / float64(r.itl.count)
}

func TestSlowRevisionHasHigherLatency(t *testing.T) {
	baseTTFT, baseITL := meanTTFT(t, Profile{})
	slowTTFT, slowITL := meanTTFT(t, Profile{LatencyMultiplier: 2})
	if slowTTFT < 1.9*baseTTFT {
		t.Errorf("slow TTFT %v, want about twice %v or more", slowTTFT, baseTTFT)
	}
	if slowITL < 1.9*baseITL {
		t.Errorf("slow ITL %v, want about twice %v", slowITL, baseITL)
	}
}

func TestInterTokenLatencyGrowsWithBatch(t *testing.T) {
	itlAt := func(batch int) float64 {
		f := newFleet(newPod("a"))
		for range batch {
			f.Submit("ns", "llm", Request{Arrival: t0, ContextTokens: 1, GeneratedTokens: 400})
		}
		f.Advance(t0.Add(2 * time.Second))
		r := f.pods["ns/a"]
		return r.itl.sum / float64(r.itl.count)
	}
	one, many := itlAt(1), itlAt(120)
	if math.Abs(one-0.015) > 1e-9 {
		t.Errorf("ITL of a lone sequence %v, want the minimum 15ms", one)
	}
	if math.Abs(many-120.0/3000) > 0.001 {
		t.Errorf("ITL of a batch of 120 %v, want about 120/3000 tokens/s = 40ms", many)
	}
}

func TestRouter(t *testing.T) {
	tests := []struct {
		name    string
		pods    []Pod
		weights map[string]int32
		check   func(t *testing.T, f *Fleet, outcomes []Outcome)
	}{
		{
			name:    "splits requests between colors in the weights' exact proportions",
			pods:    []Pod{newPod("b1"), newPod("g1", withColor("green"))},
			weights: map[string]int32{"blue": 90, "green": 10},
			check: func(t *testing.T, _ *Fleet, outcomes []Outcome) {
				n := map[string]int{}
				for _, o := range outcomes {
					n[o.Color]++
				}
				if n["blue"] != 180 || n["green"] != 20 {
					t.Errorf("split %v, want blue 180 green 20", n)
				}
			},
		},
		{
			name:    "counts requests for a color with no serving pod as 503 at the gateway",
			pods:    []Pod{newPod("b1"), newPod("g1", withColor("green"), withLoadDelay(time.Hour), func(p *Pod) { p.ReadySince = t0 })},
			weights: map[string]int32{"blue": 50, "green": 50},
			check: func(t *testing.T, f *Fleet, _ []Outcome) {
				if got := f.GatewayCount("ns", "llm", "green", CodeUnavailable); got != 100 {
					t.Errorf("green 503s %d, want 100", got)
				}
				if got := f.GatewayCount("ns", "llm", "blue", CodeUnavailable); got != 0 {
					t.Errorf("blue 503s %d, want 0", got)
				}
			},
		},
		{
			name:    "answers 503 when every weight is zero",
			pods:    []Pod{newPod("b1")},
			weights: map[string]int32{"blue": 0, "green": 0},
			check: func(t *testing.T, _ *Fleet, outcomes []Outcome) {
				for _, o := range outcomes {
					if o.Code != CodeUnavailable {
						t.Fatalf("outcome %+v, want 503", o)
					}
				}
			},
		},
		{
			name:    "spreads a color's requests evenly over its serving pods",
			pods:    []Pod{newPod("b1"), newPod("b2"), newPod("b3"), newPod("b4", func(p *Pod) { p.Terminating = true })},
			weights: map[string]int32{"blue": 100},
			check: func(t *testing.T, _ *Fleet, outcomes []Outcome) {
				n := map[string]int{}
				for _, o := range outcomes {
					n[o.Pod]++
				}
				if len(n) != 3 || n["ns/b4"] != 0 {
					t.Fatalf("spread %v, want three pods and none on the terminating one", n)
				}
				for p, c := range n {
					if c < 60 || c > 74 {
						t.Errorf("pod %s got %d of 200, want about a third", p, c)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(tt.pods...)
			f.SetWeights("ns", "llm", tt.weights)
			var outcomes []Outcome
			for i := range 200 {
				outcomes = append(outcomes, f.Submit("ns", "llm", Request{Arrival: t0.Add(time.Duration(i) * 10 * time.Millisecond), ContextTokens: 100, GeneratedTokens: 20}))
			}
			tt.check(t, f, outcomes)
		})
	}
}

func TestDeletedPodLosesItsRequestsAndSeries(t *testing.T) {
	f := newFleet(newPod("a"), newPod("b"))
	for range 10 {
		f.Submit("ns", "llm", Request{Arrival: t0, ContextTokens: 100, GeneratedTokens: 1000})
	}
	f.Advance(t0.Add(time.Second))
	if !strings.Contains(scrape(t, f), `pod="b"`) {
		t.Fatal("pod b has no series before deletion")
	}
	f.DeletePod("ns", "b")
	if text := scrape(t, f); strings.Contains(text, `pod="b"`) {
		t.Errorf("deleted pod still has series:\n%s", text)
	}
	if got := f.GatewayCount("ns", "llm", "blue", CodeBadGateway); got != 5 {
		t.Errorf("502s %d, want the 5 requests pod b held", got)
	}
}

// TestAProfileWithAfterAppliesOnlyOnceThePodHasServedThatLong: a build that degrades in
// service serves at the neutral profile first.
func TestAProfileWithAfterAppliesOnlyOnceThePodHasServedThatLong(t *testing.T) {
	ready := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := Pod{Ready: true, ReadySince: ready, Profile: Profile{LatencyMultiplier: 3, ErrorProbability: 0.5, After: time.Minute}}
	if got := p.profileAt(ready.Add(59 * time.Second)); got.multiplier() != 1 || got.ErrorProbability != 0 {
		t.Errorf("before After: %+v, want the neutral profile", got)
	}
	if got := p.profileAt(ready.Add(time.Minute)); got.multiplier() != 3 || got.ErrorProbability != 0.5 {
		t.Errorf("after After: %+v, want the pod's profile", got)
	}
	p.Profile.After = 0
	if got := p.profileAt(ready); got.multiplier() != 3 {
		t.Errorf("without After: %+v, want the pod's profile at once", got)
	}
}
