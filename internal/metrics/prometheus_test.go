package metrics

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// Bodies in the shape of Prometheus' HTTP API (https://prometheus.io/docs/prometheus/latest/querying/api/).
const (
	bodyVectorOne = `{"status":"success","data":{"resultType":"vector","result":[` +
		`{"metric":{"__name__":"up","job":"prometheus","instance":"localhost:9090"},"value":[1435781451.781,"0.35"]}]}}`
	bodyVectorTwo = `{"status":"success","data":{"resultType":"vector","result":[` +
		`{"metric":{"namespace":"ml","pod":"llama-blue-7d9c-abcde"},"value":[1435781451.781,"1"]},` +
		`{"metric":{"namespace":"ml","pod":"llama-blue-7d9c-fghij"},"value":[1435781451.781,"3"]}]}}`
	bodyVectorWithNaN = `{"status":"success","data":{"resultType":"vector","result":[` +
		`{"metric":{"namespace":"ml","pod":"a"},"value":[1435781451.781,"NaN"]},` +
		`{"metric":{"namespace":"ml","pod":"b"},"value":[1435781451.781,"+Inf"]},` +
		`{"metric":{"namespace":"ml","pod":"c"},"value":[1435781451.781,"42"]}]}}`
	bodyScalar      = `{"status":"success","data":{"resultType":"scalar","result":[1435781451.781,"7.5"]}}`
	bodyScalarNaN   = `{"status":"success","data":{"resultType":"scalar","result":[1435781451.781,"NaN"]}}`
	bodyEmpty       = `{"status":"success","data":{"resultType":"vector","result":[]}}`
	bodyNaN         = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1435781451.781,"NaN"]}]}}`
	bodyPosInf      = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1435781451.781,"+Inf"]}]}}`
	bodyNegInf      = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1435781451.781,"-Inf"]}]}}`
	bodyZero        = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1435781451.781,"0"]}]}}`
	bodyMatrix      = `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"pod":"a"},"values":[[1435781430.781,"1"],[1435781445.781,"1"]]}]}}`
	bodyBadData     = `{"status":"error","errorType":"bad_data","error":"1:10: parse error: unexpected \"}\""}`
	bodyExecTimeout = `{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}`
	bodyInternal    = `{"status":"error","errorType":"internal","error":"something broke"}`
	// A Thanos Querier that could not reach one of its stores answers with what the others
	// had and a warning.
	bodyPartial = `{"status":"success","warnings":["partial response: receive series from store-gw-1:10901: rpc error: code = Unavailable"],` +
		`"data":{"resultType":"vector","result":[{"metric":{"namespace":"ml","pod":"a"},"value":[1435781451.781,"0.35"]}]}}`
	// Prometheus 2.x sent its informational annotations as warnings.
	bodyInfoWarning = `{"status":"success","warnings":["PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"up\""],` +
		`"data":{"resultType":"vector","result":[{"metric":{},"value":[1435781451.781,"0.35"]}]}}`
)

// promServer answers every query with status and body, and records the requests' queries and
// Authorization headers.
type promServer struct {
	mu       sync.Mutex
	queries  []string
	auths    []string
	timeouts []string
	status   int
	body     string
	delay    time.Duration
}

