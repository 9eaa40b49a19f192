package jitmap

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/profd/profd/codeobj"
)

// maxPendingDebug bounds the CODE_DEBUG_INFO records held while waiting for their CODE_LOAD.
const maxPendingDebug = 64

// MaxFrameInfoBytes bounds the .eh_frame of one CODE_UNWINDING_INFO record that is kept for
// its CODE_LOAD: a JIT's function has a few hundred bytes of it. A larger one is left out,
// reported as ErrMalformed.
const MaxFrameInfoBytes = 64 << 10

type jitdumpState struct {
	headerDone bool
	be         bool
	header     JitdumpHeader
	// readTime: records are timed as they are decoded, their own times being of another
	// clock (ErrArchTimestamps, ErrClockAhead).
	readTime bool
	// debug holds line tables from CODE_DEBUG_INFO records by code address until the
	// CODE_LOAD that follows them; addresses still carry any writer bias.
	debug map[uint64][]codeobj.LineEntry
	// frameInfo is the .eh_frame of the last CODE_UNWINDING_INFO record, for the CODE_LOAD
	// that follows it (as perf inject pairs them).
	frameInfo []byte
	// searched is how many bytes of the partial record the last consumeJitdump ended in were
	// searched for a jitdump header (the record is searched again only where it grew).
	searched int
}

// sessionPrefix is the first 8 bytes of a jitdump header in the stream's byte order.
func (j *jitdumpState) sessionPrefix() []byte {
	if j.be {
		return sessionBig
	}
	return sessionLittle
}

