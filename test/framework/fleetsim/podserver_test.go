package fleetsim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/modelship/modelship/test/framework/fleet"
)

// simPod is a Ready pod of ModelServer llm whose model loaded long ago (loadDelay 0) or loads
// in loadDelay from now.
func simPod(name, color string, loadDelay time.Duration, profile fleet.Profile) fleet.Pod {
	return fleet.Pod{Namespace: "ns", Name: name, UID: "uid-" + name, ModelServer: "llm", Color: color,
		ModelName: "llama", Container: "vllm", Node: "n1", GPUs: 1, Ready: true,
		ReadySince: time.Now().Add(-time.Second), LoadDelay: loadDelay, Profile: profile}
}

// runFleet advances f in real time, as the simulator's loop does, until the test ends.
func runFleet(t *testing.T, f *fleet.Fleet) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				f.Advance(time.Now())
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// servePods serves f's pods a (127.0.0.2), b (127.0.0.3) and cold (127.0.0.4, loading for an
// hour) on free ports.
func servePods(t *testing.T, f *fleet.Fleet) (*PodServers, map[string]string) {
	t.Helper()
	s := &PodServers{Fleet: f, Log: logr.Discard()}
	t.Cleanup(s.Close)
	err := s.Sync(context.Background(), []PodEndpoint{
		{Namespace: "ns", Name: "a", IP: "127.0.0.2"},
		{Namespace: "ns", Name: "b", IP: "127.0.0.3"},
		{Namespace: "ns", Name: "cold", IP: "127.0.0.4"},
	})
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	addrs := s.Addresses()
	for _, k := range []string{"ns/a", "ns/b", "ns/cold"} {
		if !strings.HasPrefix(addrs[k], map[string]string{"ns/a": "127.0.0.2:", "ns/b": "127.0.0.3:", "ns/cold": "127.0.0.4:"}[k]) {
			t.Fatalf("pod %s bound at %q", k, addrs[k])
		}
	}
	return s, addrs
}

func newSimFleet(t *testing.T, pods ...fleet.Pod) *fleet.Fleet {
	t.Helper()
	f := fleet.New(fleet.Config{Step: 5 * time.Millisecond, Seed: 3, MaxTokens: 64}, time.Now())
	for _, p := range pods {
		f.SetPod(p)
	}
	runFleet(t, f)
	return f
}

type reply struct {
	code   int
	header http.Header
	body   string
}

func do(t *testing.T, method, url, body string) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: GuardedTransport(4)}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading: %v", method, url, err)
	}
	return reply{resp.StatusCode, resp.Header, string(b)}
}

func TestPodServersAnswerHealthModelsAndMetricsPerPod(t *testing.T) {
	f := newSimFleet(t, simPod("a", "blue", 0, fleet.Profile{}), simPod("b", "green", 0, fleet.Profile{}), simPod("cold", "green", time.Hour, fleet.Profile{}))
	_, addrs := servePods(t, f)
	a, cold := "http://"+addrs["ns/a"], "http://"+addrs["ns/cold"]

	if r := do(t, "GET", a+"/health", ""); r.code != 200 || r.header.Get(HeaderPod) != "ns/a" || r.header.Get(HeaderColor) != "blue" || r.header.Get(HeaderModelServer) != "llm" {
		t.Errorf("GET /health of a loaded pod: %d %v", r.code, r.header)
	}
	for _, path := range []string{"/health", "/v1/models", "/metrics", "/v1/completions"} {
		method, body := "GET", ""
		if path == "/v1/completions" {
			method, body = "POST", `{"prompt":"hi","max_tokens":2}`
		}
		if r := do(t, method, cold+path, body); r.code != http.StatusServiceUnavailable || r.header.Get(HeaderColor) != "green" {
			t.Errorf("%s %s of a loading pod: %d %q, want 503", method, path, r.code, r.body)
		}
	}
	r := do(t, "GET", a+"/v1/models", "")
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	if err := json.Unmarshal([]byte(r.body), &models); err != nil || r.code != 200 || len(models.Data) != 1 || models.Data[0].ID != "llama" {
		t.Errorf("GET /v1/models: %d %s", r.code, r.body)
	}
	if r := do(t, "POST", a+"/v1/completions", `{"prompt":"one two three","max_tokens":3}`); r.code != 200 {
		t.Fatalf("completion: %d %s", r.code, r.body)
	}
	m := do(t, "GET", a+"/metrics", "").body
	for _, want := range []string{`vllm:num_requests_running{model_name="llama",namespace="ns",pod="a"} 0`,
		`vllm:request_success_total{finished_reason="stop",model_name="llama",namespace="ns",pod="a"} 1`,
		`vllm:generation_tokens_total{model_name="llama",namespace="ns",pod="a"} 3`,
		`vllm:prompt_tokens_total{model_name="llama",namespace="ns",pod="a"} 3`} {
		if !strings.Contains(m, want) {
			t.Errorf("pod a's /metrics lacks %s:\n%s", want, m)
		}
	}
	if strings.Contains(m, `pod="b"`) || strings.Contains(m, "DCGM_") || strings.Contains(m, fleet.MetricGatewayResponses) {
		t.Errorf("pod a's /metrics holds series that are not its vLLM's:\n%s", m)
	}
	if r := do(t, "GET", a+"/nowhere", ""); r.code != 404 {
		t.Errorf("GET /nowhere: %d", r.code)
	}
}

