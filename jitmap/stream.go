package jitmap

import (
	"bytes"
	"errors"

	"github.com/profd/profd/codeobj"
)

// Batch is what one read of a JIT symbol stream decoded: the events it completed and the
// bad records it met, for the target process Pid. Stream names the stream for log lines
// (a FIFO or file path); errors' offsets are offsets in it.
type Batch struct {
	Pid    uint32
	Source codeobj.Source
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
	Restarts    uint64 // writer sessions found inside the stream, each decoded anew
	Skipped     uint64 // bytes skipped looking for a jitdump header after the stream went bad
}

// Plus returns c with d's counts added.
func (c StreamCounts) Plus(d StreamCounts) StreamCounts {
	return StreamCounts{Bytes: c.Bytes + d.Bytes, Records: c.Records + d.Records, BadRecords: c.BadRecords + d.BadRecords,
		RejectedPid: c.RejectedPid + d.RejectedPid, Restarts: c.Restarts + d.Restarts, Skipped: c.Skipped + d.Skipped}
}

// Minus returns c less d's counts, d taken earlier from the same Stream.
func (c StreamCounts) Minus(d StreamCounts) StreamCounts {
	return StreamCounts{Bytes: c.Bytes - d.Bytes, Records: c.Records - d.Records, BadRecords: c.BadRecords - d.BadRecords,
		RejectedPid: c.RejectedPid - d.RejectedPid, Restarts: c.Restarts - d.Restarts, Skipped: c.Skipped - d.Skipped}
}

// Stream decodes the bytes one target's JIT writes to one place (a FIFO, a file), which may
// hold several writer sessions one after another: a reader cannot tell the end of a FIFO
// writer's session from the start of the next one's when it was not scheduled between
// them, and a JIT that restarts its writer, switches format, or dies mid-record leaves the
// same. The Stream starts a new Decoder where a session begins, whatever came before it:
//
//   - a jitdump header where a jitdump record or a perf-map line should begin, or inside a
//     record or line (the writer died there);
//   - perf-map text where a jitdump record should begin;
//   - after bytes that are neither (the stream went bad), the next jitdump header: the
//     bytes skipped are counted, the error at the first of them reported.
//
// Errors carry offsets in the whole stream. A Stream is not safe for concurrent use.
type Stream struct {
	pid    uint32
	src    codeobj.Source
	name   string
	opts   DecoderOptions
	dec    *Decoder // nil while looking for a jitdump header
	base   int64    // stream offset at which dec started
	carry  []byte   // while looking: the last bytes, which may begin a header
	lostAt int64    // while looking: the stream offset of carry[0]
	counts StreamCounts
}

// NewStream returns a Stream of process pid's records from src (pid 0: trust the pids the
// records carry); name (a path) names it in the Batches it returns.
func NewStream(pid uint32, src codeobj.Source, name string, opts DecoderOptions) *Stream {
	return &Stream{pid: pid, src: src, name: name, opts: opts, dec: NewDecoder(pid, src, opts)}
}

// Counts tallies what the stream decoded so far.
func (st *Stream) Counts() StreamCounts { return st.counts }

// Write decodes p, the next bytes of the stream, and returns what it completed.
func (st *Stream) Write(p []byte) Batch {
	st.counts.Bytes += uint64(len(p))
	events, errs := st.decode(p, false)
	return st.batch(events, errs)
}

// Finish ends the stream (the writer closed): a partial record is reported.
func (st *Stream) Finish() Batch {
	events, errs := st.decode(nil, true)
	return st.batch(events, errs)
}

// Cut ends the stream where its reader stopped reading while the writer may still be
// writing (profd stopping): the bytes of a partial record or line at the end are neither
// decoded nor reported bad. It returns how many there were: bytes left unread, which no
// longer count in Counts().Bytes.
func (st *Stream) Cut() int {
	n := len(st.carry)
	if st.dec != nil {
		n = st.dec.Buffered()
	}
	st.dec, st.carry = nil, nil
	st.counts.Bytes -= uint64(n)
	return n
}

