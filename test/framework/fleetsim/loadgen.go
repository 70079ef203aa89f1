package fleetsim

import (
	"bufio"
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
	"k8s.io/apimachinery/pkg/types"

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

// The load generator's latency histograms, per ModelServer and color of the pod that answered:
// the Gateway's view of the simulated pods (the pods' own are vLLM's).
const (
	// MetricLoadTTFT: from sending a streamed request to its first event (the first token).
	MetricLoadTTFT = "fleetsim_loadgen_time_to_first_token_seconds"
	// MetricLoadDuration: from sending a request to the end of its answer (answers with an
	// HTTP code only; per code too).
	MetricLoadDuration = "fleetsim_loadgen_request_duration_seconds"
)

var descLoad = prometheus.NewDesc(MetricLoadResponses,
	"Responses the load generator received through the Gateway per ModelServer, color of the serving pod and HTTP code.",
	[]string{"namespace", "modelserver", "color", "code"}, nil)

// LoadOptions configure the load generator.
type LoadOptions struct {
	// URL of the Gateway's listener (http://host:port); requests go to URL + Target.Path.
	URL string
	// Concurrency is the most requests in flight per ModelServer; more are dropped (CodeDropped).
	// Each ModelServer has its own users: one that answers slowly (overloaded, or left behind
	// by a failed story) never takes another's share. Zero: 512.
	Concurrency int
	// Timeout of one request, answer included. Zero: 2 minutes.
	Timeout time.Duration
	// Stream asks for server-sent events ("stream": true) and reads them to the end.
	Stream bool
	// Client sends the requests; nil is a client on GuardedTransport (only loopback and
	// 198.18.0.0/15).
	Client *http.Client
	// OnResponse, when set, is told of every counted answer (Run gives
	// fleet.CountGatewayResponse, so that fleetsim_gateway_responses_total counts the real
	// Gateway's answers as it counted the simulated one's).
	OnResponse func(namespace, modelServer, color, code string)
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
	// First and Last are when the first and the latest of them came (a color's first answer
	// after a weight change shows when the Gateway switched).
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

type loadKey struct{ namespace, modelServer, color, code string }

// LoadGenerator sends requests as real HTTP requests to a Gateway and counts the answers by
// code per ModelServer and color. It is a prometheus.Collector of MetricLoadResponses.
type LoadGenerator struct {
	opts LoadOptions
	base *url.URL
	wg   sync.WaitGroup

	ttft     *prometheus.HistogramVec
	duration *prometheus.HistogramVec

	mu     sync.Mutex
	sems   map[types.NamespacedName]chan struct{} // in-flight requests per ModelServer
	counts map[loadKey]*ResponseCount
	now    func() time.Time
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
	return &LoadGenerator{opts: opts, base: u, sems: map[types.NamespacedName]chan struct{}{}, counts: map[loadKey]*ResponseCount{}, now: time.Now,
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricLoadTTFT,
			Help:    "Time from sending a streamed request to its first event, as the load generator sees it through the Gateway.",
			Buckets: fleet.TTFTBuckets}, []string{"namespace", "modelserver", "color"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricLoadDuration,
			Help:    "Time from sending a request to the end of its answer, as the load generator sees it through the Gateway.",
			Buckets: fleet.E2EBuckets}, []string{"namespace", "modelserver", "color", "code"}),
	}, nil
}

// Send sends one request of the trace for target in the background: a completion of
// a.GeneratedTokens tokens (max_tokens) whose prompt is a.ContextTokens tokens long (the
// "modelship_sim" extension). It returns false when the request was dropped because
// Concurrency requests of t's ModelServer are in flight. A request ends with ctx (a client
// error) or after Timeout.
func (g *LoadGenerator) Send(ctx context.Context, t Target, a fleet.Arrival) bool {
	sem := g.sem(t.ModelServer)
	select {
	case sem <- struct{}{}:
	default:
		g.count(t, "", CodeDropped)
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer func() { <-sem }()
		color, code := g.do(ctx, t, a)
		g.count(t, color, code)
	}()
	return true
}

// sem is the in-flight limit of one ModelServer's requests.
func (g *LoadGenerator) sem(ms types.NamespacedName) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.sems[ms]
	if !ok {
		s = make(chan struct{}, g.opts.Concurrency)
		g.sems[ms] = s
	}
	return s
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
	sent := time.Now()
	resp, err := g.opts.Client.Do(req)
	if err != nil {
		return "", CodeClientError
	}
	defer func() { _ = resp.Body.Close() }()
	color = resp.Header.Get(HeaderColor)
	br := bufio.NewReader(resp.Body)
	var b []byte
	if g.opts.Stream && resp.StatusCode == http.StatusOK {
		// The first event is the first token.
		first, err := br.ReadBytes('\n')
		if err != nil {
			return color, CodeClientError
		}
		g.ttft.WithLabelValues(t.ModelServer.Namespace, t.ModelServer.Name, color).Observe(time.Since(sent).Seconds())
		b = first
	}
	rest, err := io.ReadAll(br)
	b = append(b, rest...)
	if err != nil || (g.opts.Stream && resp.StatusCode == http.StatusOK && !bytes.Contains(b, []byte("data: [DONE]"))) {
		return color, CodeClientError
	}
	code = strconv.Itoa(resp.StatusCode)
	g.duration.WithLabelValues(t.ModelServer.Namespace, t.ModelServer.Name, color, code).Observe(time.Since(sent).Seconds())
	return color, code
}

func (g *LoadGenerator) count(t Target, color, code string) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	k := loadKey{t.ModelServer.Namespace, t.ModelServer.Name, color, code}
	c, ok := g.counts[k]
	if !ok {
		c = &ResponseCount{Namespace: k.namespace, ModelServer: k.modelServer, Color: color, Code: code, First: now}
		g.counts[k] = c
	}
	c.Count++
	c.Last = now
	if g.opts.OnResponse != nil {
		g.opts.OnResponse(k.namespace, k.modelServer, color, code)
	}
}

// Counts returns every counter, sorted by namespace, ModelServer, color and code.
func (g *LoadGenerator) Counts() []ResponseCount {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]ResponseCount, 0, len(g.counts))
	for _, c := range g.counts {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return fmt.Sprint(a.Namespace, "\x00", a.ModelServer, "\x00", a.Color, "\x00", a.Code) <
			fmt.Sprint(b.Namespace, "\x00", b.ModelServer, "\x00", b.Color, "\x00", b.Code)
	})
	return out
}

// Describe sends the load generator's descriptors (prometheus.Collector).
func (g *LoadGenerator) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLoad
	g.ttft.Describe(ch)
	g.duration.Describe(ch)
}

// Collect sends the counters and the latency histograms (prometheus.Collector).
func (g *LoadGenerator) Collect(ch chan<- prometheus.Metric) {
	g.ttft.Collect(ch)
	g.duration.Collect(ch)
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
