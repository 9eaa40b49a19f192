package jitmap

import (
	"errors"
	"fmt"
)

// Sentinel errors. Decoder errors come back as *DecodeError wrapping one of these; test them
// with errors.Is.
var (
	// ErrStreamDead marks a fatal decode error: the stream cannot be resynchronised (a jitdump
	// header or record length that cannot be trusted) and the Decoder ignores everything after
	// it. Events decoded before it stay valid.
	ErrStreamDead = errors.New("stream dead")
	// ErrNewSession: a jitdump header where a record or a line should go on: another writer's
	// session begins there (the stream is a FIFO that two writers used one after the other,
	// or a writer died mid-record and another started). It ends the Decoder as ErrStreamDead
	// does; a Stream starts a new Decoder at it.
	ErrNewSession = errors.New("a new jitdump session begins")
	// ErrRecordTooLarge: a header or record claims more than DecoderOptions.MaxRecordBytes.
	ErrRecordTooLarge = errors.New("record too large")
	// ErrMalformed: a record's fields contradict its size or each other; it is skipped.
	ErrMalformed = errors.New("malformed record")
	// ErrTruncated: the stream ended (Decoder.Finish) inside a record.
	ErrTruncated = errors.New("truncated record")
	// ErrBadLine: a perf-map line that is not "START SIZE NAME"; it is skipped.
	ErrBadLine = errors.New("bad perf-map line")
	// ErrLineTooLong: a perf-map line longer than DecoderOptions.MaxLineBytes; it is skipped.
	ErrLineTooLong = errors.New("perf-map line too long")
	// ErrPidMismatch: a jitdump record names a process other than the stream's owner; it is
	// dropped so that one process cannot describe another's address space.
	ErrPidMismatch = errors.New("record for another process")
	// ErrBudget: a load or move the Map refused because the process holds as many objects
	// or bytes as MapOptions allow.
	ErrBudget = errors.New("over the process's symbol budget")
	// ErrUnknownCode: a move or unload names code the Map does not hold live.
	ErrUnknownCode = errors.New("no live code object there")
	// ErrArchTimestamps: a jitdump header says its record times are the machine's cycle
	// counter (JitdumpFlagArchTimestamp: perf's Java agent run with
	// JITDUMP_USE_ARCH_TIMESTAMP=1), which sample times cannot be compared with. Reported once,
	// for the header; the records are decoded, each timed as it is decoded
	// (DecoderOptions.Now) and each load taken as a perf-map line is (CodeLoad.TimeUnknown).
	ErrArchTimestamps = errors.New("record times are cycle-counter values, not CLOCK_MONOTONIC: records are timed as they are read")
	// ErrClockAhead: a jitdump record is timed more than a second after the moment it is
	// decoded (DecoderOptions.Now, after ClockOffsetNs): its JIT's clock is not
	// CLOCK_MONOTONIC (CLOCK_REALTIME, say). Reported once per session, at that record; from
	// it on, the session's records are timed as with ErrArchTimestamps.
	ErrClockAhead = errors.New("record timed ahead of CLOCK_MONOTONIC: from here on, records are timed as they are read")
)

// DecodeError reports one bad record or line of a stream. Offset is the stream byte offset of
// the record's (or line's) first byte.
type DecodeError struct {
	Offset   int64
	Format   Format
	RecordID uint32 // jitdump record id; 0 for the header and for perf-map lines
	Err      error  // wraps a sentinel above
}

func (e *DecodeError) Error() string {
	if e.Format == FormatJitdump {
		return fmt.Sprintf("jitmap: jitdump record %#x at offset %d: %v", e.RecordID, e.Offset, e.Err)
	}
	return fmt.Sprintf("jitmap: %v at offset %d: %v", e.Format, e.Offset, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Fatal reports whether the error ended the stream (errors.Is(e, ErrStreamDead)).
func (e *DecodeError) Fatal() bool { return errors.Is(e.Err, ErrStreamDead) }

// ErrMemoryBudget: a load the Map refused because the processes together hold as many bytes
// as MapOptions.MaxBytes allows and this one holds more than its share. It is an ErrBudget.
var ErrMemoryBudget = fmt.Errorf("over the symbol budget of all processes together: %w", ErrBudget)
