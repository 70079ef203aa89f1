package manager

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelship/modelship/internal/testenv"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// serviceAccountToken creates a ServiceAccount in ns and returns a token for it.
func serviceAccountToken(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ServiceAccount %s: %v", name, err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrInt64(600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s: %v", name, err)
	}
	return tr.Status.Token
}

func ptrInt64(v int64) *int64 { return &v }

func TestMetricsEndpointRefusesUnauthenticatedAndUnauthorizedClients(t *testing.T) {
	ns := newNamespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(cfg)

	// The shipped metrics-reader ClusterRole, bound to the scraper's ServiceAccount.
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "metrics_reader_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		t.Fatalf("config/rbac/metrics_reader_role.yaml: %v", err)
	}
	role.Name = ns + "-metrics-reader"
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scraper := serviceAccountToken(t, cs, ns, "scraper")
	other := serviceAccountToken(t, cs, ns, "other")
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	addr := freeAddr(t)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(MetricsServerOptions(addr, true), cfg, hc)
	if err != nil {
		t.Fatalf("metrics server: %v", err)
	}
	go func() { _ = srv.Start(ctx) }()

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test certificate
	get := func(token string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer func() { _ = resp.Body.Close() }()
		return resp.StatusCode, nil
	}
	cases := []struct {
		name, token string
		want        int
	}{
		{"refuses a request without a token", "", http.StatusUnauthorized},
		// The filter answers 401 or, when the TokenReview itself errs, 500: refused either way.
		{"refuses a token the API server did not issue", "not-a-token", 0},
		{"forbids a valid token without the metrics-reader role", other, http.StatusForbidden},
		{"serves a token bound to the metrics-reader role", scraper, http.StatusOK},
	}
	for _, c := range cases {
		eventually(t, 30*time.Second, c.name, func() error {
			code, err := get(c.token)
			if err != nil {
				return err
			}
			if c.want == 0 && code >= 400 {
				return nil
			}
			if code != c.want {
				return fmt.Errorf("status %d, want %d", code, c.want)
			}
			return nil
		})
	}
	// Plain HTTP only when asked for.
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil { //nolint:noctx // one-off probe
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("the secure metrics endpoint served plain HTTP")
		}
	}
}
