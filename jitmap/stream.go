package jitmap

import "errors"

// histBytes is how much of the stream a Stream keeps behind its current write, to restart
// at a jitdump header the decoder choked on (the decoder holds at most a record header's
// worth).
const histBytes = 64

// Batch is what one read of a JIT symbol stream decoded: the events it completed and the
// bad records it met, for the target process Pid. Stream names the stream for log lines
// (a FIFO or file path); errors' offsets are offsets in it.
type Batch struct {
	Pid    uint32
	Source Source
	Stream string
	Events []Event
	Errs   []error
}

// StreamCounts tallies what a Stream decoded.
type StreamCounts struct {
	Bytes       uint64 // written to the stream
	Records     uint64 // events delivered
	BadRecords  uint64 // records or lines reported bad (and skipped)
	RejectedPid uint64 // records naming a process other than the stream's
	Restarts    uint64 // decoders restarted at a jitdump header inside the stream
}

// Stream decodes one writer's byte stream (a FIFO writer session, or a file) of one target.
// A writer restart that the reader could not see as an end of file (a JIT reopening its
// FIFO while bytes were still queued) shows up as a jitdump header in the middle of the
// stream; the Stream restarts its decoder there instead of losing the rest. Errors carry
// offsets in the whole stream. A Stream is not safe for concurrent use.
type Stream struct {
	pid     uint32
	src     Source
	name    string
	opts    DecoderOptions
	dec     *Decoder
	base    int64  // stream offset at which dec started
	written int64  // bytes written to the stream so far
	hist    []byte // the last histBytes bytes before the current write
	counts  StreamCounts
}

// NewStream returns a Stream of process pid's records from src; name (a path) names it in
// the Batches it returns.
func NewStream(pid uint32, src Source, name string, opts DecoderOptions) *Stream {
	return &Stream{pid: pid, src: src, name: name, opts: opts, dec: NewDecoder(pid, src, opts)}
}

// Counts tallies what the stream decoded so far.
func (st *Stream) Counts() StreamCounts { return st.counts }

// Write decodes p, the next bytes of the stream, and returns what it completed.
func (st *Stream) Write(p []byte) Batch {
	st.counts.Bytes += uint64(len(p))
	events, errs := st.write(p)
	return st.batch(events, errs)
}

// Finish ends the stream (the writer closed): a partial record is reported.
func (st *Stream) Finish() Batch {
	events, errs := st.dec.Finish()
	return st.batch(events, st.rebase(errs))
}

// batch counts what a write decoded and wraps it.
func (st *Stream) batch(events []Event, errs []error) Batch {
	kept := events[:0]
	for _, ev := range events {
		if pid, ok := eventPid(ev); ok && pid != st.pid {
			// The decoder already drops these; this guards the invariant consumers rely on.
			st.counts.RejectedPid++
			continue
		}
		kept = append(kept, ev)
	}
	st.counts.Records += uint64(len(kept))
	for _, err := range errs {
		if errors.Is(err, ErrPidMismatch) {
			st.counts.RejectedPid++
		} else {
			st.counts.BadRecords++
		}
	}
	return Batch{Pid: st.pid, Source: st.src, Stream: st.name, Events: kept, Errs: errs}
}

func (st *Stream) write(p []byte) (events []Event, errs []error) {
	start := st.written
	st.written += int64(len(p))
	chunk := p
	for len(chunk) > 0 {
		evs, es := st.dec.Write(chunk)
		de := fatalError(es)
		if de == nil || de.Offset == 0 {
			// No fatal error, or one in the header a restart would begin with.
			events, errs = append(events, evs...), append(errs, st.rebase(es)...)
			break
		}
		// The decoder gave up. If what it choked on is a fresh jitdump header, a writer
		// restarted: that is no bad record, and decoding goes on there with a new decoder.
		at := st.base + de.Offset
		rest, ok := st.bytesFrom(at, start, p)
		if !ok || !isJitdumpMagic(rest) {
			events, errs = append(events, evs...), append(errs, st.rebase(es)...)
			break
		}
		events, errs = append(events, evs...), append(errs, st.rebase(withoutError(es, de))...)
		st.dec = NewDecoder(st.pid, st.src, st.opts)
		st.base = at
		st.counts.Restarts++
		chunk = rest
		p, start = rest, at
	}
	st.keepHistory(p)
	return events, errs
}

// rebase turns the decoder's offsets into the stream's.
func (st *Stream) rebase(errs []error) []error {
	if st.base == 0 {
		return errs
	}
	for _, err := range errs {
		var de *DecodeError
		if errors.As(err, &de) {
			de.Offset += st.base
		}
	}
	return errs
}

// bytesFrom returns the stream's bytes from offset at, given that p starts at offset start
// and st.hist holds the bytes just before it.
func (st *Stream) bytesFrom(at, start int64, p []byte) ([]byte, bool) {
	if at >= start {
		if at-start > int64(len(p)) {
			return nil, false
		}
		return p[at-start:], true
	}
	back := start - at
	if back > int64(len(st.hist)) {
		return nil, false
	}
	out := make([]byte, 0, int(back)+len(p))
	out = append(out, st.hist[len(st.hist)-int(back):]...)
	return append(out, p...), true
}

func (st *Stream) keepHistory(p []byte) {
	if len(p) >= histBytes {
		st.hist = append(st.hist[:0], p[len(p)-histBytes:]...)
		return
	}
	st.hist = append(st.hist, p...)
	if over := len(st.hist) - histBytes; over > 0 {
		st.hist = append(st.hist[:0], st.hist[over:]...)
	}
}

func isJitdumpMagic(b []byte) bool {
	f, ok := DetectFormat(b)
	return ok && f == FormatJitdump
}

func withoutError(errs []error, drop *DecodeError) []error {
	out := errs[:0:0]
	for _, err := range errs {
		if de, ok := err.(*DecodeError); !ok || de != drop {
			out = append(out, err)
		}
	}
	return out
}

func fatalError(errs []error) *DecodeError {
	for _, err := range errs {
		var de *DecodeError
		if errors.As(err, &de) && de.Fatal() {
			return de
		}
	}
	return nil
}

func eventPid(ev Event) (uint32, bool) {
	switch ev := ev.(type) {
	case *CodeLoad:
		return ev.Pid, true
	case *CodeMove:
		return ev.Pid, true
	case *CodeUnload:
		return ev.Pid, true
	}
	return 0, false
}