func TestPodServersAnswerCompletions(t *testing.T) {
	f := newSimFleet(t, simPod("a", "blue", 0, fleet.Profile{}), simPod("b", "green", 0, fleet.Profile{ErrorProbability: 1}), simPod("cold", "green", time.Hour, fleet.Profile{}))
	_, addrs := servePods(t, f)
	a, b := "http://"+addrs["ns/a"], "http://"+addrs["ns/b"]

	type usage struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
	}
	var resp struct {
		Object  string
		Choices []struct {
			Text         string
			FinishReason string `json:"finish_reason"`
			Message      struct{ Role, Content string }
		}
		Usage usage
	}
	tests := []struct {
		name, path, body, object string
		want                     usage
		reason                   string
	}{
		{"a prompt's words are its tokens", "/v1/completions", `{"model":"llama","prompt":"one two three four","max_tokens":5}`, "text_completion", usage{4, 5}, "stop"},
		{"the extension sets the prompt length", "/v1/completions", `{"prompt":"x","max_tokens":7,"modelship_sim":{"prompt_tokens":1234}}`, "text_completion", usage{1234, 7}, "stop"},
		{"the fleet's cap ends with length", "/v1/completions", `{"prompt":"x","max_tokens":600}`, "text_completion", usage{1, 64}, "length"},
		{"without max_tokens the default", "/v1/completions", `{"prompt":["a b","c"]}`, "text_completion", usage{3, DefaultMaxTokens}, "stop"},
		{"chat messages' words", "/v1/chat/completions", `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hello there you"}]}],"max_completion_tokens":4}`, "chat.completion", usage{5, 4}, "stop"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, "POST", a+tc.path, tc.body)
			resp.Choices = nil
			if err := json.Unmarshal([]byte(r.body), &resp); err != nil || r.code != 200 || len(resp.Choices) != 1 {
				t.Fatalf("%d %s (%v)", r.code, r.body, err)
			}
			c := resp.Choices[0]
			content := c.Text
			if tc.object == "chat.completion" {
				content = c.Message.Content
				if c.Message.Role != "assistant" {
					t.Errorf("role %q", c.Message.Role)
				}
			}
			if resp.Object != tc.object || resp.Usage != tc.want || c.FinishReason != tc.reason || len(strings.Fields(content)) != tc.want.Completion {
				t.Errorf("got object %s usage %+v reason %s text %d words, want %s %+v %s", resp.Object, resp.Usage, c.FinishReason, len(strings.Fields(content)), tc.object, tc.want, tc.reason)
			}
			if r.header.Get(HeaderPod) != "ns/a" || r.header.Get(HeaderColor) != "blue" {
				t.Errorf("headers %v", r.header)
			}
		})
	}
	for _, body := range []string{`{"prompt":"a","max_tokens":3}`, `{"prompt":"a","max_tokens":3,"stream":true}`} {
		if r := do(t, "POST", b+"/v1/completions", body); r.code != 500 || r.header.Get(HeaderColor) != "green" || !strings.Contains(r.body, `"error"`) {
			t.Errorf("a failing pod answers %s with %d %s, want 500", body, r.code, r.body)
		}
	}
	for _, body := range []string{`{"prompt":`, `{"prompt":"a","max_tokens":0}`} {
		if r := do(t, "POST", a+"/v1/completions", body); r.code != 400 {
			t.Errorf("bad request %s: %d %s", body, r.code, r.body)
		}
	}
	if r := do(t, "POST", a+"/v1/chat/completions", `{"prompt":"a"}`); r.code != 400 {
		t.Errorf("chat without messages: %d", r.code)
	}
}

