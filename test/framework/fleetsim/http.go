package fleetsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/modelship/modelship/test/framework/fleet"
)

// NewHandler serves the fleet over HTTP:
//   - GET /metrics: every simulated pod's vLLM and DCGM series (Prometheus text format);
//   - GET /pods/{namespace}/{pod}/{path...}: the pod's own endpoints for warm-up checks: 503 while
//     the model loads, 200 once it serves (/v1/models lists the model as vLLM does), 404 for a
//     pod the simulator does not know;
//   - GET /healthz: 200;
//   - GET /loadgen/responses, when a LoadGenerator is among extra: its counts as JSON
//     ([]ResponseCount).
//
// extra collectors are served on /metrics beside the fleet's.
func NewHandler(f *fleet.Fleet, now func() time.Time, extra ...prometheus.Collector) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(f); err != nil {
		return nil, fmt.Errorf("registering the fleet collector: %w", err)
	}
	mux := http.NewServeMux()
	for _, c := range extra {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering a collector: %w", err)
		}
		if g, ok := c.(*LoadGenerator); ok {
			mux.HandleFunc("GET /loadgen/responses", func(w http.ResponseWriter, _ *http.Request) {
				writeJSON(w, http.StatusOK, g.Counts())
			})
		}
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /pods/{namespace}/{pod}/{path...}", func(w http.ResponseWriter, r *http.Request) {
		ns, name := r.PathValue("namespace"), r.PathValue("pod")
		loaded, known := f.Loaded(ns, name, now())
		switch {
		case !known:
			http.Error(w, fmt.Sprintf("pod %s/%s is not a simulated model server", ns, name), http.StatusNotFound)
			return
		case !loaded:
			http.Error(w, "model is loading", http.StatusServiceUnavailable)
			return
		}
		if r.PathValue("path") != "v1/models" {
			_, _ = w.Write([]byte("ok\n"))
			return
		}
		model := ""
		for _, s := range f.Pods() {
			if s.Pod.Namespace == ns && s.Pod.Name == name {
				model = s.Pod.ModelName
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"object": "list",
			"data":   []map[string]any{{"id": model, "object": "model", "owned_by": "vllm"}},
		})
	})
	return mux, nil
}

func joinErrors(errs []error) error { return errors.Join(errs...) }
