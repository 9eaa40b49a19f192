package daemon

import "errors"

// ErrNoTarget is returned when an explicit --pid names no process.
var ErrNoTarget = errors.New("no such target process")
