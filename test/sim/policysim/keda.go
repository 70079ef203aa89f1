package policysim

import (
	"math"
	"time"
)

// KEDA is KEDA's Prometheus scaler feeding the HPA it creates (ScaledObject defaults): KEDA's
// operator polls the query every PollingInterval (30s) and the HPA, syncing every 15s, reads
// the last polled value through the external metrics API as an AverageValue target
// (threshold per replica). The query here is sum(vllm:num_requests_waiting).
type KEDA struct {
	hpa             *HPA
	PollingInterval time.Duration
	polledAt        time.Duration
	polled          bool
	value           float64
}

// NewKEDA scales on the total vLLM queue with threshold requests waiting per replica.
func NewKEDA(minR, maxR int32, threshold float64) *KEDA {
	k := &KEDA{PollingInterval: 30 * time.Second}
	k.hpa = NewHPA("keda-queue", minR, maxR, threshold, true, func(Signals) (float64, bool) { return k.value, k.polled })
	return k
}

// Name implements Policy.
func (k *KEDA) Name() string { return k.hpa.Label }

// Interval implements Policy: the HPA's sync period.
func (k *KEDA) Interval() time.Duration { return k.hpa.SyncPeriod }

// Decide implements Policy: poll when the polling interval has passed, then the HPA decides on
// the last polled value.
func (k *KEDA) Decide(s Signals) int32 {
	if !k.polled || s.Now-k.polledAt >= k.PollingInterval {
		k.value, k.polled, k.polledAt = s.Waiting, true, s.Now
		if math.IsNaN(k.value) || math.IsInf(k.value, 0) {
			// KEDA v2.21's Prometheus scaler with its default ignoreNullValues: a NaN or
			// infinite sample is 0 (pkg/scalers/prometheus_scaler.go), as an empty result is.
			k.value = 0
		}
	}
	return k.hpa.Decide(s)
}
