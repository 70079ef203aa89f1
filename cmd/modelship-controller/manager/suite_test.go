package manager

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/modelship/modelship/internal/testenv"
)

// The metrics endpoint test runs against a real kube-apiserver (its TokenReviews and
// SubjectAccessReviews); without the control plane binaries it is skipped.
var (
	cfg       *rest.Config
	nsCounter atomic.Int32
)

func TestMain(m *testing.M) {
	if ok, why := testenv.Available(); !ok {
		fmt.Println("skipping the manager's integration tests:", why)
		os.Exit(m.Run())
	}
	env, c, err := testenv.Start()
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	cfg = c
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Println("stopping envtest:", err)
	}
	os.Exit(code)
}

// newNamespace creates a namespace of the test's own.
func newNamespace(t *testing.T) string {
	t.Helper()
	if cfg == nil {
		_, why := testenv.Available()
		t.Skip(why)
	}
	name := fmt.Sprintf("t%d-%d", nsCounter.Add(1), time.Now().UnixNano()%100000)
	cs := kubernetes.NewForConfigOrDie(cfg)
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return name
}

// eventually retries cond every 100ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: still not true after %s: %v", what, timeout, err)
}
