// Package metrics is modelship's Prometheus adapter: typed query outcomes (a value, no data, or
// an error; never "no data" read as zero), PromQL templates and the vLLM/DCGM query presets.
package metrics

import (
	"context"
	"time"
)

// Status says whether a query gave a usable value.
type Status string

const (
	// OK means: Value holds a finite number.
	OK Status = "OK"
	// NoData means: the query succeeded but returned nothing usable (empty, NaN, Inf, stale,
	// or partial: an answer with a warning that data may be missing, see ErrPartialData).
	NoData Status = "NoData"
	// Error means: Prometheus could not be asked or answered with an error (unreachable, timeout, bad query).
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

// Querier runs PromQL instant queries. Implementations must be safe for concurrent use
// (analysis.Run runs a measurement's queries in parallel).
type Querier interface {
	// Scalar runs a query that should return a single value (a scalar, or a vector of one element).
	// Several series is NoData with a message (ambiguous); NaN and Inf are NoData; so is an
	// answer warning of partial data.
	Scalar(ctx context.Context, query string, at time.Time) Sample
	// Vector runs a query and returns its series; NaN/Inf elements are dropped. An answer
	// warning of partial data is an error that errors.Is ErrPartialData (no data, not an outage).
	Vector(ctx context.Context, query string, at time.Time) ([]Series, error)
}
