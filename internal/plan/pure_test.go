package plan

import (
	"os/exec"
	"strings"
	"testing"
)

// The decision packages are pure: neither they nor anything they import holds a network client
// (the Prometheus client, client-go's REST client, controller-runtime) or the adapters that do
// (package metrics, package signals). The I/O is the controller's observe and package signals'.
func TestTheDecisionPackagesHaveNoClient(t *testing.T) {
	forbidden := []string{
		"github.com/prometheus/client_golang/api",
		"k8s.io/client-go/rest",
		"sigs.k8s.io/controller-runtime",
		"github.com/modelship/modelship/internal/metrics",
		"github.com/modelship/modelship/internal/signals",
		"github.com/modelship/modelship/internal/controller",
	}
	for _, pkg := range []string{"../plan", "../autoscale", "../rollout", "../capacity", "../sample"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output() //nolint:noctx // a short lookup
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s imports %s", strings.TrimPrefix(pkg, "../"), dep)
				}
			}
		}
	}
}
