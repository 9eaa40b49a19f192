package jitmap

import (
	"bytes"
	"fmt"

	"github.com/profd/profd/codeobj"
)

type perfMapState struct {
	discarding bool // inside an over-long line, skipping to its newline
}

func (d *Decoder) consumePerfMap(b []byte) int {
	n := 0
	for {
		rest := b[n:]
		if !d.pm.discarding && isMagic(rest) {
			d.kill(0, ErrNewSession)
			return n
		}
		i, k := d.nextLine(rest)
		line := rest
		if i >= 0 {
			line = rest[:i]
		}
		// A jitdump header inside a line: the writer died mid-line and another began a
		// session; the line so far is cut short.
		if k >= 0 {
			if !d.pm.discarding {
				d.report(0, fmt.Errorf("%w: cut short by a new session", ErrBadLine))
			}
			d.pm.discarding = false
			d.off += int64(k)
			d.kill(0, ErrNewSession)
			return n + k
		}
		if i < 0 {
			if d.pm.discarding {
				// Keep the bytes a header's first 12 could begin in, so that one split
				// across reads is seen whole.
				skip := max(len(rest)-(sessionProbe-1), 0)
				n += skip
				d.off += int64(skip)
			}
			return n
		}
		switch {
		case d.pm.discarding:
			d.pm.discarding = false
		case i > d.opts.MaxLineBytes:
			d.report(0, ErrLineTooLong)
		default:
			d.perfMapLine(line)
		}
		n += i + 1
		d.off += int64(i + 1)
	}
}

// nextLine finds the end of the line rest begins with: i, the index of its newline (-1: none
// yet), and k, where a jitdump header inside it begins (sessionInLine; -1: none). It reads
// growing windows of rest (firstWindow), so that its cost is that of the bytes up to the
// first of the two, not of all of rest: a line cut short by a session may be the whole rest
// of a read, and so the line of every session in it.
func (d *Decoder) nextLine(rest []byte) (i, k int) {
	for w := firstWindow; ; w *= 2 {
		win := rest[:min(w, len(rest))]
		i = bytes.IndexByte(win, '\n')
		end := i
		if i < 0 {
			end = len(win)
		}
		if k = d.sessionInLine(win, end); i >= 0 || k >= 0 || len(win) == len(rest) {
			return i, k
		}
	}
}

// sessionInLine returns where a jitdump header begins in rest[:end], a line (or what is
// there of it), or -1. (A header holds NUL bytes and text does not, so most lines are passed
// over at once.) A header at the line's start is consumePerfMap's; while discarding,
// rest starts mid-line.
func (d *Decoder) sessionInLine(rest []byte, end int) int {
	if bytes.IndexByte(rest[:end], 0) < 0 {
		return -1
	}
	from := 1
	if d.pm.discarding {
		from = 0
	}
	return indexSession(rest, from, end)
}

// perfMapLine decodes one line, without its newline: "START SIZE NAME", START and SIZE in hex
// with or without 0x, NAME the rest of the line (it may hold spaces). Blank lines are ignored.
func (d *Decoder) perfMapLine(line []byte) {
	line = bytes.TrimRight(line, " \t\r")
	rest := skipBlanks(line)
	if len(rest) == 0 {
		return
	}
	start, rest, ok := hexField(rest)
	if !ok {
		d.report(0, fmt.Errorf("%w: the start address is not hex (%d-byte line)", ErrBadLine, len(line)))
		return
	}
	size, rest, ok := hexField(skipBlanks(rest))
	if !ok {
		d.report(0, fmt.Errorf("%w: the size is not hex (%d-byte line)", ErrBadLine, len(line)))
		return
	}
	name := skipBlanks(rest)
	if len(name) == 0 || len(name) == len(rest) {
		d.report(0, fmt.Errorf("%w: no name (%d-byte line)", ErrBadLine, len(line)))
		return
	}
	if start+size < start {
		d.report(0, fmt.Errorf("%w: range %#x+%#x wraps", ErrBadLine, start, size))
		return
	}
	d.emit(&CodeLoad{Pid: d.pid, TimeUnknown: true, Object: codeobj.Object{
		Name:   string(name),
		Addr:   start,
		Size:   size,
		LoadNs: d.now(),
		Source: d.src,
	}})
}

func skipBlanks(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

// hexField parses 1 to 16 hex digits, optionally after 0x or 0X, ending at a blank or the end
// of b.
func hexField(b []byte) (v uint64, rest []byte, ok bool) {
	if len(b) >= 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X') {
		b = b[2:]
	}
	i := 0
	for ; i < len(b); i++ {
		c := b[i]
		var digit byte
		switch {
		case c >= '0' && c <= '9':
			digit = c - '0'
		case c >= 'a' && c <= 'f':
			digit = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			digit = c - 'A' + 10
		case c == ' ' || c == '\t':
			return v, b[i:], i > 0
		default:
			return 0, nil, false
		}
		if v>>60 != 0 {
			return 0, nil, false // more than 64 bits
		}
		v = v<<4 | uint64(digit)
	}
	return v, b[i:], i > 0
}
