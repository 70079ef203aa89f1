package signals

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelship/modelship/internal/autoscale"

	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/sample"
)

// partialPrometheus speaks Prometheus' HTTP API as a Thanos Querier does when one of its stores
// is down: it answers the GPU utilization query with the series it could read (two pods of four,
// idle) and a warning that the answer is partial; warn false answers the same without the
// warning.
func partialPrometheus(t *testing.T, warn bool) *metrics.Prometheus {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.Form.Get("query") != QueryGPUUtilization {
			_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
			return
		}
		warnings := ""
		if warn {
			warnings = `"warnings":["partial response: receive series from store-gw-1:10901: rpc error: code = Unavailable"],`
		}
		_, _ = w.Write([]byte(`{"status":"success",` + warnings + `"data":{"resultType":"vector","result":[` +
			`{"metric":{"namespace":"ml","pod":"llama-blue-0"},"value":[1772366400,"5"]},` +
			`{"metric":{"namespace":"ml","pod":"llama-blue-1"},"value":[1772366400,"5"]}]}}`))
	}))
	t.Cleanup(srv.Close)
	p, err := metrics.NewPrometheus(metrics.Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A partial answer is no data: four pods at work whose Prometheus answered for two idle pods
// and warned that stores were missing keep their four replicas, and MetricsAvailable says why;
// the same answer without the warning (two pods reporting, two Ready without a sample) is what
// the rules see as data.
func TestAPartialResponseIsNoDataAndHoldsTheCount(t *testing.T) {
	spec := newSpec(1, 8, withGPU(70), noWindow)
	ready := []autoscale.PodKey{pod("ml", "llama-blue-0"), pod("ml", "llama-blue-1"), pod("ml", "llama-blue-2"), pod("ml", "llama-blue-3")}

	snap, err := Fetch(context.Background(), partialPrometheus(t, true), DefaultQueries(), t0)
	if err == nil || !strings.Contains(err.Error(), "partial") {
		t.Errorf("Fetch error = %v, want one naming the partial answer", err)
	}
	got := snap.Observe(spec, ready)
	if len(got) != 1 || got[0].Status != sample.NoData || !strings.Contains(got[0].Message, "partial response") {
		t.Fatalf("observations = %+v, want one NoData naming the partial response", got)
	}
	out := autoscale.Decide(autoscale.Input{Spec: spec, Current: 4, Ready: 4, Observations: got}, t0)
	if out.Desired != 4 {
		t.Errorf("desired = %d on a partial answer, want 4 held", out.Desired)
	}
	if out.MetricsAvailable || !strings.Contains(out.MetricsMessage, "partial response") {
		t.Errorf("MetricsAvailable = %v (%q), want false naming the partial response", out.MetricsAvailable, out.MetricsMessage)
	}

	// Without the warning the two idle pods are data: the rules act on them (they count the
	// two pods without a sample at target, and scale down to 3).
	snap, err = Fetch(context.Background(), partialPrometheus(t, false), DefaultQueries(), t0)
	if err != nil {
		t.Fatal(err)
	}
	got = snap.Observe(spec, ready)
	if len(got) != 1 || got[0].Status != sample.OK {
		t.Fatalf("observations without the warning = %+v, want OK", got)
	}
	if out := autoscale.Decide(autoscale.Input{Spec: spec, Current: 4, Ready: 4, Observations: got}, t0); out.Desired >= 4 {
		t.Errorf("desired = %d without the warning, want a scale-down: the test's answer must be one the rules act on", out.Desired)
	}
}