func (s *promServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/query" {
		http.NotFound(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.queries = append(s.queries, r.Form.Get("query"))
	s.auths = append(s.auths, r.Header.Get("Authorization"))
	s.timeouts = append(s.timeouts, r.Form.Get("timeout"))
	status, body, delay := s.status, s.body, s.delay
	s.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// seen returns the queries and Authorization headers received so far.
func (s *promServer) seen() (queries, auths []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.queries...), append([]string(nil), s.auths...)
}

func newProm(t *testing.T, status int, body string) (*promServer, *httptest.Server) {
	t.Helper()
	ps := &promServer{status: status, body: body}
	srv := httptest.NewServer(ps)
	t.Cleanup(srv.Close)
	return ps, srv
}

func mustPrometheus(t *testing.T, cfg Config) *Prometheus {
	t.Helper()
	p, err := NewPrometheus(cfg)
	if err != nil {
		t.Fatalf("NewPrometheus(%+v): %v", cfg, err)
	}
	return p
}

func TestScalar(t *testing.T) {
	cases := []struct {
		name        string
		status      int
		body        string
		wantStatus  Status
		wantValue   float64
		wantMessage string // substring
	}{
		{"a vector of one element is its value", 200, bodyVectorOne, OK, 0.35, ""},
		{"a scalar is its value", 200, bodyScalar, OK, 7.5, ""},
		{"a zero is a value, not missing data", 200, bodyZero, OK, 0, ""},
		{"an empty vector is no data", 200, bodyEmpty, NoData, 0, "no data"},
		{"NaN is no data", 200, bodyNaN, NoData, 0, "NaN"},
		{"a NaN scalar is no data", 200, bodyScalarNaN, NoData, 0, "NaN"},
		{"+Inf is no data", 200, bodyPosInf, NoData, 0, "+Inf"},
		{"-Inf is no data", 200, bodyNegInf, NoData, 0, "-Inf"},
		{"several series are no data because the value is ambiguous", 200, bodyVectorTwo, NoData, 0, "ambiguous: 2 series"},
		{"a range vector is an error", 200, bodyMatrix, Error, 0, "matrix"},
		{"a bad query is an error with Prometheus' message", 400, bodyBadData, Error, 0, "bad_data: 1:10: parse error"},
		{"an execution error is an error", 422, `{"status":"error","errorType":"execution","error":"many-to-many matching not allowed"}`, Error, 0, "many-to-many"},
		{"a 503 with Prometheus' timeout JSON is an error naming the timeout", 503, bodyExecTimeout, Error, 0, "server error: 503: timeout: query timed out"},
		{"a 500 with error JSON is an error", 500, bodyInternal, Error, 0, "server error: 500: internal: something broke"},
		{"a 502 from a proxy without JSON is an error", 502, "<html>bad gateway</html>", Error, 0, "server error: 502"},
		{"a 403 is an error", 403, "forbidden", Error, 0, "client error: 403"},
		{"a body that is not JSON is an error", 200, "not json", Error, 0, "prometheus"},
		{"an answer warning of a partial response is no data, naming the warning", 200, bodyPartial, NoData, 0, "partial response: receive series from store-gw-1"},
		{"an informational annotation is not a warning of missing data", 200, bodyInfoWarning, OK, 0.35, ""},
		{"VictoriaMetrics' isPartial is no data", 200, `{"status":"success","isPartial":true,"data":{"resultType":"vector","result":[{"metric":{},"value":[1435781451.781,"0.35"]}]}}`, NoData, 0, "isPartial"},
		{"VictoriaMetrics' isPartial false is data", 200, `{"status":"success","isPartial":false,"data":{"resultType":"vector","result":[{"metric":{},"value":[1435781451.781,"0.35"]}]}}`, OK, 0.35, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := newProm(t, tc.status, tc.body)
			p := mustPrometheus(t, Config{URL: srv.URL, Timeout: 5 * time.Second})
			got := p.Scalar(context.Background(), "up", time.Unix(1435781451, 0))
			if got.Status != tc.wantStatus {
				t.Fatalf("status = %s (%q), want %s", got.Status, got.Message, tc.wantStatus)
			}
			if got.Status == OK && got.Value != tc.wantValue {
				t.Errorf("value = %v, want %v", got.Value, tc.wantValue)
			}
			if got.Status != OK && got.Value != 0 {
				t.Errorf("value = %v on %s, want 0 (unused)", got.Value, got.Status)
			}
			if !strings.Contains(got.Message, tc.wantMessage) {
				t.Errorf("message = %q, want it to contain %q", got.Message, tc.wantMessage)
			}
			if got.Status != OK && got.Message == "" {
				t.Errorf("no message for %s", got.Status)
			}
		})
	}
}

