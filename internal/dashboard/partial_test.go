package dashboard

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// Half a chart reads as a dip in utilization: an answer with a partial-response warning draws
// nothing and the page says why.
func TestGPUChartDrawsNothingFromAPartialAnswer(t *testing.T) {
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","warnings":["partial response: store-gw-1 unavailable"],` +
			`"data":{"resultType":"matrix","result":[{"metric":{},"values":[[1700000000,"3"]]}]}}`))
	}))
	t.Cleanup(prom.Close)
	pc, err := promapi.NewClient(promapi.Config{Address: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newTestServer(t, func(context.Context, string, string, Action) (string, error) { return "", nil },
		func(o *Options) {
			o.Prometheus = promv1.NewAPI(pc)
			o.Now = func() time.Time { return time.Unix(1700000000, 0) }
		})
	series, msg := s.gpuSeries(context.Background(), rollout(1, false))
	if len(series) != 0 {
		t.Errorf("series %+v from a partial answer, want none", series)
	}
	if !strings.Contains(msg, "partial") || !strings.Contains(msg, "store-gw-1 unavailable") {
		t.Errorf("message %q, want it to say the answer was partial and name the warning", msg)
	}
}
