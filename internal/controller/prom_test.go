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
}

// testPrometheus answers the Prometheus HTTP API (/api/v1/query) with values the tests control,
// per namespace found in the query (namespace="..."), so that tests sharing it do not interfere.
type testPrometheus struct {
	mu       sync.Mutex
	answers  map[string]func(query string) promAnswer
	server   *httptest.Server
	querying map[string]int
}

var prometheus = &testPrometheus{answers: map[string]func(string) promAnswer{}, querying: map[string]int{}}

var nsInQuery = regexp.MustCompile(`namespace="([^"]+)"`)

func (p *testPrometheus) set(ns string, f func(query string) promAnswer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answers[ns] = f
}

func (p *testPrometheus) queries(ns string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.querying[ns]
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
	a := promAnswer{noData: true}
	if f != nil {
		a = f(q)
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case a.down:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"error","errorType":"unavailable","error":"test Prometheus is down"}`))
	case a.noData:
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
	default:
		body := map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": []any{
			map[string]any{"metric": map[string]string{}, "value": []any{float64(time.Now().Unix()), strconv.FormatFloat(a.value, 'g', -1, 64)}},
		}}}
		_ = json.NewEncoder(w).Encode(body)
	}
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
