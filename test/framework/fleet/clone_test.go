package fleet

import (
	"reflect"
	"testing"
	"time"
)

// cloneScenario is a fleet of two blue pods and an error-prone, slower green pod taking 30% (so
// that the random source matters), fed the trace's first minutes.
func cloneScenario(t *testing.T) (*Fleet, []Arrival) {
	t.Helper()
	tr, err := LoadTrace("testdata/azure-conv-5min.csv")
	if err != nil {
		t.Fatal(err)
	}
	rp, err := NewReplay(tr, ReplayOptions{RateScale: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	f := New(Config{Seed: 9, Step: 50 * time.Millisecond}, t0)
	f.SetPod(newPod("blue-1"))
	f.SetPod(newPod("blue-2"))
	f.SetPod(newPod("green-1", withColor("green"), withProfile(Profile{LatencyMultiplier: 2, ErrorProbability: 0.2})))
	f.SetWeights("ns", "llm", map[string]int32{"blue": 70, "green": 30})
	return f, rp.Until(4 * time.Minute)
}

// drive submits the arrivals in [from, to) and advances to, returning what every call answered.
func drive(f *Fleet, arr []Arrival, from, to time.Duration) []any {
	var out []any
	for _, a := range arr {
		if a.At >= from && a.At < to {
			out = append(out, f.Submit("ns", "llm", Request{Arrival: t0.Add(a.At), ContextTokens: a.ContextTokens, GeneratedTokens: a.GeneratedTokens}))
		}
	}
	f.Advance(t0.Add(to))
	out = append(out, f.Pods(), f.TakeWindow(), f.GatewayCount("ns", "llm", "green", CodeServerError), f.Now())
	return out
}

// TestACloneContinuesAsTheFleetWouldAndAlone: after two minutes, a clone and the fleet given the
// same next two minutes answer every call alike (queues, batches, histograms, the error draws);
// and a clone given other work leaves the fleet exactly as a fleet that was never cloned.
func TestACloneContinuesAsTheFleetWouldAndAlone(t *testing.T) {
	f, arr := cloneScenario(t)
	drive(f, arr, 0, 2*time.Minute)
	c := f.Clone()
	if got, want := drive(c, arr, 2*time.Minute, 4*time.Minute), drive(f, arr, 2*time.Minute, 4*time.Minute); !reflect.DeepEqual(got, want) {
		t.Fatalf("the clone and the fleet answered differently")
	}

	f, arr = cloneScenario(t)
	never, _ := cloneScenario(t)
	drive(f, arr, 0, 2*time.Minute)
	drive(never, arr, 0, 2*time.Minute)
	other := f.Clone()
	other.SetPod(newPod("blue-3"))
	other.DeletePod("ns", "blue-1")
	other.SetWeights("ns", "llm", map[string]int32{"blue": 100})
	drive(other, arr, 2*time.Minute, 3*time.Minute)
	if got, want := drive(f, arr, 2*time.Minute, 4*time.Minute), drive(never, arr, 2*time.Minute, 4*time.Minute); !reflect.DeepEqual(got, want) {
		t.Fatalf("work given to a clone changed the fleet")
	}
}

// TestACloneDoesNotTalkToTheOriginalsClients: a request given to one pod (SubmitTo) with a
// token callback, cloned mid-flight and run to its end in the clone, sends nothing to its
// client; the original then serves it to the client as if no clone existed.
func TestACloneDoesNotTalkToTheOriginalsClients(t *testing.T) {
	f := newFleet(newPod("a"))
	calls := 0
	ch, err := f.SubmitTo("ns/a", Request{Arrival: t0, ContextTokens: 10, GeneratedTokens: 30, OnTokens: func(int) { calls++ }})
	if err != nil {
		t.Fatal(err)
	}
	c := f.Clone()
	c.Advance(t0.Add(5 * time.Second))
	if calls != 0 || len(ch) != 0 {
		t.Fatalf("the clone called the token callback %d times and sent %d results to the client", calls, len(ch))
	}
	if s := c.Pods(); len(s) != 1 || s[0].Running+s[0].Waiting != 0 || s[0].GeneratedTokens != 30 {
		t.Fatalf("the clone did not serve the request: %+v", s)
	}
	f.Advance(t0.Add(5 * time.Second))
	if rs := drain(ch); calls == 0 || len(rs) != 2 || rs[1].Tokens != 30 {
		t.Fatalf("the original: %d callbacks, results %+v; want the request served to its client", calls, rs)
	}
}
