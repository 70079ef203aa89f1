package fleet

import (
	"errors"
	"math"
	"testing"
	"time"
)

// drain reads a direct request's Results until its channel closes.
func drain(ch <-chan Result) []Result {
	var out []Result
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, r)
		default:
			return out
		}
	}
}

func TestSubmitToOutcomesMatchThePodsAccounting(t *testing.T) {
	f := New(Config{Step: 5 * time.Millisecond, Seed: 7, MaxTokens: 40}, t0)
	f.SetPod(newPod("a", withProfile(Profile{LatencyMultiplier: 1, ErrorProbability: 0.2})))
	f.SetPod(newPod("b"))
	var chans []<-chan Result
	for i := range 60 {
		at := t0.Add(time.Duration(i) * 20 * time.Millisecond)
		ch, err := f.SubmitTo("ns/a", Request{Arrival: at, ContextTokens: 100 + 37*i, GeneratedTokens: 1 + i})
		if err != nil {
			t.Fatalf("SubmitTo #%d: %v", i, err)
		}
		chans = append(chans, ch)
	}
	f.Advance(t0.Add(time.Minute))

	var tokens, prompt uint64
	var ttftSum float64
	reasons := map[string]uint64{}
	for i, ch := range chans {
		rs := drain(ch)
		if _, open := <-ch; open {
			t.Fatalf("request %d: channel not closed after its end", i)
		}
		if len(rs) == 0 || !rs[len(rs)-1].Done {
			t.Fatalf("request %d: no end in %+v", i, rs)
		}
		end := rs[len(rs)-1]
		reasons[end.Reason]++
		prompt += uint64(end.PromptTokens)
		tokens += uint64(end.Tokens)
		switch end.Reason {
		case FinishAbort:
			if len(rs) != 1 || end.Code != CodeServerError || end.Tokens != 0 || !end.Failed() {
				t.Errorf("request %d failed by the model: %+v", i, rs)
			}
		case FinishStop, FinishLength:
			if len(rs) != 2 || rs[0].Done || rs[0].Tokens != 1 || rs[0].FirstToken.IsZero() || rs[0].FirstToken != end.FirstToken {
				t.Errorf("request %d: want a first-token notice then the end, got %+v", i, rs)
			}
			want, reason := 1+i, FinishStop
			if want >= 40 {
				want, reason = 40, FinishLength
			}
			if end.Code != CodeOK || end.Tokens != want || end.Reason != reason || end.Failed() {
				t.Errorf("request %d: end %+v, want %d tokens, reason %s", i, end, want, reason)
			}
			if end.Finished.Before(end.FirstToken) || !end.FirstToken.After(end.Arrival) {
				t.Errorf("request %d: times out of order: %+v", i, end)
			}
			ttftSum += end.FirstToken.Sub(end.Arrival).Seconds()
		default:
			t.Errorf("request %d: reason %q", i, end.Reason)
		}
	}
	s := podStatus(t, f, "a")
	if s.GeneratedTokens != tokens || s.PromptTokens != prompt {
		t.Errorf("pod counts %d generated / %d prompt tokens, the results %d / %d", s.GeneratedTokens, s.PromptTokens, tokens, prompt)
	}
	for _, r := range finishReasons {
		if s.Success[r] != reasons[r] {
			t.Errorf("pod counts %d %s, the results %d", s.Success[r], r, reasons[r])
		}
	}
	if reasons[FinishAbort] == 0 || reasons[FinishLength] == 0 || reasons[FinishStop] == 0 {
		t.Errorf("want every finish reason among 60 requests at 20%% errors, got %v", reasons)
	}
	if s.TTFTCount != reasons[FinishStop]+reasons[FinishLength] || math.Abs(s.TTFTSum-ttftSum) > 1e-6 {
		t.Errorf("pod TTFT count %d sum %.6f, the results %d %.6f", s.TTFTCount, s.TTFTSum, reasons[FinishStop]+reasons[FinishLength], ttftSum)
	}
	if b := podStatus(t, f, "b"); b.PromptTokens != 0 {
		t.Errorf("pod b got work: %+v", b)
	}
	for _, code := range []string{CodeOK, CodeServerError, CodeBadGateway, CodeUnavailable} {
		if n := f.GatewayCount("ns", "llm", "blue", code); n != 0 {
			t.Errorf("the simulated Gateway counted %d %s for requests it did not route", n, code)
		}
	}
	w := f.TakeWindow()
	if len(w) != 1 || w[0].Requests != 60 || w[0].Errors != int(reasons[FinishAbort]) {
		t.Errorf("window %+v, want 60 requests and %d errors", w, reasons[FinishAbort])
	}
}

func TestSubmitToRefusesUnknownAndLoadingPods(t *testing.T) {
	f := newFleet(newPod("cold", withLoadDelay(time.Hour), func(p *Pod) { p.ReadySince = t0 }))
	if _, err := f.SubmitTo("ns/nowhere", Request{Arrival: t0}); !errors.Is(err, ErrUnknownPod) {
		t.Errorf("unknown pod: err %v, want ErrUnknownPod", err)
	}
	if _, err := f.SubmitTo("ns/cold", Request{Arrival: t0.Add(time.Minute)}); !errors.Is(err, ErrLoading) {
		t.Errorf("loading pod: err %v, want ErrLoading", err)
	}
	ch, err := f.SubmitTo("ns/cold", Request{Arrival: t0.Add(time.Hour), ContextTokens: 10, GeneratedTokens: 3})
	if err != nil {
		t.Fatalf("loaded pod: %v", err)
	}
	f.Advance(t0.Add(time.Hour + time.Second))
	if rs := drain(ch); len(rs) != 2 || rs[1].Code != CodeOK || rs[1].Tokens != 3 {
		t.Errorf("loaded pod: results %+v", rs)
	}
}