func TestScalarSendsQueryAndTime(t *testing.T) {
	ps, srv := newProm(t, 200, bodyVectorOne)
	p := mustPrometheus(t, Config{URL: srv.URL})
	p.Scalar(context.Background(), `sum(rate(x{pod=~"a-.*"}[2m]))`, time.Unix(1435781451, 0))
	if queries, _ := ps.seen(); len(queries) != 1 || queries[0] != `sum(rate(x{pod=~"a-.*"}[2m]))` {
		t.Fatalf("queries = %q", queries)
	}
}

func TestQueryTimeoutIsSentInAFormPrometheusParses(t *testing.T) {
	cases := []struct {
		name    string
		timeout time.Duration
		want    string
	}{
		{"sends whole seconds", 10 * time.Second, "10s"},
		{"sends minutes and seconds", 90 * time.Second, "1m30s"},
		{"truncates fractions of a second, which Prometheus rejects", 2500 * time.Millisecond, "2s"},
		{"sends no server timeout under a second", 500 * time.Millisecond, ""},
		{"sends the default timeout when none is set", 0, "10s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps, srv := newProm(t, 200, bodyVectorOne)
			p := mustPrometheus(t, Config{URL: srv.URL, Timeout: tc.timeout})
			p.Scalar(context.Background(), "up", time.Now())
			ps.mu.Lock()
			got := ps.timeouts
			ps.mu.Unlock()
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("timeout parameters = %q, want %q", got, tc.want)
			}
			if got[0] != "" {
				if _, err := model.ParseDuration(got[0]); err != nil {
					t.Fatalf("Prometheus cannot parse timeout %q: %v", got[0], err)
				}
			}
		})
	}
}

func TestScalarTimesOutWhenPrometheusIsSlow(t *testing.T) {
	ps, srv := newProm(t, 200, bodyVectorOne)
	ps.delay = 5 * time.Second
	p := mustPrometheus(t, Config{URL: srv.URL, Timeout: 100 * time.Millisecond})
	start := time.Now()
	got := p.Scalar(context.Background(), "up", time.Now())
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("query took %s, want about the 100ms timeout", elapsed)
	}
	if got.Status != Error || !strings.Contains(got.Message, "timeout after 100ms") {
		t.Fatalf("got %+v, want an Error naming the timeout", got)
	}
}

func TestScalarIsAnErrorWhenPrometheusRefusesConnections(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	p := mustPrometheus(t, Config{URL: "http://" + addr, Timeout: 2 * time.Second})
	got := p.Scalar(context.Background(), "up", time.Now())
	if got.Status != Error || !strings.Contains(got.Message, "unreachable") {
		t.Fatalf("got %+v, want an Error saying unreachable", got)
	}
	if _, err := p.Vector(context.Background(), "up", time.Now()); err == nil {
		t.Fatal("Vector: no error from a refused connection")
	}
}

