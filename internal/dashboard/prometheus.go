package dashboard

import (
	"context"
	"fmt"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// chartWindow is how far back the charts read Prometheus.
const chartWindow = time.Hour

// GPUQuery is the PromQL of one color's average GPU utilization: DCGM's gauge over the pods of
// the color's Deployment (and no other's: a dot in the name is literal), whether the exporter labels them pod/namespace or, behind a
// ServiceMonitor with honorLabels off, exported_pod/exported_namespace.
func GPUQuery(ms *v1alpha1.ModelServer, c v1alpha1.Color) string {
	pods := metrics.PodRegex(ms.DeploymentName(c))
	return fmt.Sprintf(`avg(DCGM_FI_DEV_GPU_UTIL{namespace=%q,pod=~%q} or DCGM_FI_DEV_GPU_UTIL{exported_namespace=%q,exported_pod=~%q})`,
		ms.Namespace, pods, ms.Namespace, pods)
}

// gpuSeries reads each color's GPU utilization over the last hour at a step that gives about
// 120 points; it returns the series by color, or why there are none (an answer warning of
// partial data is none).
func (s *Server) gpuSeries(ctx context.Context, ms *v1alpha1.ModelServer) (map[string][]Point, string) {
	end := s.opts.Now()
	r := promv1.Range{Start: end.Add(-chartWindow), End: end, Step: chartWindow / 120}
	out := map[string][]Point{}
	for _, c := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
		v, warnings, _, err := s.opts.Prometheus.QueryRange(ctx, GPUQuery(ms, c), r)
		if err != nil {
			return nil, "Prometheus: " + err.Error()
		}
		if w, partial := metrics.PartialWarning(warnings); partial {
			// Half a chart reads as a dip in utilization: draw none and say why.
			return nil, "Prometheus answered with partial data, not drawn: " + w
		}
		m, ok := v.(model.Matrix)
		if !ok {
			return nil, fmt.Sprintf("Prometheus answered a %s, not a matrix", v.Type())
		}
		var pts []Point
		for _, series := range m {
			for _, p := range series.Values {
				pts = append(pts, Point{At: p.Timestamp.Time(), Value: float64(p.Value)})
			}
		}
		out[string(c)] = pts
	}
	return out, ""
}
