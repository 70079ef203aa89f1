package fleet

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/modelship/modelship/internal/telemetry"
)

// TestServesEveryModelServerSeriesTheDashboardQueries checks that the simulator serves every
// model server (vLLM), GPU (DCGM) and endpoint picker series that config/grafana/modelship.json
// queries. The controller's own series are checked by internal/controller's
// TestEveryMetricTheDashboardQueriesIsServed, which leaves these to this test.
func TestServesEveryModelServerSeriesTheDashboardQueries(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "grafana", "modelship.json"))
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, n := range telemetry.DescribedNames(New(Config{}, time.Now())) {
		served[n] = true
	}
	// The same prefixes as internal/controller's modelServerSeries.
	series := regexp.MustCompile(`\b(vllm:[a-z_:]+|DCGM_[A-Z_]+|inference_(pool|objective)_[a-z_]+)`)
	suffix := regexp.MustCompile(`_(bucket|sum|count)$`)
	checked := 0
	for _, m := range series.FindAllStringSubmatch(string(b), -1) {
		name := m[1]
		checked++
		if !served[name] && !served[suffix.ReplaceAllString(name, "")] {
			t.Errorf("the dashboard queries %s, which the fleet simulator does not serve", name)
		}
	}
	if checked < 4 {
		t.Errorf("only %d model server series found in the dashboard", checked)
	}
}
