package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// heldProber answers each pod's probe with what the test sends on that pod's channel.
type heldProber struct {
	mu     sync.Mutex
	answer map[string]chan error
	probes map[string]int
}

func (h *heldProber) probe(ctx context.Context, p *corev1.Pod) error {
	h.mu.Lock()
	h.probes[p.Name]++
	ch := h.answer[p.Name]
	h.mu.Unlock()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *heldProber) count(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.probes[name]
}

// TestWarmthKeepsEachPodsOutcome: a pod is probed once at a time; a probe that ends after its
// pass stopped waiting records its outcome for the next pass and wakes the ModelServer; a pod
// that passed is not probed again, a cold one is; the outcomes go with their pods.
func TestWarmthKeepsEachPodsOutcome(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := types.NamespacedName{Namespace: "ml", Name: "llama"}
	woken := make(chan types.NamespacedName, 4)
	w := newWarmth(ctx, 0, time.Minute, func(k types.NamespacedName) { woken <- k })
	h := &heldProber{answer: map[string]chan error{"a": make(chan error), "b": make(chan error)}, probes: map[string]int{}}
	pods := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "uid-a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "uid-b"}}}

	if got := w.check(ctx, key, pods, h.probe); len(got) != 0 {
		t.Fatalf("while the probes run: passed %v, want none", got)
	}
	h.answer["b"] <- errors.New("503: model loading") // b's probe ended: a's still runs
	w.check(ctx, key, pods, h.probe)                  // starts nothing: the batch runs
	h.answer["a"] <- nil
	if k := <-woken; k != key {
		t.Fatalf("woke %v, want %v", k, key)
	}
	if n := h.count("a"); n != 1 {
		t.Fatalf("a pod whose probe was in flight was probed again: %d probes", n)
	}

	got := w.check(ctx, key, pods, h.probe)
	if !got["uid-a"] || got["uid-b"] || !w.passed("uid-a") {
		t.Fatalf("after a passed and b failed: passed %v", got)
	}
	h.answer["b"] <- errors.New("503: model loading") // b, cold, was probed again
	if a, b := h.count("a"), h.count("b"); a != 1 || b != 2 {
		t.Fatalf("probes a=%d b=%d, want a once (it passed) and b twice (once per batch)", a, b)
	}

	w.prune(key, map[types.UID]bool{"uid-b": true})
	if w.passed("uid-a") {
		t.Fatal("a pod that is gone is still remembered")
	}
}