// events reads a server-sent event stream's data lines.
func events(t *testing.T, body io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not a data line: %q", line)
		}
		out = append(out, data)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	return out
}

func TestPodServersStreamEveryTokenInOrder(t *testing.T) {
	f := newSimFleet(t, simPod("a", "blue", 0, fleet.Profile{}), simPod("b", "green", 0, fleet.Profile{}), simPod("cold", "green", time.Hour, fleet.Profile{}))
	_, addrs := servePods(t, f)
	for _, tc := range []struct {
		path, body string
		chat       bool
		tokens     int
	}{
		{"/v1/completions", `{"prompt":"a b","max_tokens":20,"stream":true}`, false, 20},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":9,"stream":true}`, true, 9},
		{"/v1/completions", `{"prompt":"a","max_tokens":1,"stream":true}`, false, 1},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addrs["ns/b"]+tc.path, strings.NewReader(tc.body))
		resp, err := (&http.Client{Transport: GuardedTransport(1)}).Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get(HeaderColor) != "green" {
			t.Errorf("%s: %d %v", tc.path, resp.StatusCode, resp.Header)
		}
		data := events(t, resp.Body)
		_ = resp.Body.Close()
		cancel()
		if len(data) != tc.tokens+1 || data[len(data)-1] != "[DONE]" {
			t.Fatalf("%s: %d events ending %q, want %d chunks then [DONE]", tc.path, len(data), data[len(data)-1], tc.tokens)
		}
		for i, d := range data[:tc.tokens] {
			var c struct {
				Object  string
				Choices []struct {
					Text         string
					Delta        struct{ Role, Content string }
					FinishReason *string `json:"finish_reason"`
				}
			}
			if err := json.Unmarshal([]byte(d), &c); err != nil || len(c.Choices) != 1 {
				t.Fatalf("%s chunk %d: %q (%v)", tc.path, i, d, err)
			}
			ch := c.Choices[0]
			text, object := ch.Text, "text_completion"
			if tc.chat {
				text, object = ch.Delta.Content, "chat.completion.chunk"
				if (i == 0) != (ch.Delta.Role == "assistant") {
					t.Errorf("%s chunk %d: role %q", tc.path, i, ch.Delta.Role)
				}
			}
			if want := " tok" + strconv.Itoa(i); text != want || c.Object != object {
				t.Errorf("%s chunk %d: %s %q, want %s %q", tc.path, i, c.Object, text, object, want)
			}
			if last := i == tc.tokens-1; last != (ch.FinishReason != nil) || (last && *ch.FinishReason != "stop") {
				t.Errorf("%s chunk %d: finish_reason %v", tc.path, i, ch.FinishReason)
			}
		}
	}
}

