package jitmap

import (
	"bytes"
	"fmt"

	"github.com/profd/profd/codeobj"
)

// Default bounds of DecoderOptions.
const (
	DefaultMaxRecordBytes = 16 << 20 // 16 MiB: a jitdump header or record claiming more is fatal
	DefaultMaxLineBytes   = 16 << 10 // 16 KiB: a longer perf-map line is reported and skipped
)

// DecoderOptions tunes a Decoder. The zero value is usable.
type DecoderOptions struct {
	// Now returns CLOCK_MONOTONIC nanoseconds; it stamps perf-map loads (perf-map lines carry
	// no time) and the records of a jitdump whose times are of another clock
	// (ErrArchTimestamps, ErrClockAhead, which it tells). nil leaves their times 0 (a load
	// "live since always"), and a jitdump's times are then taken as written.
	Now func() int64
	// MaxRecordBytes bounds a jitdump header or record, and so the Decoder's buffer. A larger
	// claim is a fatal *DecodeError (ErrRecordTooLarge, ErrStreamDead): a length that large
	// cannot be told from corruption. 0 means DefaultMaxRecordBytes.
	MaxRecordBytes int
	// MaxLineBytes bounds a perf-map line; longer lines are reported and skipped.
	// 0 means DefaultMaxLineBytes.
	MaxLineBytes int
	// ClockOffsetNs is how far the stream's process's CLOCK_MONOTONIC is ahead of the
	// Decoder's (Now's): its time namespace's offset (procfs.MonotonicOffset). It is taken
	// off every jitdump record's time. 0: the same clock.
	ClockOffsetNs int64
	// NamespacePid is the stream's process's pid in its own pid namespace, when that is not
	// the pid the Decoder was made for: a JIT in a container writes that pid in its jitdump
	// records, and records carrying it are the process's (given the Decoder's pid). 0: none.
	NamespacePid uint32
}

// Decoder turns one JIT symbol stream (jitdump or perf-map text, told apart by its first
// bytes) into Events. It is streaming: Write takes the stream split anywhere, and the events
// do not depend on how it was split.
//
// Error handling: a bad perf-map line, and a jitdump record whose length is sane but whose
// contents are not, are reported as *DecodeError and skipped; decoding goes on. A jitdump
// header or record length that is out of bounds (under the fixed size, or over
// MaxRecordBytes) cannot be skipped with confidence: it is reported as a *DecodeError that
// wraps ErrStreamDead, and the Decoder ignores all later input (Err reports it; Leftover
// returns it). A jitdump header where a record or line should go on, or inside one, ends
// the Decoder the same way with ErrNewSession: it decodes one writer session; a Stream
// decodes a sequence of them.
//
// A Decoder is not safe for concurrent use; one goroutine owns it.
type Decoder struct {
	pid    uint32
	src    codeobj.Source
	opts   DecoderOptions
	format Format

	off      int64  // stream offset of the first byte not yet decoded (pending[0])
	pending  []byte // a partial record or line carried between Writes
	dead     error
	leftover []byte // after dead: the bytes from its offset on that it held (after Write, to its end)
	leftTail int    // after dead, in write: how many bytes at the end of its p follow leftover

	events []Event
	errs   []error

	jd jitdumpState
	pm perfMapState
}

