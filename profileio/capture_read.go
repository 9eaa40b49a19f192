package profileio

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/sampleprof"
)

// ReadCapture reads a capture from r.
//
// A capture whose writer was killed ends early: ReadCapture returns every complete section,
// with End nil, and Truncated set when the file ends inside a section; that is not an
// error. A section whose checksum or contents are wrong is an error (a *ParseError with
// the section's byte offset, wrapping ErrMalformed); the Capture returned with it still
// holds every section before the bad one. Allocations are bounded by the input's length
// and by a 64 MiB limit per section.
func ReadCapture(r io.Reader) (*Capture, error) {
	c := &Capture{}
	var head [captureHeaderBytes]byte
	if n, err := io.ReadFull(r, head[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, &ParseError{Format: "capture", Offset: int64(n), Msg: "file header", Err: ErrTruncated}
		}
		return nil, fmt.Errorf("profileio: read capture: %w", err)
	}
	if !bytes.Equal(head[:8], captureMagic[:]) {
		return nil, &ParseError{Format: "capture", Msg: fmt.Sprintf("bad magic %q", head[:8]), Err: ErrMalformed}
	}
	c.Version = binary.LittleEndian.Uint32(head[8:])
	if c.Version < minCaptureVersion || c.Version > CaptureVersion {
		return nil, &ParseError{Format: "capture", Offset: 8, Msg: fmt.Sprintf("version %d, want %d to %d", c.Version, minCaptureVersion, CaptureVersion), Err: ErrUnsupported}
	}
	cr := captureReader{c: c, merged: true}
	offset := int64(captureHeaderBytes)
	var payload []byte
	for {
		var sh [sectionHeaderBytes]byte
		n, err := io.ReadFull(r, sh[:])
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			c.Truncated, c.TruncatedAt = true, offset
			break
		}
		if err != nil {
			return c, fmt.Errorf("profileio: read capture at offset %d: %w", offset+int64(n), err)
		}
		kind := binary.LittleEndian.Uint32(sh[0:])
		length := binary.LittleEndian.Uint32(sh[4:])
		sum := binary.LittleEndian.Uint32(sh[8:])
		if length > maxSectionBytes {
			return cr.finish(&ParseError{Format: "capture", Offset: offset, Msg: fmt.Sprintf("section %d of %d bytes", kind, length), Err: ErrTooLarge})
		}
		payload, err = readPayload(r, payload[:0], int(length))
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			c.Truncated, c.TruncatedAt = true, offset
			break
		}
		if err != nil {
			return c, fmt.Errorf("profileio: read capture section at offset %d: %w", offset, err)
		}
		if got := sectionCRC(kind, length, payload); got != sum {
			return cr.finish(&ParseError{Format: "capture", Offset: offset, Msg: fmt.Sprintf("section %d checksum %#08x, want %#08x", kind, got, sum), Err: ErrMalformed})
		}
		if offset == captureHeaderBytes && kind != secMeta {
			return cr.finish(&ParseError{Format: "capture", Offset: offset, Msg: fmt.Sprintf("first section is %d, not meta", kind), Err: ErrMalformed})
		}
		if err := cr.section(kind, payload); err != nil {
			return cr.finish(&ParseError{Format: "capture", Offset: offset, Msg: fmt.Sprintf("section %d", kind), Err: err})
		}
		offset += sectionHeaderBytes + int64(length)
		if kind == secEnd {
			break // anything after the end section is not part of the capture
		}
	}
	if offset == captureHeaderBytes && !c.Truncated {
		// Not even the meta section was written.
		c.Truncated, c.TruncatedAt = true, offset
	}
	return cr.finish(nil)
}

