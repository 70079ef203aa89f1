// Package metrics is modelship's Prometheus adapter: typed query outcomes (a value, no data, or
// an error; never "no data" read as zero), PromQL templates and the vLLM/DCGM query presets.
package metrics

import (
	"context"
	"time"

	"github.com/modelship/modelship/internal/sample"
)

// The typed outcomes live in package sample, which has no client, so that the pure decision
// packages need not import this adapter; these names are the same types.
type (
	// Status says whether a query gave a usable value (sample.Status).
	Status = sample.Status
	// Sample is the typed outcome of an instant query expected to return one value.
	Sample = sample.Sample
	// Series is one element of an instant vector.
	Series = sample.Series
)

const (
	// OK means: Value holds a finite number.
	OK = sample.OK
	// NoData means: the query succeeded but returned nothing usable.
	NoData = sample.NoData
	// Error means: Prometheus could not be asked or answered with an error.
	Error = sample.Error
)

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