func TestSubmitToServesANotReadyOrTerminatingPodAsVLLMWould(t *testing.T) {
	f := newFleet(newPod("gated", func(p *Pod) { p.Ready = false }), newPod("leaving", func(p *Pod) { p.Terminating = true }))
	for i, key := range []string{"ns/gated", "ns/leaving"} {
		at := t0.Add(time.Duration(i) * time.Second)
		ch, err := f.SubmitTo(key, Request{Arrival: at, ContextTokens: 10, GeneratedTokens: 2})
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		f.Advance(at.Add(time.Second))
		if rs := drain(ch); len(rs) != 2 || rs[1].Code != CodeOK {
			t.Errorf("%s: results %+v", key, rs)
		}
	}
}

func TestSubmitToEndsWithBadGatewayWhenThePodGoes(t *testing.T) {
	f := newFleet(newPod("a"))
	var chans []<-chan Result
	for range 3 {
		ch, err := f.SubmitTo("ns/a", Request{Arrival: t0, ContextTokens: 1000, GeneratedTokens: 500})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	f.Advance(t0.Add(200 * time.Millisecond))
	f.DeletePod("ns", "a")
	started := 0
	for i, ch := range chans {
		rs := drain(ch)
		end := rs[len(rs)-1]
		if !end.Done || end.Code != CodeBadGateway || end.Reason != "" || end.Tokens >= 500 || !end.Failed() {
			t.Errorf("request %d: results %+v, want a 502 end before the last token", i, rs)
		}
		if end.Tokens > 0 {
			started++
		}
		if _, open := <-ch; open {
			t.Errorf("request %d: channel left open", i)
		}
	}
	if started == 0 {
		t.Error("no request had started generating when the pod went: the test shows nothing")
	}
	if n := f.GatewayCount("ns", "llm", "blue", CodeBadGateway); n != 0 {
		t.Errorf("the simulated Gateway counted %d 502s for requests it did not route", n)
	}
}

func TestOnTokensReportsEveryStepsTokens(t *testing.T) {
	f := newFleet(newPod("a"))
	var seen []int
	ch, err := f.SubmitTo("ns/a", Request{Arrival: t0, ContextTokens: 10, GeneratedTokens: 30, OnTokens: func(n int) { seen = append(seen, n) }})
	if err != nil {
		t.Fatal(err)
	}
	f.Advance(t0.Add(5 * time.Second))
	rs := drain(ch)
	if len(seen) < 3 || seen[0] != 1 || seen[len(seen)-1] != 30 || len(rs) != 2 || rs[1].Tokens != 30 {
		t.Fatalf("OnTokens saw %v, results %+v: want 1 first, 30 last, several steps", seen, rs)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Errorf("OnTokens went %d then %d", seen[i-1], seen[i])
		}
	}
}

func TestCancelDropsTheRequestAsAnAbort(t *testing.T) {
	f := newFleet(newPod("a", withCapacity(Capacity{MaxBatch: 1})))
	gone1, gone2 := make(chan struct{}), make(chan struct{})
	running, err := f.SubmitTo("ns/a", Request{Arrival: t0, ContextTokens: 10, GeneratedTokens: 500, Cancel: gone1})
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := f.SubmitTo("ns/a", Request{Arrival: t0, ContextTokens: 10, GeneratedTokens: 5, Cancel: gone2})
	if err != nil {
		t.Fatal(err)
	}
	f.Advance(t0.Add(time.Second))
	if s := podStatus(t, f, "a"); s.Running != 1 || s.Waiting != 1 {
		t.Fatalf("running %d waiting %d, want 1 and 1 (a batch of 1)", s.Running, s.Waiting)
	}
	close(gone1)
	close(gone2)
	f.Advance(t0.Add(time.Second + 10*time.Millisecond))
	for name, ch := range map[string]<-chan Result{"running": running, "waiting": waiting} {
		rs := drain(ch)
		end := rs[len(rs)-1]
		if !end.Done || end.Code != CodeClientClosed || end.Reason != FinishAbort {
			t.Errorf("%s request: %+v, want a 499 abort", name, rs)
		}
	}
	s := podStatus(t, f, "a")
	if s.Running != 0 || s.Waiting != 0 || s.Success[FinishAbort] != 2 || s.KVCacheUsage != 0 {
		t.Errorf("after the clients went: %+v", s)
	}
	w := f.TakeWindow()
	if len(w) != 1 || w[0].Errors != 0 {
		t.Errorf("window %+v: a client going away is no error of the pod", w)
	}
}

func TestCountGatewayResponseCountsARealGatewaysAnswers(t *testing.T) {
	f := newFleet(newPod("a"))
	f.CountGatewayResponse("ns", "llm", "blue", CodeOK)
	f.CountGatewayResponse("ns", "llm", "blue", CodeOK)
	f.CountGatewayResponse("ns", "llm", "", "error")
	if a, b := f.GatewayCount("ns", "llm", "blue", CodeOK), f.GatewayCount("ns", "llm", "", "error"); a != 2 || b != 1 {
		t.Errorf("counted %d blue 200 and %d errors, want 2 and 1", a, b)
	}
}
