package warmup

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHTTPProber(t *testing.T) {
	loaded := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/pods/ml/llama-green-1/v1/models" {
			http.NotFound(w, r)
			return
		}
		if !loaded {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"data":[]}`))
	}))
	defer srv.Close()
	p := NewHTTPProber(time.Second, srv.URL+"/pods/{namespace}/{pod}/{path}")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "llama-green-1"}}
	if err := p.Probe(context.Background(), pod, 8000, "/v1/models"); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("a pod still loading its weights passed warm-up: %v", err)
	}
	loaded = true
	if err := p.Probe(context.Background(), pod, 8000, "/v1/models"); err != nil {
		t.Fatalf("a loaded pod failed warm-up: %v", err)
	}
}

func TestURLUsesPodIPWithoutTemplate(t *testing.T) {
	p := NewHTTPProber(time.Second, "")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{PodIP: "10.1.2.3"}}
	u, err := p.URL(pod, 8000, "/v1/models")
	if err != nil || u != "http://10.1.2.3:8000/v1/models" {
		t.Fatalf("URL = %q, %v", u, err)
	}
	if _, err := p.URL(&corev1.Pod{}, 8000, "/"); err == nil {
		t.Fatal("a pod without an IP must not be probed")
	}
}
