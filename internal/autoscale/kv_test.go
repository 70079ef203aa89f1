package autoscale

import "testing"

// kv sets the Ready pods' KV-cache use on a pass's input; a negative use: none read.
func kv(use float64) func(in *Input) {
	return func(in *Input) {
		if use >= 0 {
			in.KVCacheUsage = ok(use)
		}
	}
}

// The latencies hold with a wide margin, but the KV caches are 70% full: the engines are one
// step from the cliff where they admit nothing more and requests queue (long outputs fill the
// cache before the batch), which no latency shows before it is crossed. The capacity is not
// probed up, and the fleet keeps its replicas. The same windows with the caches a third full
// (or no KV-cache use read) probe as before.
func TestAFillingKVCacheStopsProbing(t *testing.T) {
	for _, tc := range []struct {
		name           string
		use            float64
		wantProbe      bool
		wantAtLeastCur int32
	}{
		{name: "caches 70% full", use: 0.7, wantAtLeastCur: 10},
		{name: "caches a third full", use: 1.0 / 3, wantProbe: true},
		{name: "no KV-cache use read", use: -1, wantProbe: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probing(t, kv(tc.use), tc.wantProbe, tc.wantAtLeastCur)
		})
	}
}

// KV caches 95% full on every replica, with latencies far within the SLO and a load that asks
// for no more: the guard scales up to keep them at sloShare of full, before they fill and
// requests queue; and a low load cannot scale down below the replicas the caches' use needs.
func TestTheKVGuardScalesUpBeforeTheCachesFill(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cur       int32
		load, use float64
		want      int32
	}{
		{name: "caches 95% full scale up", cur: 8, load: 8 * sloShare, use: 0.95, want: 9},
		{name: "without a KV-cache use the load decides", cur: 8, load: 8 * sloShare, use: -1, want: 8},
		{name: "a low load does not scale down below the caches' need", cur: 8, load: 2, use: 0.8, want: 8},
		{name: "a low load with caches nearly empty scales down", cur: 8, load: 2, use: 0.1, want: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			guardPass(t, tc.cur, tc.load, kv(tc.use), tc.want, kvPrefix)
		})
	}
}

// A full KV cache makes a window tight, never a miss.
func TestAFullKVCacheIsNoMiss(t *testing.T) {
	noMiss(t, kv(0.3), kv(1))
}