func (j *jitdumpState) u32(b []byte) uint32 {
	if j.be {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

func (j *jitdumpState) u64(b []byte) uint64 {
	if j.be {
		return binary.BigEndian.Uint64(b)
	}
	return binary.LittleEndian.Uint64(b)
}

// need is how many bytes d.pending must hold before consumeJitdump can make progress.
func (j *jitdumpState) need(d *Decoder) int {
	b := d.pending
	if !j.headerDone {
		if len(b) < 12 {
			return 12
		}
		j.be = b[0] == magicBig[0]
		return int(j.u32(b[8:]))
	}
	if len(b) < jitdumpRecHeaderSize {
		return jitdumpRecHeaderSize
	}
	return int(j.u32(b[4:]))
}

func (d *Decoder) consumeJitdump(b []byte) int {
	j := &d.jd
	maxSize := uint32(d.opts.MaxRecordBytes)
	n := 0
	for {
		rest := b[n:]
		if !j.headerDone {
			if len(rest) < 12 {
				return n
			}
			j.be = rest[0] == magicBig[0]
			if !bytes.Equal(rest[:4], magicLittle) && !bytes.Equal(rest[:4], magicBig) {
				d.kill(0, fmt.Errorf("header: bad magic % x", rest[:4]))
				return n
			}
			size := j.u32(rest[8:])
			if size < jitdumpHeaderSize {
				d.kill(0, fmt.Errorf("header: total_size %d < %d: %w", size, jitdumpHeaderSize, ErrMalformed))
				return n
			}
			if size > maxSize {
				d.kill(0, fmt.Errorf("header: total_size %d: %w", size, ErrRecordTooLarge))
				return n
			}
			if len(rest) < int(size) {
				return n
			}
			j.header = JitdumpHeader{
				BigEndian:   j.be,
				Version:     j.u32(rest[4:]),
				ElfMach:     j.u32(rest[12:]),
				Pid:         j.u32(rest[20:]),
				TimestampNs: int64(j.u64(rest[24:])),
				Flags:       j.u64(rest[32:]),
			}
			if j.header.Flags&JitdumpFlagArchTimestamp != 0 {
				j.readTime = true
				d.report(0, ErrArchTimestamps)
			}
			j.headerDone = true
			j.searched = 0
			n += int(size)
			d.off += int64(size)
			continue
		}
		if isMagic(rest) {
			d.kill(0, ErrNewSession)
			return n
		}
		if len(rest) < jitdumpRecHeaderSize {
			return n
		}
		id, size := j.u32(rest), j.u32(rest[4:])
		if size < jitdumpRecHeaderSize {
			d.kill(id, fmt.Errorf("total_size %d < %d: %w", size, jitdumpRecHeaderSize, ErrMalformed))
			return n
		}
		if size > maxSize {
			d.kill(id, fmt.Errorf("total_size %d: %w", size, ErrRecordTooLarge))
			return n
		}
		if len(rest) < int(size) {
			// A header in the part of the record there is cuts it short as it would the
			// whole record (sessionInRecord finds the same one first), and the session that
			// begins there is not held back until the record's length has arrived: a record
			// that claims MaxRecordBytes would otherwise be buffered, and so copied, by every
			// session that begins inside it.
			if k := indexSessionOf(rest, max(1, j.searched-(sessionProbe-1)), j.sessionPrefix()); k > 0 {
				return d.cutRecord(id, n, k)
			}
			j.searched = len(rest)
			return n
		}
		j.searched = 0
		if k := sessionInRecord(rest[:size], j.be); k > 0 {
			return d.cutRecord(id, n, k)
		}
		d.jitdumpRecord(id, rest[:size])
		n += int(size)
		d.off += int64(size)
	}
}

// cutRecord ends the decoder at a jitdump header k bytes into the record of the given id at
// b[n:] (b as consumeJitdump has it): a writer died mid-record and the next one's header took
// the rest of its length. The record is reported cut short; it returns the bytes consumed.
func (d *Decoder) cutRecord(id uint32, n, k int) int {
	d.report(id, ErrTruncated)
	d.off += int64(k)
	d.kill(0, ErrNewSession)
	return n + k
}

// maxClockAheadNs is how far after the moment it is decoded a record's time may be: a record
// is written before it is read, so a time past that is of another clock.
const maxClockAheadNs = int64(time.Second)

// recordTime returns the time to give a record of the given id that carries ts: ts in the
// Decoder's clock (less ClockOffsetNs), or the moment it is decoded when the session's
// times are of another clock. The first record of a session timed past maxClockAheadNs
// from now says its clock is another (ErrClockAhead).
func (d *Decoder) recordTime(id uint32, ts int64) int64 {
	j := &d.jd
	ts = subSaturated(ts, d.opts.ClockOffsetNs)
	if !j.readTime && d.opts.Now != nil {
		switch id {
		case JitdumpCodeLoad, JitdumpCodeMove, JitdumpCodeClose, JitdumpProfdCodeUnload, JitdumpProfdFlushRequest:
			if now := d.opts.Now(); ts > now && ts-now > maxClockAheadNs {
				j.readTime = true
				d.report(id, fmt.Errorf("%w (%v ahead)", ErrClockAhead, time.Duration(ts-now)))
			}
		}
	}
	if j.readTime {
		return d.now()
	}
	return ts
}

// subSaturated is a-b, held within int64.
func subSaturated(a, b int64) int64 {
	r := a - b
	switch {
	case b > 0 && r > a:
		return math.MinInt64
	case b < 0 && r < a:
		return math.MaxInt64
	}
	return r
}

// jitdumpRecord decodes one complete record (header included).
func (d *Decoder) jitdumpRecord(id uint32, rec []byte) {
	j := &d.jd
	ts := d.recordTime(id, int64(j.u64(rec[8:])))
	body := rec[jitdumpRecHeaderSize:]
	switch id {
	case JitdumpCodeLoad:
		d.jitdumpLoad(ts, body)
	case JitdumpCodeMove:
		if len(body) < jitdumpMoveFixed {
			d.report(id, fmt.Errorf("code move: %d body bytes: %w", len(body), ErrMalformed))
			return
		}
		pid, ok := d.checkPid(id, j.u32(body))
		if !ok {
			return
		}
		d.emit(&CodeMove{
			Pid:       pid,
			Tid:       j.u32(body[4:]),
			TimeNs:    ts,
			OldAddr:   j.u64(body[16:]),
			NewAddr:   j.u64(body[24:]),
			Size:      j.u64(body[32:]),
			CodeIndex: j.u64(body[40:]),
		})
	case JitdumpCodeDebugInfo:
		d.jitdumpDebugInfo(body)
	case JitdumpCodeClose:
		d.emit(&StreamEnd{TimeNs: ts})
	case JitdumpProfdCodeUnload:
		if len(body) < jitdumpUnloadFixed {
			d.report(id, fmt.Errorf("code unload: %d body bytes: %w", len(body), ErrMalformed))
			return
		}
		pid, ok := d.checkPid(id, j.u32(body))
		if !ok {
			return
		}
		d.emit(&CodeUnload{
			Pid:       pid,
			Tid:       j.u32(body[4:]),
			TimeNs:    ts,
			Addr:      j.u64(body[8:]),
			CodeIndex: j.u64(body[16:]),
		})
	case JitdumpProfdFlushRequest:
		if len(body) < jitdumpFlushFixed {
			d.report(id, fmt.Errorf("flush request: %d body bytes: %w", len(body), ErrMalformed))
			return
		}
		pid, ok := d.checkPid(id, j.u32(body))
		if !ok {
			return
		}
		req := &FlushRequest{Pid: pid, Tid: j.u32(body[4:]), TimeNs: ts, ID: j.u64(body[8:])}
		if len(body) >= jitdumpFlushFixed+4 {
			req.Formats = j.u32(body[16:])
		}
		d.emit(req)
	case JitdumpCodeUnwindingInfo:
		d.jitdumpUnwindingInfo(body)
	default:
		// ids this reader does not know: skipped by size.
	}
}

// jitdumpUnwindingInfo keeps the .eh_frame of a CODE_UNWINDING_INFO record for the next
// CODE_LOAD. Its body: unwinding_size, eh_frame_hdr_size and mapped_size (u64), then
// unwinding_size bytes, the .eh_frame followed by its .eh_frame_hdr.
func (d *Decoder) jitdumpUnwindingInfo(body []byte) {
	j := &d.jd
	const id = JitdumpCodeUnwindingInfo
	j.frameInfo = nil
	if len(body) < jitdumpUnwindingFixed {
		d.report(id, fmt.Errorf("unwinding info: %d body bytes: %w", len(body), ErrMalformed))
		return
	}
	size, hdrSize := j.u64(body), j.u64(body[8:])
	data := body[jitdumpUnwindingFixed:]
	switch {
	case size > uint64(len(data)) || hdrSize > size:
		d.report(id, fmt.Errorf("unwinding info: %d bytes with a %d-byte header in %d: %w", size, hdrSize, len(data), ErrMalformed))
	case size-hdrSize > MaxFrameInfoBytes:
		d.report(id, fmt.Errorf("unwinding info: .eh_frame of %d bytes, more than %d: %w", size-hdrSize, MaxFrameInfoBytes, ErrMalformed))
	case size > hdrSize:
		j.frameInfo = append([]byte(nil), data[:size-hdrSize]...)
	}
}

func (d *Decoder) checkPid(id, pid uint32) (uint32, bool) {
	if d.pid != 0 && pid != d.pid {
		if pid == d.opts.NamespacePid {
			return d.pid, true
		}
		d.report(id, fmt.Errorf("pid %d in stream of pid %d: %w", pid, d.pid, ErrPidMismatch))
		return 0, false
	}
	return pid, true
}

func (d *Decoder) jitdumpLoad(ts int64, body []byte) {
	j := &d.jd
	const id = JitdumpCodeLoad
	frameInfo := j.frameInfo // this load's, whether it decodes or not
	j.frameInfo = nil
	if len(body) < jitdumpLoadFixed+1 {
		d.report(id, fmt.Errorf("code load: %d body bytes: %w", len(body), ErrMalformed))
		return
	}
	vma, codeAddr := j.u64(body[8:]), j.u64(body[16:])
	codeSize, codeIndex := j.u64(body[24:]), j.u64(body[32:])
	rest := body[jitdumpLoadFixed:]
	nul := bytes.IndexByte(rest, 0)
	if nul < 0 {
		d.report(id, fmt.Errorf("code load %#x: name without NUL: %w", codeAddr, ErrMalformed))
		return
	}
	code := rest[nul+1:]
	if codeSize > uint64(len(code)) {
		d.report(id, fmt.Errorf("code load %#x: code_size %d with %d bytes left: %w", codeAddr, codeSize, len(code), ErrMalformed))
		return
	}
	addr := codeAddr
	if addr == 0 {
		addr = vma
	}
	if addr+codeSize < addr {
		d.report(id, fmt.Errorf("code load %#x+%d: range wraps: %w", addr, codeSize, ErrMalformed))
		return
	}
	pid, ok := d.checkPid(id, j.u32(body))
	if !ok {
		return
	}
	ev := &CodeLoad{
		Pid:         pid,
		Tid:         j.u32(body[4:]),
		TimeUnknown: j.readTime,
		Object: codeobj.Object{
			Name:      string(rest[:nul]),
			Addr:      addr,
			Size:      codeSize,
			LoadNs:    ts,
			CodeIndex: codeIndex,
			Source:    d.src,
		},
	}
	if codeSize > 0 {
		ev.Object.Code = append([]byte(nil), code[:codeSize]...)
	}
	ev.FrameInfo = frameInfo
	lines, ok := j.debug[codeAddr]
	if !ok && vma != 0 {
		lines, ok = j.debug[vma]
	}
	if ok {
		delete(j.debug, codeAddr)
		delete(j.debug, vma)
		if len(lines) > 0 {
			ev.Object.Lines = unbiasLines(lines, addr, codeSize, vma == 0)
		}
	}
	d.emit(ev)
}

// unbiasLines removes LLVM 14's +0x40 from debug-entry addresses. The writer is recognised by
// its vma of 0 and by entries that only make sense shifted: none below addr+0x40, and at least
// one past the end of the code.
func unbiasLines(lines []codeobj.LineEntry, addr, size uint64, vmaZero bool) []codeobj.LineEntry {
	if !vmaZero || len(lines) == 0 {
		return lines
	}
	for _, l := range lines {
		if l.Addr < addr+llvm14DebugBias || l.Addr-llvm14DebugBias-addr > size {
			return lines
		}
	}
	for i := range lines {
		lines[i].Addr -= llvm14DebugBias
	}
	return lines
}

func (d *Decoder) jitdumpDebugInfo(body []byte) {
	j := &d.jd
	const id = JitdumpCodeDebugInfo
	if len(body) < jitdumpDebugFixed {
		d.report(id, fmt.Errorf("debug info: %d body bytes: %w", len(body), ErrMalformed))
		return
	}
	codeAddr, nr := j.u64(body), j.u64(body[8:])
	rest := body[jitdumpDebugFixed:]
	if nr > uint64(len(rest)/jitdumpDebugEntryMin) {
		d.report(id, fmt.Errorf("debug info %#x: %d entries in %d bytes: %w", codeAddr, nr, len(rest), ErrMalformed))
		return
	}
	lines := make([]codeobj.LineEntry, 0, nr)
	var prevName []byte
	prevFile := ""
	for range nr {
		if len(rest) < jitdumpDebugEntryMin {
			d.report(id, fmt.Errorf("debug info %#x: entry %d truncated: %w", codeAddr, len(lines), ErrMalformed))
			return
		}
		e := codeobj.LineEntry{Addr: j.u64(rest), Line: j.u32(rest[8:]), Discriminator: j.u32(rest[12:])}
		rest = rest[16:]
		nul := bytes.IndexByte(rest, 0)
		if nul < 0 {
			d.report(id, fmt.Errorf("debug info %#x: entry %d name without NUL: %w", codeAddr, len(lines), ErrMalformed))
			return
		}
		name := rest[:nul]
		rest = rest[nul+1:]
		switch {
		case len(name) == 1 && name[0] == 0xff:
			// "same file as the previous entry", as perf's JVMTI agent writes it.
		case !bytes.Equal(name, prevName):
			prevName, prevFile = name, string(name)
		}
		e.File = prevFile
		lines = append(lines, e)
	}
	if !slices.IsSortedFunc(lines, compareLineAddr) {
		slices.SortStableFunc(lines, compareLineAddr)
	}
	if len(j.debug) >= maxPendingDebug {
		clear(j.debug)
		d.report(id, fmt.Errorf("debug info %#x: %d line tables without their code load, dropped: %w", codeAddr, maxPendingDebug, ErrMalformed))
	}
	j.debug[codeAddr] = lines
}

func compareLineAddr(a, b codeobj.LineEntry) int { return cmp.Compare(a.Addr, b.Addr) }

// sessionInRecord returns where in rec (a complete record, header included) a jitdump header
// in the stream's byte order (be) begins, or -1: a writer died mid-record and the next
// one's header took the rest of the record's length. A header whose first 12 bytes lie in
// rec must be plausible (sessionAt); one that begins in rec's last 11 bytes is told by its
// magic alone (which the code bytes of a record match by chance once in 2^29 records), so
// that the answer does not depend on bytes past rec.
func sessionInRecord(rec []byte, be bool) int {
	needle := sessionLittle
	if be {
		needle = sessionBig
	}
	if k := indexSessionOf(rec, 1, needle); k >= 0 {
		return k
	}
	for k := max(1, len(rec)-(sessionProbe-1)); k+len(magicLittle) <= len(rec); k++ {
		if isMagic(rec[k:]) {
			return k
		}
	}
	return -1
}

// The first 8 bytes of a jitdump header (magic, version 1) in each byte order.
var (
	sessionLittle = []byte{0x44, 0x54, 0x69, 0x4A, 1, 0, 0, 0}
	sessionBig    = []byte{0x4A, 0x69, 0x54, 0x44, 0, 0, 0, 1}
)