// NewDecoder returns a Decoder for the stream of process pid (0: trust the pids the records
// carry). Perf-map lines are attributed to pid; jitdump records naming another process
// (neither pid nor opts.NamespacePid) are dropped with ErrPidMismatch. src stamps every codeobj.Object's codeobj.Source.
func NewDecoder(pid uint32, src codeobj.Source, opts DecoderOptions) *Decoder {
	if opts.MaxRecordBytes <= 0 {
		opts.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if opts.MaxRecordBytes < jitdumpHeaderSize {
		opts.MaxRecordBytes = jitdumpHeaderSize
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	opts.MaxLineBytes = max(opts.MaxLineBytes, sessionProbe)
	return &Decoder{pid: pid, src: src, opts: opts, jd: jitdumpState{debug: map[uint64][]codeobj.LineEntry{}}}
}

// Format is the stream's format; FormatUnknown until the first bytes told it.
func (d *Decoder) Format() Format { return d.format }

// Offset is the stream offset of the first byte not yet decoded: bytes written minus those
// buffered as a partial record or line.
func (d *Decoder) Offset() int64 { return d.off }

// Buffered is how many bytes of a partial record or line the Decoder holds.
func (d *Decoder) Buffered() int { return len(d.pending) }

// Err is the fatal error that ended decoding (wrapping ErrStreamDead), or nil.
func (d *Decoder) Err() error { return d.dead }

// Leftover returns, after a fatal error, the stream's bytes from the error's offset to the
// end of the last Write (the Decoder read no further), so that a caller can decode them
// otherwise; nil before. The Decoder lets go of them.
func (d *Decoder) Leftover() []byte {
	b := d.leftover
	d.leftover = nil
	return b
}

// JitdumpHeader is the stream's jitdump header, once decoded.
func (d *Decoder) JitdumpHeader() (h JitdumpHeader, ok bool) { return d.jd.header, d.jd.headerDone }

// Write decodes p, which continues the stream, and returns the events and errors it completed.
// p is not retained. After a fatal error Write returns nothing.
func (d *Decoder) Write(p []byte) (events []Event, errs []error) {
	events, errs = d.write(p)
	if d.leftTail > 0 {
		d.leftover = append(d.leftover, p[len(p)-d.leftTail:]...)
		d.leftTail = 0
	}
	return events, errs
}

// rest is Leftover for a Stream, after write(p): the bytes the Decoder held, then the end of
// p, which it does not copy (a stream of back-to-back sessions would copy what follows each
// of them). held is at most a record header's 16 bytes (limitTake keeps it so), but after
// Finish the partial record.
func (d *Decoder) rest(p []byte) (held, tail []byte) {
	held, tail = d.leftover, p[len(p)-d.leftTail:]
	d.leftover, d.leftTail = nil, 0
	return held, tail
}

// write is Write but for the bytes of p after a fatal error, which it keeps in place (rest).
func (d *Decoder) write(p []byte) (events []Event, errs []error) {
	d.events, d.errs = nil, nil
	if d.dead != nil || len(p) == 0 {
		return nil, nil
	}
	if d.format == FormatUnknown {
		take := min(len(p), 4-len(d.pending))
		d.pending = append(d.pending, p[:take]...)
		f, ok := DetectFormat(d.pending)
		if !ok {
			return nil, nil
		}
		d.format = f
		p = p[take:]
		if n := d.consume(d.pending); d.dead != nil {
			d.leave(d.pending[n:], p)
			return d.events, d.errs
		} else if n > 0 {
			d.dropPending(n)
		}
	}
	d.feed(p)
	return d.events, d.errs
}

// Finish ends the stream: a buffered perf-map line without its newline is decoded, and a
// partial jitdump record is reported as ErrTruncated.
func (d *Decoder) Finish() (events []Event, errs []error) {
	d.events, d.errs = nil, nil
	if d.dead != nil || len(d.pending) == 0 {
		return nil, nil
	}
	if d.format == FormatUnknown {
		if f, ok := DetectFormat(d.pending); ok {
			d.format = f
		} else {
			d.format = FormatPerfMap
		}
	}
	switch d.format {
	case FormatPerfMap:
		if !d.pm.discarding {
			d.perfMapLine(d.pending)
		}
	case FormatJitdump:
		id := uint32(0)
		if d.jd.headerDone && len(d.pending) >= 4 {
			id = d.jd.u32(d.pending)
		}
		d.report(id, ErrTruncated)
		// The partial record may hold the whole of a session that followed it.
		if k := indexSession(d.pending, 1, len(d.pending)); k > 0 {
			d.off += int64(k)
			d.kill(0, ErrNewSession)
			d.leave(d.pending[k:], nil)
			return d.events, d.errs
		}
	}
	d.off += int64(len(d.pending))
	d.pending = d.pending[:0]
	return d.events, d.errs
}

// feed decodes p, first completing any buffered partial unit, and buffers what is left.
func (d *Decoder) feed(p []byte) {
	for len(p) > 0 && d.dead == nil {
		if len(d.pending) == 0 {
			n := d.consume(p)
			if d.dead != nil {
				d.leave(nil, p[n:])
				return
			}
			d.pending = append(d.pending, p[n:]...)
			d.limitPending()
			return
		}
		var take int
		if d.format == FormatPerfMap {
			take = d.lineTake(p)
		} else {
			take = min(d.jd.need(d)-len(d.pending), len(p))
			if take <= 0 {
				take = len(p) // cannot happen while need is right; never spin
			}
			take = d.limitTake(p[:take])
		}
		d.pending = append(d.pending, p[:take]...)
		p = p[take:]
		n := d.consume(d.pending)
		if d.dead != nil {
			d.leave(d.pending[n:], p)
			return
		}
		d.dropPending(n)
		d.limitPending()
	}
}

// lineTake returns how many bytes of p the partial line in d.pending takes: those up to its
// newline, included, or fewer (limitTake). It reads growing windows of p (firstWindow), so
// that its cost is that of the bytes it takes.
func (d *Decoder) lineTake(p []byte) int {
	for w := firstWindow; ; w *= 2 {
		win := p[:min(w, len(p))]
		take := len(win)
		if i := bytes.IndexByte(win, '\n'); i >= 0 {
			take = i + 1
		}
		if n := d.limitTake(win[:take]); n < take || take < len(win) || len(win) == len(p) {
			return n
		}
	}
}

// limitTake returns how many bytes of q, which the partial record or line in d.pending is
// about to take, to take: all of them, or those up to the end of the first 12 bytes of a
// jitdump header that cuts the unit short (consume finds it and the decoder ends there; a
// perf-map line's first 4 bytes may be a header's magic). The bytes from the header on are
// then a few of the Decoder's and the rest of the p being written, which the Stream decodes
// in place (rest) instead of a copy of them.
func (d *Decoder) limitTake(q []byte) int {
	b := d.pending
	switch {
	case d.format == FormatPerfMap:
		from := 1 // a header at the line's start is told by its magic alone
		if d.pm.discarding {
			from = 0 // b is the end of a line
		} else if len(b) < len(magicLittle) {
			return min(len(q), len(magicLittle)-len(b))
		}
		line := bytes.TrimSuffix(q, []byte{'\n'})
		if k := sessionAcross(b, line, from, magicLittle, magicBig); k >= 0 {
			return k + sessionProbe - len(b)
		}
	case d.jd.headerDone && len(b) >= jitdumpRecHeaderSize:
		if k := sessionAcross(b, q, 1, d.jd.sessionPrefix()); k >= 0 {
			return k + sessionProbe - len(b)
		}
	}
	return len(q)
}

// leave keeps a and b, the bytes from a fatal error's offset on, for Leftover: a, which the
// Decoder held, copied, and b, the end of the p being written, as its length (see rest).
func (d *Decoder) leave(a, b []byte) {
	d.leftover = append([]byte(nil), a...)
	d.leftTail = len(b)
	d.pending = nil
}

func (d *Decoder) dropPending(n int) {
	k := copy(d.pending, d.pending[n:])
	d.pending = d.pending[:k]
	if cap(d.pending) > 4*d.opts.MaxLineBytes && k < d.opts.MaxLineBytes {
		// Give back the buffer a large record needed.
		d.pending = append([]byte(nil), d.pending...)
	}
}

// limitPending bounds a partial perf-map line (a jitdump partial record is bounded by the
// length check in consumeJitdump).
func (d *Decoder) limitPending() {
	if d.format == FormatPerfMap && len(d.pending) > d.opts.MaxLineBytes {
		d.report(0, ErrLineTooLong)
		d.pm.discarding = true
		// Keep the bytes a jitdump header's first 12 could begin in (consumePerfMap).
		skip := len(d.pending) - (sessionProbe - 1)
		d.off += int64(skip)
		d.dropPending(skip)
	}
}

// consume decodes the complete records or lines at the start of b, which begins at stream
// offset d.off, advances d.off past them and returns how many bytes they took.
func (d *Decoder) consume(b []byte) int {
	switch d.format {
	case FormatJitdump:
		return d.consumeJitdump(b)
	case FormatPerfMap:
		return d.consumePerfMap(b)
	}
	return 0
}

func (d *Decoder) emit(ev Event) { d.events = append(d.events, ev) }

// now is DecoderOptions.Now's reading, 0 without it: the time given to a record whose own
// time, if any, cannot be compared with sample times.
func (d *Decoder) now() int64 {
	if d.opts.Now == nil {
		return 0
	}
	return d.opts.Now()
}

// report records a non-fatal error for the unit at d.off.
func (d *Decoder) report(id uint32, err error) {
	d.errs = append(d.errs, &DecodeError{Offset: d.off, Format: d.format, RecordID: id, Err: err})
}

// kill records a fatal error at d.off and stops the stream.
func (d *Decoder) kill(id uint32, err error) {
	e := &DecodeError{Offset: d.off, Format: d.format, RecordID: id, Err: fmt.Errorf("%w: %w", ErrStreamDead, err)}
	d.errs = append(d.errs, e)
	d.dead = e
}
