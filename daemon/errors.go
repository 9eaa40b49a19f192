package daemon

import "errors"

// ErrNoTarget is returned when an explicit --pid names no process.
var ErrNoTarget = errors.New("no such target process")

// ErrNotWritten is returned when the run's end leaves outputs unwritten: their last flush
// (their process's or the run's final one) failed to write them, and --out holds what an
// earlier flush wrote of them, if anything.
var ErrNotWritten = errors.New("outputs not written")
