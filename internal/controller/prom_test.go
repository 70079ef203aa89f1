package controller

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/modelship/modelship/internal/metrics"
)

// promAnswer is what the test Prometheus says to one query: a value, no data, or an error.
type promAnswer struct {
	value  float64
	noData bool
	down   bool
	// buckets, when set, answer a bucket query: one series per le label, with its count.
	buckets map[string]float64
	// pods, when set, answers a query grouped by pod: one series per pod label, with its value.
	pods map[string]float64
	// partial adds a partial-response warning to the answer, as a Thanos Querier does when one
	// of its stores did not answer.
	partial bool
}

// partialWarning is the warning of a partial answer.
const partialWarning = "partial response: receive series from store-gw-1:10901: rpc error: code = Unavailable"

// podSeries is one pod's value in the answer to a query grouped over all namespaces.
type podSeries struct {
	pod   string
	value float64
}

// testPrometheus answers the Prometheus HTTP API (/api/v1/query) with values the tests control,
// per namespace found in the query (namespace="..."), so that tests sharing it do not interfere.
//
// A query without a namespace matcher (the built-in autoscaling signals, one query for every
// ModelServer) is answered with the series of every namespace registered with setSeries,
// labelled namespace and pod, or fails for everyone while setGroupedDown(true).
type testPrometheus struct {
	mu       sync.Mutex
	answers  map[string]func(query string) promAnswer
	series   map[string]func(query string) []podSeries
	down     bool
	partial  bool
	server   *httptest.Server
	querying map[string]int
}

var prometheus = &testPrometheus{
	answers:  map[string]func(string) promAnswer{},
	series:   map[string]func(string) []podSeries{},
	querying: map[string]int{},
}

var nsInQuery = regexp.MustCompile(`namespace="([^"]+)"`)

func (p *testPrometheus) set(ns string, f func(query string) promAnswer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answers[ns] = f
}

// setSeries sets what a namespace's pods contribute to queries grouped over all namespaces; f
// sees the query (to tell the signals apart) and returns the namespace's pods and values (none:
// no data for them). A nil f removes the namespace.
func (p *testPrometheus) setSeries(ns string, f func(query string) []podSeries) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f == nil {
		delete(p.series, ns)
		return
	}
	p.series[ns] = f
}

// setGroupedDown makes every query grouped over all namespaces fail (HTTP 503), as a Prometheus
// that is down does for every ModelServer at once. A test using it must not run in parallel
// with other tests reading the built-in signals.
func (p *testPrometheus) setGroupedDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

func (p *testPrometheus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	q := r.Form.Get("query")
	ns := ""
	if m := nsInQuery.FindStringSubmatch(q); m != nil {
		ns = m[1]
	}
	p.mu.Lock()
	f := p.answers[ns]
	p.querying[ns]++
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if ns == "" && f == nil {
		p.serveGrouped(w, q)
		return
	}
	a := promAnswer{noData: true}
	if f != nil {
		a = f(q)
	}
	switch {
	case a.down:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"error","errorType":"unavailable","error":"test Prometheus is down"}`))
	case a.noData:
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
	case a.buckets != nil:
		result := []any{}
		for le, count := range a.buckets {
			result = append(result, map[string]any{"metric": map[string]string{"le": le}, "value": []any{float64(time.Now().Unix()), strconv.FormatFloat(count, 'g', -1, 64)}})
		}
		_ = json.NewEncoder(w).Encode(withWarnings(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": result}}, a.partial))
	case a.pods != nil:
		result := []any{}
		for pod, v := range a.pods {
			result = append(result, map[string]any{"metric": map[string]string{"pod": pod}, "value": []any{float64(time.Now().Unix()), strconv.FormatFloat(v, 'g', -1, 64)}})
		}
		_ = json.NewEncoder(w).Encode(withWarnings(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": result}}, a.partial))
	default:
		body := map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": []any{
			map[string]any{"metric": map[string]string{}, "value": []any{float64(time.Now().Unix()), strconv.FormatFloat(a.value, 'g', -1, 64)}},
		}}}
		_ = json.NewEncoder(w).Encode(withWarnings(body, a.partial))
	}
}

// setGroupedPartial adds a partial-response warning to every answer grouped over all
// namespaces. A test using it must not run in parallel with other tests reading the built-in
// signals.
func (p *testPrometheus) setGroupedPartial(partial bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = partial
}

// withWarnings adds the partial-response warning to a success body when partial.
func withWarnings(body map[string]any, partial bool) map[string]any {
	if partial {
		body["warnings"] = []string{partialWarning}
	}
	return body
}

// serveGrouped answers a query grouped over all namespaces with every registered namespace's
// series, or an error while down.
func (p *testPrometheus) serveGrouped(w http.ResponseWriter, q string) {
	p.mu.Lock()
	down, partial := p.down, p.partial
	fs := make(map[string]func(string) []podSeries, len(p.series))
	for ns, f := range p.series {
		fs[ns] = f
	}
	p.mu.Unlock()
	if down {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"error","errorType":"unavailable","error":"test Prometheus is down"}`))
		return
	}
	result := []any{}
	now := float64(time.Now().Unix())
	for ns, f := range fs {
		for _, s := range f(q) {
			result = append(result, map[string]any{
				"metric": map[string]string{"namespace": ns, "pod": s.pod},
				"value":  []any{now, strconv.FormatFloat(s.value, 'g', -1, 64)},
			})
		}
	}
	_ = json.NewEncoder(w).Encode(withWarnings(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": result}}, partial))
}

// fakePrometheus starts the test Prometheus and returns modelship's real client pointed at it.
func fakePrometheus() metrics.Querier {
	prometheus.server = httptest.NewServer(prometheus)
	q, err := metrics.NewPrometheus(metrics.Config{URL: prometheus.server.URL, Timeout: 2 * time.Second})
	if err != nil {
		panic(fmt.Sprintf("test prometheus client: %v", err))
	}
	return q
}
