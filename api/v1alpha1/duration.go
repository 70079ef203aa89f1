package v1alpha1

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a length of time written as a Go duration: a number and a unit, such as 90s, 2m
// or 1h30m (units h, m, s, ms, us, ns).
//
// Reading a Duration from JSON never fails. Admission refuses a malformed one, but an object
// stored before that rule existed (or by an older CRD) may still hold one, such as "2 minutes";
// failing to decode it would make the whole ModelServer list unreadable, and with it every
// other ModelServer. Such a Duration reads as zero and keeps its text: Err says what is wrong,
// and writing it back gives the same text, so that nothing the user wrote is lost.
//
// The API's Duration fields are tagged omitzero: a zero Duration (left unset in Go) is not
// written, so that the API server fills in the field's default instead of refusing "0s".
//
// The format is checked here, once, for every Duration field (controller-gen copies a type's
// validation onto each field of the type, and the API server puts the field's path before the
// message); each field adds only its bounds (positive, at most 1h, ...). The format is Go's, as
// UnmarshalJSON reads it: an optional sign and numbers with units, or 0 (units µs and μs aside).
//
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:XValidation:rule="self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|ms|s|m|h))+)$')",message="must be a duration such as 90s, 2m or 1h30m: a number and a unit (h, m, s, ms, us, ns), with no space"
type Duration struct {
	// Duration is the length of time; zero when the text did not parse.
	Duration time.Duration `json:"-"`

	// Invalid is the JSON value, exactly as it was read, of a duration that did not parse
	// ("2 minutes", a number); empty for a valid one. It is not part of the API's schema:
	// MarshalJSON writes it back as it came. Exported only so that
	// equality.Semantic.DeepEqual, which refuses unexported fields, can compare it.
	Invalid string `json:"-"`
}

// Err says why the value the Duration was read from is not a duration, or nil when it is one.
func (d Duration) Err() error {
	if d.Invalid == "" {
		return nil
	}
	var s string
	if err := json.Unmarshal([]byte(d.Invalid), &s); err != nil {
		return fmt.Errorf("%s is not a duration: write a string such as 90s, 2m or 1h30m", d.Invalid)
	}
	if _, err := time.ParseDuration(s); err != nil {
		return fmt.Errorf("%s is not a duration such as 90s, 2m or 1h30m: %w", d.Invalid, err)
	}
	return fmt.Errorf("%s is not a duration such as 90s, 2m or 1h30m", d.Invalid)
}

// String returns the duration as Go writes it (2m0s), or the value that did not parse (the
// text of a string, else the JSON).
func (d Duration) String() string {
	if d.Invalid != "" {
		var s string
		if err := json.Unmarshal([]byte(d.Invalid), &s); err == nil {
			return s
		}
		return d.Invalid
	}
	return d.Duration.String()
}

// MarshalJSON writes the duration as a string (2m0s), or the value that did not parse exactly
// as it was read.
func (d Duration) MarshalJSON() ([]byte, error) {
	if d.Invalid != "" {
		if !json.Valid([]byte(d.Invalid)) {
			// Set by hand rather than read: write it as a string.
			return json.Marshal(d.Invalid)
		}
		return []byte(d.Invalid), nil
	}
	return json.Marshal(d.Duration.String())
}

// UnmarshalJSON reads a duration string. It never fails: a value that is not a duration (a
// string such as "2 minutes", an empty string, a number) reads as zero and is kept for Err and
// MarshalJSON.
func (d *Duration) UnmarshalJSON(b []byte) error {
	*d = Duration{}
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if v, err := time.ParseDuration(s); err == nil {
			d.Duration = v
			return nil
		}
	}
	if !json.Valid(b) {
		// Not reachable from encoding/json, which passes only valid values; kept safe to write back.
		b, _ = json.Marshal(string(b))
	}
	d.Invalid = string(b)
	return nil
}
