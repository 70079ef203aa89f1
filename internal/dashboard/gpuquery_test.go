package dashboard

import (
	"regexp"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// The GPU chart reads the pods of the color's Deployment only: a dot in the ModelServer's name
// matches a dot, and another ModelServer whose name extends this one is not read.
func TestGPUQueryReadsOnlyTheColorsPods(t *testing.T) {
	ms := &v1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "llama-3.1-8b"}}
	q := GPUQuery(ms, v1alpha1.Blue)
	m := regexp.MustCompile(`,pod=~("(?:[^"\\]|\\.)*")`).FindStringSubmatch(q)
	if m == nil {
		t.Fatalf("no pod matcher in %s", q)
	}
	expr, err := strconv.Unquote(m[1])
	if err != nil {
		t.Fatal(err)
	}
	pods := regexp.MustCompile("^(?:" + expr + ")$") // Prometheus anchors regex matchers
	for pod, want := range map[string]bool{
		"llama-3.1-8b-blue-7d9c8b6f5-x2k9p":   true,
		"llama-3.1-8b-green-7d9c8b6f5-x2k9p":  false,
		"llama-3x1-8b-blue-7d9c8b6f5-x2k9p":   false,
		"llama-3.1-8b-blue-2-blue-6f5d-x2k9p": false,
	} {
		if got := pods.MatchString(pod); got != want {
			t.Errorf("pod %s matched %v, want %v (query %s)", pod, got, want, q)
		}
	}
}