func TestPodServersStreamTokensAsTheSimulationProducesThem(t *testing.T) {
	// A slow pod: 64 tokens (the cap) at 2x of 15 ms take about 2 s; the first chunk comes long before.
	f := newSimFleet(t, simPod("a", "blue", 0, fleet.Profile{LatencyMultiplier: 2}), simPod("b", "green", 0, fleet.Profile{}), simPod("cold", "green", time.Hour, fleet.Profile{}))
	s, addrs := servePods(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addrs["ns/a"]+"/v1/completions", strings.NewReader(`{"prompt":"a","max_tokens":500,"stream":true}`))
	resp, err := (&http.Client{Transport: GuardedTransport(1)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	br := bufio.NewReader(resp.Body)
	// Tokens come as the simulation produces them: the first three chunks arrive while the
	// pod still runs the request (it has 61 tokens to go).
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || !strings.Contains(line, `"text":" tok`+strconv.Itoa(i)+`"`) {
			t.Fatalf("chunk %d: %q (%v)", i, line, err)
		}
		if _, err := br.ReadString('\n'); err != nil { // the blank line after an event
			t.Fatal(err)
		}
	}
	for _, st := range f.Pods() {
		if st.Pod.Name == "a" && st.Running != 1 {
			t.Errorf("pod a runs %d requests after 3 chunks of 64, want the streamed one still running", st.Running)
		}
	}
	// The pod goes while it answers: the connection drops before [DONE].
	if err := s.Sync(context.Background(), []PodEndpoint{{Namespace: "ns", Name: "b", IP: "127.0.0.3"}}); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err == nil || strings.Contains(string(rest), "[DONE]") {
		t.Errorf("the stream of a pod that went ended cleanly (%d bytes, [DONE] %v)", len(rest), strings.Contains(string(rest), "[DONE]"))
	}
}

func TestPodServersCloseAndMoveWithTheirPods(t *testing.T) {
	f := newSimFleet(t, simPod("a", "blue", 0, fleet.Profile{}), simPod("b", "green", 0, fleet.Profile{}), simPod("cold", "green", time.Hour, fleet.Profile{}))
	s, addrs := servePods(t, f)
	client := &http.Client{Transport: GuardedTransport(1)}
	get := func(addr string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/health", nil)
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	// b keeps its address (a server kept, not rebound), a moves to 127.0.0.5, cold goes.
	bAddr := addrs["ns/b"]
	_, bPort, _ := net.SplitHostPort(bAddr)
	if err := s.Sync(context.Background(), []PodEndpoint{
		{Namespace: "ns", Name: "a", IP: "127.0.0.5"},
		{Namespace: "ns", Name: "b", IP: "127.0.0.3"},
	}); err != nil {
		t.Fatal(err)
	}
	now := s.Addresses()
	if len(now) != 2 || now["ns/b"] != bAddr || !strings.HasPrefix(now["ns/a"], "127.0.0.5:") {
		t.Fatalf("addresses after the sync: %v (b was %s)", now, bAddr)
	}
	if err := get(now["ns/a"]); err != nil {
		t.Errorf("a at its new address: %v", err)
	}
	for _, gone := range []string{addrs["ns/a"], addrs["ns/cold"]} {
		if err := get(gone); err == nil {
			t.Errorf("%s still answers after its pod moved or went", gone)
		}
	}
	// b's pod leaves the fleet before its server closes: it answers 404.
	f.DeletePod("ns", "b")
	if r := do(t, "GET", "http://127.0.0.3:"+bPort+"/health", ""); r.code != 404 {
		t.Errorf("a pod the fleet dropped answers %d, want 404", r.code)
	}
}

func TestPodServersRefuseAddressesOutsideTheRule(t *testing.T) {
	var called atomic.Int32
	s := &PodServers{Fleet: fleet.New(fleet.Config{}, time.Now()), Log: logr.Discard(),
		Listen: func(ctx context.Context, network, address string) (net.Listener, error) {
			called.Add(1)
			return (&net.ListenConfig{}).Listen(ctx, network, address)
		}}
	defer s.Close()
	err := s.Sync(context.Background(), []PodEndpoint{
		{Namespace: "ns", Name: "private", IP: "10.0.0.5", Port: 8000},
		{Namespace: "ns", Name: "any", IP: "0.0.0.0", Port: 8000},
		{Namespace: "ns", Name: "ok", IP: "127.0.0.6"},
	})
	if !errors.Is(err, ErrAddressRefused) || !strings.Contains(err.Error(), "ns/private") || !strings.Contains(err.Error(), "ns/any") {
		t.Errorf("Sync: %v, want both refused", err)
	}
	if n := called.Load(); n != 1 {
		t.Errorf("the injected listen ran %d times, want once (for 127.0.0.6)", n)
	}
	if a := s.Addresses(); len(a) != 1 || !strings.HasPrefix(a["ns/ok"], "127.0.0.6:") {
		t.Errorf("served %v", a)
	}
}

func TestPodServersAbortTheRequestsOfClientsThatGoAway(t *testing.T) {
	f := newSimFleet(t, simPod("a", "blue", 0, fleet.Profile{LatencyMultiplier: 4}), simPod("b", "green", 0, fleet.Profile{}), simPod("cold", "green", time.Hour, fleet.Profile{}))
	_, addrs := servePods(t, f)
	for _, body := range []string{`{"prompt":"a","max_tokens":64}`, `{"prompt":"a","max_tokens":64,"stream":true}`} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addrs["ns/a"]+"/v1/completions", strings.NewReader(body))
		resp, err := (&http.Client{Transport: GuardedTransport(1)}).Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
		}
		cancel()
		if err == nil {
			t.Fatalf("%s: 64 tokens at 4x of 15 ms came within 100 ms", body)
		}
	}
	// The pod drops both (eventually: at its next step after the server saw the connection close).
	deadline := time.Now().Add(10 * time.Second)
	for {
		var st fleet.PodStatus
		for _, s := range f.Pods() {
			if s.Pod.Name == "a" {
				st = s
			}
		}
		if st.Running == 0 && st.Waiting == 0 {
			if st.Success[fleet.FinishAbort] != 2 || st.GeneratedTokens >= 128 {
				t.Errorf("pod a after its clients went: aborts %d, generated %d tokens", st.Success[fleet.FinishAbort], st.GeneratedTokens)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod a still holds %d running, %d waiting requests of clients that went away", st.Running, st.Waiting)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