// batch counts what a write decoded and wraps it.
func (st *Stream) batch(events []Event, errs []error) Batch {
	kept := events[:0]
	for _, ev := range events {
		if pid, ok := eventPid(ev); ok && st.pid != 0 && pid != st.pid {
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

// decode feeds p to the decoder (and, when finish, ends it), starting a new decoder where
// a decoder gives up at the start of another session, or looking for the next header.
// The bytes after the place a decoder gave up are decoded where they are, so that however
// many sessions p holds, each byte is decoded about once.
func (st *Stream) decode(p []byte, finish bool) (events []Event, errs []error) {
	// held: bytes from where a decoder gave up that it had buffered, which come before p
	// (a few, since limitTake; after Finish, the partial record, when p is empty).
	var held []byte
	for {
		if len(p) == 0 {
			p, held = held, nil
		}
		if st.dec == nil {
			if held, p = st.look(held, p); st.dec == nil {
				return events, errs
			}
		}
		in := held
		if len(in) == 0 {
			in = p
		}
		var evs []Event
		var es []error
		switch {
		case len(in) > 0:
			evs, es = st.dec.write(in)
		case finish:
			evs, es = st.dec.Finish()
		default:
			return events, errs
		}
		events = append(events, evs...)
		de := fatalError(es)
		if de == nil {
			errs = append(errs, st.rebase(es)...)
			switch {
			case len(in) == 0:
				return events, errs
			case len(held) > 0:
				held = nil
			default:
				p = nil
			}
			continue
		}
		// The decoder gave up at stream offset at; the bytes from there on are held, then p.
		at, from := st.base+de.Offset, st.dec.Format()
		a, b := st.dec.rest(in)
		if len(held) > 0 {
			held = append(a, b...) // a few bytes: in is held
		} else {
			held, p = a, b
		}
		var first [jitdumpRecHeaderSize]byte // what isMagic and looksLikeText read of them
		n := copy(first[:], held)
		head := first[:n+copy(first[n:], p)]
		newSession := at > st.base && len(head) > 0 &&
			(errors.Is(de, ErrNewSession) || isMagic(head) || (from == FormatJitdump && looksLikeText(head)))
		if newSession {
			errs = append(errs, st.rebase(withoutError(es, de))...)
			st.restart(at)
			st.counts.Restarts++
			continue
		}
		errs = append(errs, st.rebase(es)...)
		// Lost: look for a jitdump header after the byte the decoder choked on.
		st.dec, st.carry, st.lostAt = nil, st.carry[:0], at+1
		switch {
		case len(held) > 0:
			st.counts.Skipped++
			held = held[1:]
		case len(p) > 0:
			st.counts.Skipped++
			p = p[1:]
		}
	}
}

// restart starts a new decoder at stream offset at.
func (st *Stream) restart(at int64) {
	st.dec = NewDecoder(st.pid, st.src, st.opts)
	st.base = at
}

// look searches held then p, which follow the bytes kept in carry, for a jitdump header. It
// starts a decoder there and returns the bytes from it, in held (a few bytes) and p, or
// keeps the last bytes (a header may begin in them) and returns none. It copies only carry
// and held: p may be the rest of a long read.
func (st *Stream) look(held, p []byte) ([]byte, []byte) {
	few := append(st.carry, held...)
	// A magic that begins in few may end in p's first 3 bytes.
	w := append(few[:len(few):len(few)], p[:min(len(p), len(magicLittle)-1)]...)
	if i := indexMagic(w); i >= 0 && i < len(few) {
		st.found(i)
		return few[i:], p
	}
	if i := indexMagic(p); i >= 0 {
		st.found(len(few) + i)
		return nil, p[i:]
	}
	n := len(few) + len(p)
	keep := min(n, len(magicLittle)-1)
	st.counts.Skipped += uint64(n - keep)
	st.lostAt += int64(n - keep)
	carry := make([]byte, 0, len(magicLittle))
	if k := keep - len(p); k > 0 {
		carry = append(carry, few[len(few)-k:]...)
	}
	st.carry = append(carry, p[len(p)-min(len(p), keep):]...)
	return nil, nil
}

// found starts a decoder at the header i bytes after the stream offset lostAt.
func (st *Stream) found(i int) {
	st.counts.Skipped += uint64(i)
	st.restart(st.lostAt + int64(i))
	st.carry = nil
}

// indexMagic returns the index of the first jitdump magic in b, in either byte order, or -1.
// Its cost is that of the bytes up to the magic (firstWindow).
func indexMagic(b []byte) int {
	for w := firstWindow; ; w *= 2 {
		win := b[:min(w, len(b))]
		i, j := bytes.Index(win, magicLittle), bytes.Index(win, magicBig)
		if i < 0 || (j >= 0 && j < i) {
			i = j
		}
		if i >= 0 || len(win) == len(b) {
			return i
		}
	}
}

// looksLikeText reports whether b begins as perf-map text would: printable ASCII and blanks
// (a jitdump record header never does: its length would be 538 MB or more).
func looksLikeText(b []byte) bool {
	for _, c := range b[:min(len(b), jitdumpRecHeaderSize)] {
		if (c < ' ' || c > '~') && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
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
	case *FlushRequest:
		return ev.Pid, true
	}
	return 0, false
}
