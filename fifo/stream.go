package fifo

import (
	"errors"

	"github.com/profd/profd/jitmap"
)

// maxLoggedBadRecords bounds the log lines one stream's bad records produce; the counters
// still count every one.
const maxLoggedBadRecords = 10

// histBytes is how much of the stream a stream keeps behind its current write, to restart at
// a jitdump header the decoder choked on (the decoder holds at most a record header's worth).
const histBytes = 64

// stream decodes one writer's byte stream (a FIFO writer session, or a file) for one target
// and delivers its events. Writer restarts that the reader could not see as an EOF (a JIT
// reopening its FIFO while bytes were still queued) show up as a jitdump header in the middle
// of the stream; the stream restarts its decoder there instead of losing the rest.
type stream struct {
	pid     uint32
	src     jitmap.Source
	name    string // for log lines: the FIFO or file path
	sink    *sink
	dec     *jitmap.Decoder
	base    int64  // stream offset at which dec started
	written int64  // bytes written to the stream so far
	hist    []byte // the last histBytes bytes before the current write
	logged  int
}

func newStream(pid uint32, src jitmap.Source, name string, s *sink) *stream {
	st := &stream{pid: pid, src: src, name: name, sink: s}
	st.dec = jitmap.NewDecoder(pid, src, s.decoderOptions)
	return st
}

// write decodes p, the next bytes of the stream, and delivers what it completes.
func (st *stream) write(p []byte) {
	st.sink.stats.bytes.Add(uint64(len(p)))
	start := st.written
	st.written += int64(len(p))
	chunk := p
	for len(chunk) > 0 {
		events, errs := st.dec.Write(chunk)
		de := fatalError(errs)
		if de == nil || de.Offset == 0 {
			// No fatal error, or one in the header a restart would begin with.
			st.deliver(events, errs)
			break
		}
		// The decoder gave up. If what it choked on is a fresh jitdump header, a writer
		// restarted: that is no bad record, and decoding goes on there with a new decoder.
		at := st.base + de.Offset
		rest, ok := st.bytesFrom(at, start, p)
		if !ok || !isJitdumpMagic(rest) {
			st.deliver(events, errs)
			break
		}
		st.deliver(events, withoutError(errs, de))
		st.dec = jitmap.NewDecoder(st.pid, st.src, st.sink.decoderOptions)
		st.base = at
		st.sink.stats.restarts.Add(1)
		chunk = rest
		p, start = rest, at
	}
	st.keepHistory(p)
}

// finish ends the stream (the writer closed): a partial record is reported.
func (st *stream) finish() {
	events, errs := st.dec.Finish()
	st.deliver(events, errs)
}

// bytesFrom returns the stream's bytes from offset at, given that p starts at offset start
// and st.hist holds the bytes just before it.
func (st *stream) bytesFrom(at, start int64, p []byte) ([]byte, bool) {
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

func (st *stream) keepHistory(p []byte) {
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
	f, ok := jitmap.DetectFormat(b)
	return ok && f == jitmap.FormatJitdump
}

func withoutError(errs []error, drop *jitmap.DecodeError) []error {
	out := errs[:0:0]
	for _, err := range errs {
		if de, ok := err.(*jitmap.DecodeError); !ok || de != drop {
			out = append(out, err)
		}
	}
	return out
}

func fatalError(errs []error) *jitmap.DecodeError {
	for _, err := range errs {
		var de *jitmap.DecodeError
		if errors.As(err, &de) && de.Fatal() {
			return de
		}
	}
	return nil
}

// deliver counts and hands over events, and counts and logs errors.
func (st *stream) deliver(events []jitmap.Event, errs []error) {
	for _, err := range errs {
		if errors.Is(err, jitmap.ErrPidMismatch) {
			st.sink.stats.rejectedPid.Add(1)
		} else {
			st.sink.stats.badRecords.Add(1)
		}
		st.logBad(err)
	}
	for _, ev := range events {
		if pid, ok := eventPid(ev); ok && pid != st.pid {
			// The decoder already drops these; this guards the invariant the consumer relies on.
			st.sink.stats.rejectedPid.Add(1)
			continue
		}
		if load, ok := ev.(*jitmap.CodeLoad); ok && load.Object.Code == nil {
			st.sink.fillCode(load)
		}
		if load, ok := ev.(*jitmap.CodeLoad); ok && st.sink.debugLines != nil && len(load.Object.Lines) > 0 {
			st.sink.fillDiscriminators(load)
		}
		st.sink.stats.records.Add(1)
		st.sink.handler(Event{Pid: st.pid, Source: st.src, Event: ev})
	}
}

func (st *stream) logBad(err error) {
	st.logged++
	if st.logged > maxLoggedBadRecords {
		return
	}
	attrs := []any{"pid", st.pid, "source", st.src.String(), "stream", st.name, "err", err}
	var de *jitmap.DecodeError
	if errors.As(err, &de) {
		attrs = append(attrs, "offset", st.base+de.Offset)
	}
	if st.logged == maxLoggedBadRecords {
		attrs = append(attrs, "note", "further bad records of this stream are counted, not logged")
	}
	st.sink.logger.Warn("fifo: bad record", attrs...)
}

func eventPid(ev jitmap.Event) (uint32, bool) {
	switch ev := ev.(type) {
	case *jitmap.CodeLoad:
		return ev.Pid, true
	case *jitmap.CodeMove:
		return ev.Pid, true
	case *jitmap.CodeUnload:
		return ev.Pid, true
	}
	return 0, false
}
