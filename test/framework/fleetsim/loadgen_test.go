package fleetsim

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/modelship/modelship/test/framework/fleet"
)

// A stand-in Gateway on 127.0.0.1: the route of host llm.example routes three requests in four
// to a blue pod and one to a green pod that fails it; any other host gets the Gateway's own 404
// (no pod, no color).
func TestLoadGeneratorCountsCodesPerModelServerAndColor(t *testing.T) {
	var n atomic.Int64
	var mu sync.Mutex
	var bodies []map[string]any
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "llm.example" || r.URL.Path != "/llm/v1/completions" || r.Header.Get("X-Tenant") != "a" {
			http.NotFound(w, r)
			return
		}
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		if n.Add(1)%4 == 0 {
			w.Header().Set(HeaderColor, "green")
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set(HeaderColor, "blue")
		_, _ = w.Write([]byte(`{"choices":[]}`))
	}))
	defer gw.Close()
	var observed sync.Map
	g, err := NewLoadGenerator(LoadOptions{URL: gw.URL, Concurrency: 64, Timeout: 10 * time.Second,
		OnResponse: func(ns, ms, color, code string) {
			n, _ := observed.LoadOrStore(ns+"/"+ms+"/"+color+"/"+code, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}})
	if err != nil {
		t.Fatal(err)
	}
	llm := Target{ModelServer: types.NamespacedName{Namespace: "ns", Name: "llm"}, Host: "llm.example", Path: "/llm/v1/completions",
		Headers: map[string]string{"X-Tenant": "a"}, Model: "llm"}
	other := Target{ModelServer: types.NamespacedName{Namespace: "ns", Name: "other"}, Path: "/v1/completions", Model: "other"}
	ctx := context.Background()
	for i := range 40 {
		g.Send(ctx, llm, fleet.Arrival{ContextTokens: 100 + i, GeneratedTokens: 7})
	}
	for range 5 {
		g.Send(ctx, other, fleet.Arrival{ContextTokens: 1, GeneratedTokens: 1})
	}
	g.Wait()
	got := map[string]uint64{}
	for _, c := range g.Counts() {
		got[c.ModelServer+"/"+c.Color+"/"+c.Code] = c.Count
		if c.First.IsZero() || c.Last.Before(c.First) {
			t.Errorf("%s/%s/%s: first %v last %v", c.ModelServer, c.Color, c.Code, c.First, c.Last)
		}
	}
	want := map[string]uint64{"llm/blue/200": 30, "llm/green/500": 10, "other//404": 5}
	for k, v := range want {
		if n, ok := observed.Load("ns/" + k); !ok || n.(*atomic.Int64).Load() != int64(v) {
			t.Errorf("OnResponse saw %v of %s, want %d", n, k, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("counts %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	mu.Lock()
	body := bodies[0]
	mu.Unlock()
	sim, _ := body["modelship_sim"].(map[string]any)
	if body["max_tokens"] != 7.0 || body["model"] != "llm" || sim == nil || sim["prompt_tokens"] == nil {
		t.Errorf("request body %v", body)
	}
	lines := FormatCounts(g.Counts())
	if strings.Join(lines, "|") != "ns/llm blue: 200=30|ns/llm green: 500=10|ns/other (no pod): 404=5" {
		t.Errorf("FormatCounts: %q", lines)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(g)
	mfs, err := reg.Gather()
	series := map[string]int{}
	for _, mf := range mfs {
		series[mf.GetName()] = len(mf.GetMetric())
	}
	// Not streamed: no first-token times; durations of the answers with a code (3 series).
	if err != nil || len(series) != 2 || series[MetricLoadResponses] != 3 || series[MetricLoadDuration] != 3 {
		t.Errorf("gathered %v (%v), want 3 series of %s and of %s", series, err, MetricLoadResponses, MetricLoadDuration)
	}
}

func TestLoadGeneratorCountsClientErrorsAndDropsOverEachModelServersConcurrency(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.Header().Set(HeaderColor, "blue")
	}))
	defer slow.Close()
	g, err := NewLoadGenerator(LoadOptions{URL: slow.URL, Concurrency: 2, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tg := Target{ModelServer: types.NamespacedName{Namespace: "ns", Name: "llm"}, Path: "/v1/completions"}
	sent := 0
	for range 5 {
		if g.Send(context.Background(), tg, fleet.Arrival{GeneratedTokens: 1}) {
			sent++
		}
	}
	// Another ModelServer's users are not held back by the first one's slow answers.
	other := Target{ModelServer: types.NamespacedName{Namespace: "ns", Name: "other"}, Path: "/v1/completions"}
	otherSent := 0
	for range 2 {
		if g.Send(context.Background(), other, fleet.Arrival{GeneratedTokens: 1}) {
			otherSent++
		}
	}
	close(release)
	g.Wait()
	if sent != 2 || otherSent != 2 {
		t.Errorf("sent %d of 5 to one ModelServer and %d of 2 to another with a concurrency of 2 each", sent, otherSent)
	}

	// A closed port (connection refused) and a timeout are client errors, not fatal.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close()
	refused, err := NewLoadGenerator(LoadOptions{URL: closed})
	if err != nil {
		t.Fatal(err)
	}
	refused.Send(context.Background(), tg, fleet.Arrival{GeneratedTokens: 1})
	refused.Wait()
	hang := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer stuck.Close()
	defer close(hang)
	late, err := NewLoadGenerator(LoadOptions{URL: stuck.URL, Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	late.Send(context.Background(), tg, fleet.Arrival{GeneratedTokens: 1})
	late.Wait()

	for name, tc := range map[string]struct {
		g    *LoadGenerator
		want string
	}{
		"over concurrency": {g, "ns/llm (no pod): dropped=3|ns/llm blue: 200=2|ns/other blue: 200=2"},
		"refused":          {refused, "ns/llm (no pod): error=1"},
		"timeout":          {late, "ns/llm (no pod): error=1"},
	} {
		if got := strings.Join(FormatCounts(tc.g.Counts()), "|"); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}

func TestLoadGeneratorRefusesAGatewayOutsideTheRule(t *testing.T) {
	for _, u := range []string{"http://10.0.0.1:80", "http://192.168.0.1", "http://8.8.8.8"} {
		g, err := NewLoadGenerator(LoadOptions{URL: u})
		if err != nil {
			t.Fatal(err)
		}
		g.Send(context.Background(), Target{Path: "/v1/completions"}, fleet.Arrival{})
		g.Wait()
		if got := strings.Join(FormatCounts(g.Counts()), "|"); got != "/ (no pod): error=1" {
			t.Errorf("%s: %q, want a client error (refused before connecting)", u, got)
		}
	}
	if _, err := NewLoadGenerator(LoadOptions{URL: "llm:80"}); err == nil {
		t.Error("a URL without scheme accepted")
	}
}

// The load generator against pod servers: what it sends is what the pods simulate.
func TestLoadGeneratorDrivesAPodServer(t *testing.T) {
	f := newSimFleet(t, simPod("a", "blue", 0, fleet.Profile{}), simPod("b", "green", 0, fleet.Profile{}), simPod("cold", "green", time.Hour, fleet.Profile{}))
	_, addrs := servePods(t, f)
	for _, stream := range []bool{false, true} {
		g, err := NewLoadGenerator(LoadOptions{URL: "http://" + addrs["ns/a"], Stream: stream})
		if err != nil {
			t.Fatal(err)
		}
		tg := Target{ModelServer: types.NamespacedName{Namespace: "ns", Name: "llm"}, Path: "/v1/completions", Model: "llama"}
		for i := range 10 {
			g.Send(context.Background(), tg, fleet.Arrival{ContextTokens: 1000, GeneratedTokens: 1 + i})
		}
		g.Wait()
		if got := strings.Join(FormatCounts(g.Counts()), "|"); got != "ns/llm blue: 200=10" {
			t.Errorf("stream %v: %q", stream, got)
		}
		if stream {
			reg := prometheus.NewRegistry()
			reg.MustRegister(g)
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, mf := range mfs {
				if mf.GetName() == MetricLoadTTFT {
					found = true
					if len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetHistogram().GetSampleCount() != 10 {
						t.Errorf("%s: %v, want 10 first tokens of blue", MetricLoadTTFT, mf)
					}
				}
			}
			if !found {
				t.Errorf("no %s", MetricLoadTTFT)
			}
		}
	}
	s := f.Pods()[0]
	if s.Pod.Name != "a" || s.PromptTokens != 20000 || s.GeneratedTokens != 2*55 {
		t.Errorf("pod a simulated %d prompt and %d generated tokens, want 20000 and 110", s.PromptTokens, s.GeneratedTokens)
	}
}
