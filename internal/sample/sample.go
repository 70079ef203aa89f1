// Package sample is the typed outcome of a metric query, shared by the pure decision packages
// and the adapters that fetch: a value, no data, or an error (never "no data" read as zero). It
// has no client: package metrics (the Prometheus adapter) and package signals (the autoscaling
// sources) fill it, package autoscale decides on it. Look, the look at which a rollout's
// measurement is judged, is shared the same way: package rollout fills it, package analysis
// judges on it.
package sample

import "errors"

// Status says whether a query gave a usable value.
type Status string

const (
	// OK means: Value holds a finite number.
	OK Status = "OK"
	// NoData means: the query succeeded but returned nothing usable (empty, NaN, Inf, stale,
	// or partial: an answer with a warning that data may be missing, see ErrPartialData).
	NoData Status = "NoData"
	// Error means: the source could not be asked or answered with an error (unreachable,
	// timeout, bad query).
	Error Status = "Error"
)

// Sample is the typed outcome of an instant query expected to return one value.
type Sample struct {
	Status Status
	// Value is meaningful only when Status is OK.
	Value float64
	// Message says why there is no value (for NoData and Error).
	Message string
}

// Series is one element of an instant vector.
type Series struct {
	Labels map[string]string
	Value  float64
}

// ErrPartialData is what a query whose answer warns of missing data is (errors.Is): a Thanos
// Querier that could not reach a store (partial response), a VictoriaMetrics cluster missing
// storage nodes (isPartial), a Prometheus whose remote read failed, PromQL dropping series it
// could not evaluate. Part of the data is no data: a
// scale-down or a promotion must not follow half of the pods or half of the replicas.
var ErrPartialData = errors.New("prometheus answered with partial data")
