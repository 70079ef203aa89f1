package fleetsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelship/modelship/test/framework/fleet"
)

// Codes the load generator counts beside HTTP status codes.
const (
	// CodeClientError: no answer (connection refused or dropped, timeout, a stream cut short).
	CodeClientError = "error"
	// CodeDropped: not sent, the most requests in flight were already out.
	CodeDropped = "dropped"
)

// MetricLoadResponses counts the load generator's responses per ModelServer, color (the
// X-Modelship-Color of the pod that answered, "" when no pod did) and code.
const MetricLoadResponses = "fleetsim_loadgen_responses_total"

var descLoad = prometheus.NewDesc(MetricLoadResponses,
	"Responses the load generator received through the Gateway per ModelServer, color of the serving pod and HTTP code.",
	[]string{"namespace", "modelserver", "color", "code"}, nil)

// LoadOptions configure the load generator.
type LoadOptions struct {
	// URL of the Gateway's listener (http://host:port); requests go to URL + Target.Path.
	URL string
	// Concurrency is the most requests in flight; more are dropped (CodeDropped). Zero: 512.
	Concurrency int
	// Timeout of one request, answer included. Zero: 2 minutes.
	Timeout time.Duration
	// Stream asks for server-sent events ("stream": true) and reads them to the end.
	Stream bool
	// Client sends the requests; nil is a client on GuardedTransport (only loopback and
	// 198.18.0.0/15).
	Client *http.Client
}

// ResponseCount is one counter of the load generator.
type ResponseCount struct {
	// Namespace and ModelServer the requests were for.
	Namespace   string `json:"namespace"`
	ModelServer string `json:"modelServer"`
	// Color of the pod that answered ("" when none did: the Gateway's own errors, client errors).
	Color string `json:"color"`
	// Code is the HTTP status code, CodeClientError or CodeDropped.
	Code string `json:"code"`
	// Count of responses.
	Count uint64 `json:"count"`
}

type loadKey struct{ namespace, modelServer, color, code string }

// LoadGenerator sends requests as real HTTP requests to a Gateway and counts the answers by
// code per ModelServer and color. It is a prometheus.Collector of MetricLoadResponses.
type LoadGenerator struct {
	opts LoadOptions
	base *url.URL
	sem  chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	counts map[loadKey]uint64
}

// NewLoadGenerator checks the options and makes a load generator.
func NewLoadGenerator(opts LoadOptions) (*LoadGenerator, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gateway URL %q: want http://host:port", opts.URL)
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 512
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Transport: GuardedTransport(opts.Concurrency)}
	}
	return &LoadGenerator{opts: opts, base: u, sem: make(chan struct{}, opts.Concurrency), counts: map[loadKey]uint64{}}, nil
}

// Send sends one request of the trace for target in the background: a completion of
// a.GeneratedTokens tokens (max_tokens) whose prompt is a.ContextTokens tokens long (the
// "modelship_sim" extension). It returns false when the request was dropped because
// Concurrency requests are in flight. A request ends with ctx (a client error) or after Timeout.
func (g *LoadGenerator) Send(ctx context.Context, t Target, a fleet.Arrival) bool {
	select {
	case g.sem <- struct{}{}:
	default:
		g.count(t, "", CodeDropped)
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer func() { <-g.sem }()
		color, code := g.do(ctx, t, a)
		g.count(t, color, code)
	}()
	return true
}

// Wait waits for the requests in flight.
func (g *LoadGenerator) Wait() { g.wg.Wait() }

func (g *LoadGenerator) do(ctx context.Context, t Target, a fleet.Arrival) (color, code string) {
	ctx, cancel := context.WithTimeout(ctx, g.opts.Timeout)
	defer cancel()
	body, err := json.Marshal(map[string]any{
		"model": t.Model, "prompt": "modelship fleet simulator", "max_tokens": max(1, a.GeneratedTokens),
		"stream": g.opts.Stream, "modelship_sim": SimExtension{PromptTokens: &a.ContextTokens},
	})
	if err != nil {
		return "", CodeClientError
	}
	u := *g.base
	u.Path = strings.TrimSuffix(u.Path, "/") + t.Path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return "", CodeClientError
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range t.Headers {
		req.Header.Set(k, v)
	}
	if t.Host != "" {
		req.Host = t.Host
	}
	resp, err := g.opts.Client.Do(req)
	if err != nil {
		return "", CodeClientError
	}
	defer func() { _ = resp.Body.Close() }()
	color = resp.Header.Get(HeaderColor)
	b, err := io.ReadAll(resp.Body)
	if err != nil || (g.opts.Stream && resp.StatusCode == http.StatusOK && !bytes.Contains(b, []byte("data: [DONE]"))) {
		return color, CodeClientError
	}
	return color, strconv.Itoa(resp.StatusCode)
}

func (g *LoadGenerator) count(t Target, color, code string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.counts[loadKey{t.ModelServer.Namespace, t.ModelServer.Name, color, code}]++
}

// Counts returns every counter, sorted by namespace, ModelServer, color and code.
func (g *LoadGenerator) Counts() []ResponseCount {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]ResponseCount, 0, len(g.counts))
	for k, v := range g.counts {
		out = append(out, ResponseCount{Namespace: k.namespace, ModelServer: k.modelServer, Color: k.color, Code: k.code, Count: v})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return fmt.Sprint(a.Namespace, "\x00", a.ModelServer, "\x00", a.Color, "\x00", a.Code) <
			fmt.Sprint(b.Namespace, "\x00", b.ModelServer, "\x00", b.Color, "\x00", b.Code)
	})
	return out
}

// Describe sends MetricLoadResponses' descriptor (prometheus.Collector).
func (g *LoadGenerator) Describe(ch chan<- *prometheus.Desc) { ch <- descLoad }

// Collect sends the counters (prometheus.Collector).
func (g *LoadGenerator) Collect(ch chan<- prometheus.Metric) {
	for _, c := range g.Counts() {
		sendCounter(ch, descLoad, float64(c.Count), c.Namespace, c.ModelServer, c.Color, c.Code)
	}
}

func sendCounter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, lv ...string) {
	m, err := prometheus.NewConstMetric(d, prometheus.CounterValue, v, lv...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}

// FormatCounts renders counts per ModelServer and color, one line each:
// "ns/llm blue: 200=950 500=3".
func FormatCounts(counts []ResponseCount) []string {
	var lines []string
	cur, line := "", ""
	for _, c := range counts {
		color := c.Color
		if color == "" {
			color = "(no pod)"
		}
		head := c.Namespace + "/" + c.ModelServer + " " + color + ":"
		if head != cur {
			if line != "" {
				lines = append(lines, line)
			}
			cur, line = head, head
		}
		line += " " + c.Code + "=" + strconv.FormatUint(c.Count, 10)
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