// readPayload reads n bytes into buf, growing it only as data arrives so a lying length
// costs no more memory than the input holds.
func readPayload(r io.Reader, buf []byte, n int) ([]byte, error) {
	const step = 1 << 20
	for len(buf) < n {
		want := min(n-len(buf), step)
		if cap(buf)-len(buf) < want {
			buf = append(buf, make([]byte, want)...)[:len(buf)]
		}
		m, err := io.ReadFull(r, buf[len(buf):len(buf)+want])
		buf = buf[:len(buf)+m]
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

type captureReader struct {
	c        *Capture
	native   map[nativeKey]*NativeMapping
	pending  []int // per object, its records in the samples section being read
	inlined  map[inlinedKey][]string
	lines    map[inlinedKey][]SourceLine
	merged   bool // every object's samples are still ascending and unique
	unmapped map[unmappedKey]uint64
}

// nativeKey tells native mappings apart: sections of the same one are merged.
type nativeKey struct {
	pid   uint32
	start uint64
	file  string
}

type unmappedKey struct {
	pid     uint32
	mapping string
}

// finish sorts and merges what was read and returns c with err.
func (cr *captureReader) finish(err error) (*Capture, error) {
	c := cr.c
	if !cr.merged {
		for _, o := range c.Objects {
			o.Samples = mergeOffsets(o.Samples)
		}
	}
	if len(cr.unmapped) > 0 {
		c.Unmapped = c.Unmapped[:0]
		for k, n := range cr.unmapped {
			c.Unmapped = append(c.Unmapped, UnmappedCount{Pid: k.pid, Mapping: k.mapping, Count: n})
		}
		sort.Slice(c.Unmapped, func(i, j int) bool {
			a, b := c.Unmapped[i], c.Unmapped[j]
			if a.Pid != b.Pid {
				return a.Pid < b.Pid
			}
			return a.Mapping < b.Mapping
		})
	}
	for _, m := range c.Native {
		m.Samples = mergeNative(m.Samples)
	}
	cr.finishAddressed()
	slices.SortFunc(c.Native, func(a, b *NativeMapping) int {
		return cmp.Or(cmp.Compare(a.Pid, b.Pid), cmp.Compare(a.Start, b.Start), cmp.Compare(a.File, b.File))
	})
	if !slices.IsSortedFunc(c.Unnamed, compareUnnamed) {
		slices.SortFunc(c.Unnamed, compareUnnamed)
	}
	if err != nil {
		return c, err
	}
	return c, nil
}

func compareUnnamed(a, b UnnamedCount) int {
	return cmp.Or(cmp.Compare(a.Pid, b.Pid), cmp.Compare(a.IP, b.IP), cmp.Compare(a.FirstNs, b.FirstNs))
}

func mergeOffsets(s []OffsetCount) []OffsetCount {
	if sort.SliceIsSorted(s, func(i, j int) bool { return s[i].Offset < s[j].Offset }) {
		if !hasDuplicateOffsets(s) {
			return s
		}
	} else {
		sort.SliceStable(s, func(i, j int) bool { return s[i].Offset < s[j].Offset })
	}
	out := s[:0]
	for _, x := range s {
		if n := len(out); n > 0 && out[n-1].Offset == x.Offset {
			out[n-1].Count = sampleprof.SatAdd(out[n-1].Count, x.Count)
			continue
		}
		out = append(out, x)
	}
	return out
}

// mergeNative sorts samples by address and sums those at one address.
func mergeNative(s []NativeSample) []NativeSample {
	if !slices.IsSortedFunc(s, compareNativeSamples) {
		slices.SortStableFunc(s, compareNativeSamples)
	}
	out := s[:0]
	for _, x := range s {
		if n := len(out); n > 0 && out[n-1].Address == x.Address {
			out[n-1].Count = sampleprof.SatAdd(out[n-1].Count, x.Count)
			if out[n-1].Function == "" {
				out[n-1].Function = x.Function
			}
			continue
		}
		out = append(out, x)
	}
	return out
}

func hasDuplicateOffsets(s []OffsetCount) bool {
	for i := 1; i < len(s); i++ {
		if s[i].Offset == s[i-1].Offset {
			return true
		}
	}
	return false
}

func (cr *captureReader) section(kind uint32, payload []byte) error {
	d := payloadDecoder{b: payload}
	c := cr.c
	switch kind {
	case secMeta:
		m := &c.Meta
		m.Event = d.string()
		m.RequestedEvent = d.string()
		m.Fallback = d.string()
		m.PeriodEvents = d.uvarint()
		m.FrequencyHz = d.uvarint()
		m.Backend = d.string()
		m.Host = d.string()
		m.Kernel = d.string()
		m.StartNs = d.varint()
		m.StartTime = fromUnixNanos(d.varint())
	case secProcess:
		p := Process{Pid: d.uint32(), Command: d.string()}
		if d.err == nil {
			c.Processes = append(c.Processes, p)
		}
	case secProcInfo:
		p := Process{Pid: d.uint32(), Command: d.string()}
		n := d.count(2)
		for i := 0; i < n && d.err == nil; i++ {
			switch key, value := d.string(), d.string(); key {
			case procInfoExecutable:
				p.Executable = value
			case procInfoCommandLine:
				p.CommandLine = splitCommandLine(value)
			case procInfoCgroup:
				p.CgroupPath = value
			case procInfoContainerID:
				p.ContainerID = value
			case procInfoServiceName:
				p.ServiceName = value
			}
		}
		if d.err == nil {
			c.Processes = append(c.Processes, p)
		}
	case secCodeObject:
		cr.codeObject(&d)
	case secUnload:
		id := d.uvarint()
		ns := d.varint()
		if d.err == nil && id >= uint64(len(c.Objects)) {
			return fmt.Errorf("unload of unknown code object %d: %w", id, ErrMalformed)
		}
		if d.err == nil {
			c.Objects[id].Object.UnloadNs = ns
		}
	case secSamples:
		cr.samples(&d)
	case secUnmapped:
		n := d.count(3)
		if cr.unmapped == nil {
			cr.unmapped = map[unmappedKey]uint64{}
		}
		for i := 0; i < n && d.err == nil; i++ {
			k := unmappedKey{pid: d.uint32(), mapping: d.string()}
			cnt := d.uvarint()
			if d.err == nil {
				cr.unmapped[k] = sampleprof.SatAdd(cr.unmapped[k], cnt)
			}
		}
	case secUnnamed:
		n := d.count(5)
		for i := 0; i < n && d.err == nil; i++ {
			u := UnnamedCount{Pid: d.uint32(), IP: d.uvarint(), FirstNs: d.varint()}
			u.LastNs = u.FirstNs + d.varint()
			u.Count = d.uvarint()
			if d.err == nil {
				c.Unnamed = append(c.Unnamed, u)
			}
		}
	case secNative:
		cr.nativeSection(&d)
	case secStacks:
		cr.stacksSection(&d)
	case secInlined:
		cr.inlinedSection(&d)
	case secLines:
		cr.linesSection(&d)
	case secEnd:
		e := &CaptureEnd{EndNs: d.varint(), EndTime: fromUnixNanos(d.varint()), LostSamples: d.uvarint()}
		if d.err == nil {
			c.End = e
		}
	default:
		return nil // a later minor revision's section: skipped by its length
	}
	if d.err == nil && len(d.b) > 0 {
		return fmt.Errorf("%d bytes after the section's last field: %w", len(d.b), ErrMalformed)
	}
	return d.err
}

func (cr *captureReader) codeObject(d *payloadDecoder) {
	c := cr.c
	id := d.uvarint()
	if d.err == nil && id != uint64(len(c.Objects)) {
		d.fail("code object id %d, want %d", id, len(c.Objects))
		return
	}
	o := &CaptureObject{ID: ObjectID(id), Pid: d.uint32()}
	co := &o.Object
	co.Name = d.string()
	co.Addr = d.uvarint()
	co.Size = d.uvarint()
	co.LoadNs = d.varint()
	co.UnloadNs = d.varint()
	co.CodeIndex = d.uvarint()
	co.Source = codeobj.Source(d.byte())
	switch hasCode := d.byte(); {
	case d.err != nil:
	case hasCode == 1:
		co.Code = d.bytes(co.Size)
	case hasCode != 0:
		d.fail("code flag %d", hasCode)
	}
	nfiles := d.count(1)
	files := make([]string, 0, nfiles)
	for i := 0; i < nfiles && d.err == nil; i++ {
		files = append(files, d.string())
	}
	nlines := d.count(4)
	if nlines > 0 && d.err == nil {
		co.Lines = make([]codeobj.LineEntry, 0, nlines)
	}
	addr := co.Addr
	for i := 0; i < nlines && d.err == nil; i++ {
		addr += uint64(d.varint())
		fi := d.uvarint()
		line := d.uint32()
		disc := d.uint32()
		if d.err == nil && fi >= uint64(len(files)) {
			d.fail("line %d: file index %d of %d", i, fi, len(files))
		}
		if d.err != nil {
			return
		}
		co.Lines = append(co.Lines, codeobj.LineEntry{Addr: addr, File: files[fi], Line: line, Discriminator: disc})
	}
	if c.Version >= 2 {
		co.FirstLine = d.uint32()
	}
	if d.err == nil {
		c.Objects = append(c.Objects, o)
	}
}

func (cr *captureReader) samples(d *payloadDecoder) {
	objs := cr.c.Objects
	n := d.count(3)
	if d.err != nil {
		return
	}
	// Two passes over the records: check them and count each object's share, so every
	// object's slice grows once; then append.
	recs := d.b
	if len(cr.pending) < len(objs) {
		cr.pending = append(cr.pending, make([]int, len(objs)-len(cr.pending))...)
	}
	prev := -1
	for i := 0; i < n; i++ {
		var tag, step uint64
		var ok bool
		if tag, recs, ok = nextUvarint(recs); ok {
			if step, recs, ok = nextUvarint(recs); ok {
				_, recs, ok = nextUvarint(recs)
			}
		}
		if !ok {
			d.fail("record %d: bad varint", i)
			return
		}
		_ = step
		switch {
		case tag&1 == 1:
			id := tag >> 1
			if id >= uint64(len(objs)) {
				d.fail("record %d: samples for unknown code object %d", i, id)
				return
			}
			prev = int(id)
		case tag != 0 || prev < 0:
			d.fail("record %d: offset delta without an object", i)
			return
		}
		cr.pending[prev]++
	}
	for id, k := range cr.pending {
		if k > 0 {
			objs[id].Samples = slices.Grow(objs[id].Samples, k)
			cr.pending[id] = 0
		}
	}
	var o *CaptureObject
	var off uint64
	for i := 0; i < n; i++ {
		tag, rest, _ := nextUvarint(d.b)
		step, rest, _ := nextUvarint(rest)
		cnt, rest, _ := nextUvarint(rest)
		d.b = rest
		if tag&1 == 1 {
			o, off = objs[tag>>1], step
		} else {
			off += step
		}
		if k := len(o.Samples); k > 0 && o.Samples[k-1].Offset >= off {
			cr.merged = false
		}
		o.Samples = append(o.Samples, OffsetCount{Offset: off, Count: cnt})
	}
}

// nativeSection reads a native section, merging it into an earlier one of the same mapping.
func (cr *captureReader) nativeSection(d *payloadDecoder) {
	m := &NativeMapping{Pid: d.uint32(), File: d.string(), BuildID: d.string(), Start: d.uvarint()}
	length := d.uvarint()
	m.Offset = d.uvarint()
	if d.err == nil && m.Start+length < m.Start {
		d.fail("mapping at %#x of %d bytes wraps", m.Start, length)
	}
	m.Limit = m.Start + length
	names := readSectionNames(d)
	n := d.count(3)
	if d.err != nil {
		return
	}
	samples := make([]NativeSample, 0, n)
	addr := m.Start
	for i := 0; i < n && d.err == nil; i++ {
		addr += d.uvarint()
		fi := d.uvarint()
		cnt := d.uvarint()
		if d.err == nil && fi >= uint64(len(names)) {
			d.fail("sample %d: function %d of %d", i, fi, len(names)-1)
		}
		if d.err != nil {
			return
		}
		s := NativeSample{Address: addr, Count: cnt, Function: names[fi]}
		samples = append(samples, s)
	}
	k := nativeKey{pid: m.Pid, start: m.Start, file: m.File}
	if prev := cr.native[k]; prev != nil {
		prev.Samples = append(prev.Samples, samples...)
		return
	}
	if cr.native == nil {
		cr.native = map[nativeKey]*NativeMapping{}
	}
	m.Samples = samples
	cr.native[k] = m
	cr.c.Native = append(cr.c.Native, m)
}