func TestScalarIsAnErrorWhenTheCallerCancels(t *testing.T) {
	_, srv := newProm(t, 200, bodyVectorOne)
	p := mustPrometheus(t, Config{URL: srv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := p.Scalar(ctx, "up", time.Now()); got.Status != Error {
		t.Fatalf("got %+v, want Error", got)
	}
}

func TestVector(t *testing.T) {
	t.Run("an answer warning of a partial response is no series and a partial-data error", func(t *testing.T) {
		_, srv := newProm(t, 200, bodyPartial)
		p := mustPrometheus(t, Config{URL: srv.URL})
		got, err := p.Vector(context.Background(), "x", time.Now())
		if !errors.Is(err, ErrPartialData) {
			t.Fatalf("err = %v, want ErrPartialData", err)
		}
		if !strings.Contains(err.Error(), "partial response: receive series from store-gw-1") {
			t.Errorf("err = %q, want it to name the warning", err)
		}
		if len(got) != 0 {
			t.Errorf("got %d series from a partial answer, want none", len(got))
		}
	})
	t.Run("returns every series with its labels", func(t *testing.T) {
		_, srv := newProm(t, 200, bodyVectorTwo)
		p := mustPrometheus(t, Config{URL: srv.URL})
		got, err := p.Vector(context.Background(), "x", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Labels["pod"] != "llama-blue-7d9c-abcde" || got[0].Value != 1 ||
			got[1].Labels["pod"] != "llama-blue-7d9c-fghij" || got[1].Value != 3 {
			t.Fatalf("got %+v", got)
		}
	})
	t.Run("drops NaN and Inf elements", func(t *testing.T) {
		_, srv := newProm(t, 200, bodyVectorWithNaN)
		p := mustPrometheus(t, Config{URL: srv.URL})
		got, err := p.Vector(context.Background(), "x", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Labels["pod"] != "c" || got[0].Value != 42 {
			t.Fatalf("got %+v, want only pod c", got)
		}
	})
	t.Run("an empty result is no series and no error", func(t *testing.T) {
		_, srv := newProm(t, 200, bodyEmpty)
		p := mustPrometheus(t, Config{URL: srv.URL})
		got, err := p.Vector(context.Background(), "x", time.Now())
		if err != nil || len(got) != 0 {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
	t.Run("a scalar is one series without labels", func(t *testing.T) {
		_, srv := newProm(t, 200, bodyScalar)
		p := mustPrometheus(t, Config{URL: srv.URL})
		got, err := p.Vector(context.Background(), "x", time.Now())
		if err != nil || len(got) != 1 || got[0].Value != 7.5 || len(got[0].Labels) != 0 {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
	t.Run("an HTTP error is an error", func(t *testing.T) {
		_, srv := newProm(t, 503, bodyExecTimeout)
		p := mustPrometheus(t, Config{URL: srv.URL})
		_, err := p.Vector(context.Background(), "x", time.Now())
		if err == nil || !strings.Contains(err.Error(), "503") {
			t.Fatalf("err = %v, want a 503 error", err)
		}
	})
	t.Run("a bad query is an error", func(t *testing.T) {
		_, srv := newProm(t, 400, bodyBadData)
		p := mustPrometheus(t, Config{URL: srv.URL})
		_, err := p.Vector(context.Background(), "x", time.Now())
		if err == nil || !strings.Contains(err.Error(), "bad_data") {
			t.Fatalf("err = %v, want bad_data", err)
		}
	})
	t.Run("a timeout is an error that unwraps to the deadline", func(t *testing.T) {
		ps, srv := newProm(t, 200, bodyVectorOne)
		ps.delay = 5 * time.Second
		p := mustPrometheus(t, Config{URL: srv.URL, Timeout: 50 * time.Millisecond})
		_, err := p.Vector(context.Background(), "x", time.Now())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want DeadlineExceeded", err)
		}
	})
}

func TestBearerTokenIsSentAndReReadAfterRotation(t *testing.T) {
	ps, srv := newProm(t, 200, bodyVectorOne)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("first-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := mustPrometheus(t, Config{URL: srv.URL, BearerTokenFile: tokenFile})
	if got := p.Scalar(context.Background(), "up", time.Now()); got.Status != OK {
		t.Fatalf("first query: %+v", got)
	}
	if err := os.WriteFile(tokenFile, []byte("second-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := p.Scalar(context.Background(), "up", time.Now()); got.Status != OK {
		t.Fatalf("second query: %+v", got)
	}
	want := []string{"Bearer first-token", "Bearer second-token"}
	_, auths := ps.seen()
	if len(auths) != 2 || auths[0] != want[0] || auths[1] != want[1] {
		t.Fatalf("Authorization headers = %q, want %q", auths, want)
	}
}

func TestBearerTokenFileThatVanishesMakesQueriesErrors(t *testing.T) {
	ps, srv := newProm(t, 200, bodyVectorOne)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := mustPrometheus(t, Config{URL: srv.URL, BearerTokenFile: tokenFile})
	if err := os.Remove(tokenFile); err != nil {
		t.Fatal(err)
	}
	got := p.Scalar(context.Background(), "up", time.Now())
	if got.Status != Error || !strings.Contains(got.Message, "bearer token") {
		t.Fatalf("got %+v, want an Error about the token", got)
	}
	if queries, _ := ps.seen(); len(queries) != 0 {
		t.Fatalf("a request was sent without a token: %q", queries)
	}
}

func TestNoAuthorizationHeaderWithoutTokenFile(t *testing.T) {
	ps, srv := newProm(t, 200, bodyVectorOne)
	p := mustPrometheus(t, Config{URL: srv.URL})
	p.Scalar(context.Background(), "up", time.Now())
	if _, auths := ps.seen(); len(auths) != 1 || auths[0] != "" {
		t.Fatalf("Authorization headers = %q, want none", auths)
	}
}

func TestTLSWithCAFile(t *testing.T) {
	ps := &promServer{status: 200, body: bodyVectorOne}
	srv := httptest.NewUnstartedServer(ps)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted case logs a handshake error
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("the server's CA makes queries work", func(t *testing.T) {
		p := mustPrometheus(t, Config{URL: srv.URL, CAFile: caFile})
		if got := p.Scalar(context.Background(), "up", time.Now()); got.Status != OK || got.Value != 0.35 {
			t.Fatalf("got %+v, want OK 0.35", got)
		}
	})
	t.Run("without the CA the certificate is not trusted", func(t *testing.T) {
		p := mustPrometheus(t, Config{URL: srv.URL})
		if got := p.Scalar(context.Background(), "up", time.Now()); got.Status != Error {
			t.Fatalf("got %+v, want Error", got)
		}
	})
}

func TestNewPrometheusRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "token")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"an empty URL", Config{}, "URL is empty"},
		{"a URL without scheme", Config{URL: "prometheus:9090"}, "scheme"},
		{"a URL without host", Config{URL: "http://"}, "no host"},
		{"a missing CA file", Config{URL: "https://p", CAFile: filepath.Join(dir, "nope")}, "CA file"},
		{"a CA file without certificates", Config{URL: "https://p", CAFile: notPEM}, "no PEM certificate"},
		{"a missing token file", Config{URL: "http://p", BearerTokenFile: filepath.Join(dir, "nope")}, "bearer token"},
		{"an empty token file", Config{URL: "http://p", BearerTokenFile: empty}, "is empty"},
		{"a negative timeout", Config{URL: "http://p", Timeout: -time.Second}, "negative"},
	}
	for _, tc := range cases {
		t.Run("rejects "+tc.name, func(t *testing.T) {
			_, err := NewPrometheus(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestPrometheusIsSafeForConcurrentQueries(t *testing.T) {
	ps, srv := newProm(t, 200, bodyVectorOne)
	p := mustPrometheus(t, Config{URL: srv.URL})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if got := p.Scalar(context.Background(), "up", time.Now()); got.Status != OK {
				t.Errorf("got %+v", got)
			}
		})
	}
	wg.Wait()
	if queries, _ := ps.seen(); len(queries) != 8 {
		t.Fatalf("%d queries reached the server, want 8", len(queries))
	}
}

// inFlight is a Prometheus that counts the queries it serves at once.
type inFlight struct {
	mu       sync.Mutex
	now, top int
}

func (f *inFlight) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	f.now++
	f.top = max(f.top, f.now)
	f.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	f.mu.Lock()
	f.now--
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(bodyVectorOne))
}

func TestQueriesInFlightAreBounded(t *testing.T) {
	f := &inFlight{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	p := mustPrometheus(t, Config{URL: srv.URL, Timeout: 10 * time.Second, MaxConcurrent: 3})
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			if got := p.Scalar(context.Background(), "up", time.Now()); got.Status != OK {
				t.Errorf("query: %+v", got)
			}
		})
	}
	wg.Wait()
	if f.top != 3 {
		t.Errorf("%d queries in flight at most, want the bound of 3 reached and kept", f.top)
	}
}
