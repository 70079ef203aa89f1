package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelship/modelship/internal/capacity"
)

// DefaultCapacityInterval is how long one view of the nodes and of the GPUs their pods hold
// serves every ModelServer's capacity check.
const DefaultCapacityInterval = 5 * time.Second

// clusterView shares one capacity.Cluster (the nodes, and the GPUs each node's pods hold)
// between passes and rebuilds it from the informer cache at most once per interval: the
// capacity check no longer walks every pod of the cluster for every ModelServer. A pass sees
// nodes and pods at most an interval old; the scheduler has the last word anyway.
type clusterView struct {
	interval time.Duration

	mu    sync.Mutex
	at    time.Time
	view  *capacity.Cluster
	built int // how many times the view was built (for tests)
}

func (v *clusterView) get(ctx context.Context, r client.Reader, now time.Time) (*capacity.Cluster, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.view != nil && !now.Before(v.at) && now.Sub(v.at) < v.interval {
		return v.view, nil
	}
	// Read-only views of the cache: no deep copy of every node and pod. The objects are
	// never modified, and the cache replaces rather than changes an object it holds.
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	v.view, v.at = capacity.NewCluster(nodes.Items, pods.Items), now
	v.built++
	return v.view, nil
}
