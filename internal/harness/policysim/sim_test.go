package policysim

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/modelship/modelship/internal/harness/fleet"
	"github.com/modelship/modelship/internal/harness/testenv"
)

// fixed asks for n replicas always.
type fixed struct{ n int32 }

func (f fixed) Name() string                 { return "fixed" }
func (f fixed) Interval() time.Duration      { return 15 * time.Second }
func (f fixed) Decide(time.Time, View) int32 { return f.n }

func loadTrace(t *testing.T) fleet.Trace {
	t.Helper()
	tr, err := fleet.LoadTrace(filepath.Join(testenv.RepoRoot(), "test", "traces", "azure-llm-2023-conv.csv"))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestEnoughReplicasMeetTheSLOAndTooFewDoNot(t *testing.T) {
	tr := loadTrace(t)
	o := Options{Trace: tr, RateScale: 4, Duration: 10 * time.Minute, ColdStart: time.Minute}
	few, err := Run(fixed{1}, o)
	if err != nil {
		t.Fatal(err)
	}
	many, err := Run(fixed{10}, o)
	if err != nil {
		t.Fatal(err)
	}
	if many.SLOAttainment < 0.8 || few.SLOAttainment > 0.2 {
		t.Errorf("SLO attainment: 10 replicas %.2f, 1 replica %.2f; want the load to fit 10 and overwhelm 1", many.SLOAttainment, few.SLOAttainment)
	}
	// 2 warm replicas at the start, then the fixed count (cold): GPU-hours follow the replicas held.
	if want := 10.0 * 10 / 60; many.GPUHours < want*0.95 || many.GPUHours > want*1.01 {
		t.Errorf("10 replicas for 10 minutes held %.2f GPU-hours, want about %.2f", many.GPUHours, want)
	}
	if many.ScaleEvents != 1 || many.OscillationsPerHr != 0 {
		t.Errorf("one scale-up from 2 to 10: %d events, %.1f oscillations/h", many.ScaleEvents, many.OscillationsPerHr)
	}
}

func TestHPAScaleUpIsRateLimitedAndScaleDownStabilized(t *testing.T) {
	h := HPAOnGPU()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := h.Decide(t0, View{Current: 2, Ready: 2, Scraped: 2, GPUUtilization: 700, HasGPU: true}); got != 6 {
		t.Errorf("from 2 at 10x the target: %d, want 6 (+max(100%%, 4 pods))", got)
	}
	cold := View{Current: 6, Ready: 6, Scraped: 6, GPUUtilization: 10, HasGPU: true}
	if got := h.Decide(t0.Add(time.Minute), cold); got != 6 {
		t.Errorf("scale-down within 300s of a higher recommendation: %d, want 6 held", got)
	}
	if got := h.Decide(t0.Add(6*time.Minute), cold); got != 2 {
		t.Errorf("after the window: %d, want min 2", got)
	}
}
