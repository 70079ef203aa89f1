package signals

import (
	"context"
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// scalarQuerier answers Scalar by the first counter name a query contains.
type scalarQuerier map[string]metrics.Sample

func (s scalarQuerier) Scalar(_ context.Context, q string, _ time.Time) metrics.Sample {
	for name, v := range s {
		if strings.Contains(q, name) {
			return v
		}
	}
	return metrics.Sample{Status: metrics.NoData}
}

func (scalarQuerier) Vector(context.Context, string, time.Time) ([]metrics.Series, error) {
	return nil, nil
}

// The SLO's source reads the requests served per second beside the token work (the fast
// path's arrival rate), from the engine's own counter, and none without the token work.
func TestTheSLOSourceReadsTheRequestsServed(t *testing.T) {
	ok := func(v float64) metrics.Sample { return metrics.Sample{Status: metrics.OK, Value: v} }
	for _, tc := range []struct {
		name   string
		preset v1alpha1.AnalysisPreset
		prom   scalarQuerier
		want   float64
		status metrics.Status
	}{
		{name: "vLLM's finished requests", prom: scalarQuerier{"vllm:prompt_tokens_total": ok(2), "vllm:request_success_total": ok(30)}, want: 30, status: metrics.OK},
		{name: "SGLang's finished requests", preset: v1alpha1.AnalysisPresetSGLang, prom: scalarQuerier{"sglang:prompt_tokens_total": ok(2), "sglang:num_requests_total": ok(12)}, want: 12, status: metrics.OK},
		{name: "no token work, no served rate", prom: scalarQuerier{"vllm:request_success_total": ok(30)}, status: metrics.NoData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := autoscaled()
			ms.Spec.Autoscaling.SLO = &v1alpha1.LatencySLO{TTFTP95: &v1alpha1.Duration{Duration: 2 * time.Second}}
			ms.Spec.Rollout.Analysis.Preset = tc.preset
			got, err := Gather(context.Background(), []Source{tokenWork{prom: tc.prom}}, Target{ModelServer: ms}, t0)
			if err != nil {
				t.Fatal(err)
			}
			if got.Served.Status != tc.status || (tc.status == metrics.OK && got.Served.Value != tc.want) {
				t.Fatalf("served %+v, want %s %g", got.Served, tc.status, tc.want)
			}
		})
	}
}

// filledQuerier answers the token work with 2, and FilledQuery's count with filled.
type filledQuerier struct{ filled metrics.Sample }

func (f filledQuerier) Scalar(_ context.Context, q string, _ time.Time) metrics.Sample {
	switch {
	case strings.HasPrefix(q, "count_over_time("):
		return f.filled
	case strings.Contains(q, "vllm:prompt_tokens_total"):
		return metrics.Sample{Status: metrics.OK, Value: 2}
	}
	return metrics.Sample{Status: metrics.NoData}
}

func (filledQuerier) Vector(context.Context, string, time.Time) ([]metrics.Series, error) {
	return nil, nil
}

// The SLO's token work says whether its window is still filling, from FilledQuery over the
// same rendered query and the serving window; a query without an answer (or an error) is a
// window filling, from which nothing is learnt.
func TestTheSLOsTokenWorkSaysWhetherItsWindowIsFilling(t *testing.T) {
	for _, tc := range []struct {
		name   string
		filled metrics.Sample
		want   bool
	}{
		{name: "full", filled: metrics.Sample{Status: metrics.OK, Value: 4}},
		{name: "filling", filled: metrics.Sample{Status: metrics.NoData}, want: true},
		{name: "an error", filled: metrics.Sample{Status: metrics.Error, Message: "timeout"}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := autoscaled()
			ms.Spec.Autoscaling.SLO = &v1alpha1.LatencySLO{TTFTP95: &v1alpha1.Duration{Duration: 2 * time.Second}}
			got, err := Gather(context.Background(), []Source{tokenWork{prom: filledQuerier{tc.filled}}}, Target{ModelServer: ms}, t0)
			if err != nil {
				t.Fatal(err)
			}
			if got.Load.Status != metrics.OK || got.Load.Value != 2 || got.Load.Filling != tc.want {
				t.Fatalf("load %+v, want 2 with filling %v", got.Load, tc.want)
			}
		})
	}
}
