// Package scalebench is the harness of `modelship-bench scale`: it runs the controller binary
// against the local control plane with many ModelServers and reads its figures.
package scalebench

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
)

// PromStub answers the Prometheus HTTP API with empty results and counts the queries: the
// bench measures how many queries the controller sends per interval, not what they return (with
// no data the analysis is inconclusive and the autoscaler holds, as on a Prometheus without the
// series). It is a counting stub, not a Prometheus.
type PromStub struct {
	URL     string
	queries atomic.Int64
	srv     *http.Server
}

// StartPromStub serves on a free loopback port.
func StartPromStub() (*PromStub, error) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &PromStub{URL: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	empty := func(resultType string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			s.queries.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"` + resultType + `","result":[]}}`))
		}
	}
	mux.HandleFunc("/api/v1/query", empty("vector"))
	mux.HandleFunc("/api/v1/query_range", empty("matrix"))
	s.srv = &http.Server{Handler: mux}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Queries is the number of queries answered so far.
func (s *PromStub) Queries() int64 { return s.queries.Load() }

// Close stops it.
func (s *PromStub) Close() { _ = s.srv.Close() }
