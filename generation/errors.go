// Package generation is the use-case layer of marspec: one request is validated once into a
// Plan (mode, packs, classes, sampling and speculative settings with defaults and presets
// filled in), and a Plan is run into images with statistics. The CLI, the scheduler and the
// server all go through it, so a setting is checked in one place.
package generation

import (
	"errors"
	"fmt"
)

// ErrInvalid is what every request defect wraps: callers test errors.Is(err, ErrInvalid) to
// tell bad input (HTTP 400, a one-line CLI message) from failures of the runtime.
var ErrInvalid = errors.New("invalid request")

// FieldError is one defect of a request: the field (as named on the wire and on the command
// line, e.g. "temperature"), the value given, and what is allowed.
type FieldError struct {
	Field   string
	Value   string
	Allowed string
	Reason  string // optional; replaces the generic "out of range"
}

func (e *FieldError) Error() string {
	reason := e.Reason
	if reason == "" {
		reason = "out of range"
	}
	msg := fmt.Sprintf("%s %s: %s", e.Field, e.Value, reason)
	if e.Value == "" {
		msg = fmt.Sprintf("%s: %s", e.Field, reason)
	}
	if e.Allowed != "" {
		msg += " (allowed: " + e.Allowed + ")"
	}
	return msg
}

// Unwrap makes every FieldError match ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func fieldErr(field string, value any, allowed, reason string) error {
	return fmt.Errorf("%w", &FieldError{Field: field, Value: fmt.Sprint(value), Allowed: allowed, Reason: reason})
}

// Field returns the field of the first FieldError in err's chain, or "".
func Field(err error) string {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}
