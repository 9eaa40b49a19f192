package profileio

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/profd/profd/codeobj"
)

// ErrClosed is returned by a CaptureWriter after Close.
var ErrClosed = errors.New("profileio: capture writer closed")

// CaptureWriter streams a capture: each call writes one or more whole sections with one
// Write each, so a writer killed at any moment leaves a file whose complete sections
// ReadCapture still reads. It does not buffer: what a method wrote is in w when it
// returns. A CaptureWriter is not safe for concurrent use.
type CaptureWriter struct {
	w       io.Writer
	buf     []byte
	objects []uint32 // pid per ObjectID
	closed  bool
	err     error // first write error; every later call returns it
}

// NewCaptureWriter writes the file header and the meta section to w.
func NewCaptureWriter(w io.Writer, meta CaptureMeta) (*CaptureWriter, error) {
	cw := &CaptureWriter{w: w, buf: make([]byte, 0, 4096)}
	head := make([]byte, 0, captureHeaderBytes)
	head = append(head, captureMagic[:]...)
	head = binary.LittleEndian.AppendUint32(head, CaptureVersion)
	head = binary.LittleEndian.AppendUint32(head, 0) // flags, none defined
	if _, err := w.Write(head); err != nil {
		return nil, fmt.Errorf("profileio: write capture header: %w", err)
	}
	b := cw.begin()
	b = appendString(b, meta.Event)
	b = appendString(b, meta.RequestedEvent)
	b = appendString(b, meta.Fallback)
	b = appendUvarint(b, meta.PeriodEvents)
	b = appendUvarint(b, meta.FrequencyHz)
	b = appendString(b, meta.Backend)
	b = appendString(b, meta.Host)
	b = appendString(b, meta.Kernel)
	b = appendVarint(b, meta.StartNs)
	b = appendVarint(b, unixNanos(meta.StartTime))
	if err := cw.finish(secMeta, b); err != nil {
		return nil, err
	}
	return cw, nil
}

// begin returns the buffer with room for a section header.
func (cw *CaptureWriter) begin() []byte {
	return append(cw.buf[:0], make([]byte, sectionHeaderBytes)...)
}

// finish fills in the section header and writes the section with one Write.
func (cw *CaptureWriter) finish(kind uint32, b []byte) error {
	cw.buf = b
	payload := b[sectionHeaderBytes:]
	if len(payload) > maxSectionBytes {
		return fmt.Errorf("profileio: capture section %d of %d bytes exceeds %d: %w", kind, len(payload), maxSectionBytes, ErrTooLarge)
	}
	binary.LittleEndian.PutUint32(b[0:], kind)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[8:], sectionCRC(kind, uint32(len(payload)), payload))
	if _, err := cw.w.Write(b); err != nil {
		cw.err = fmt.Errorf("profileio: write capture section %d: %w", kind, err)
		return cw.err
	}
	return nil
}

func (cw *CaptureWriter) usable() error {
	if cw.closed {
		return ErrClosed
	}
	return cw.err
}

// AddProcess records a sampled process.
func (cw *CaptureWriter) AddProcess(p Process) error {
	if err := cw.usable(); err != nil {
		return err
	}
	b := cw.begin()
	b = appendUvarint(b, uint64(p.Pid))
	b = appendString(b, p.Command)
	var attrs []string // key, value, ...
	for _, kv := range [...][2]string{
		{procInfoExecutable, p.Executable},
		{procInfoCgroup, p.CgroupPath},
		{procInfoContainerID, p.ContainerID},
		{procInfoServiceName, p.ServiceName},
	} {
		if kv[1] != "" {
			attrs = append(attrs, kv[0], kv[1])
		}
	}
	if len(p.CommandLine) > 0 {
		attrs = append(attrs, procInfoCommandLine, joinCommandLine(p.CommandLine))
	}
	if len(attrs) == 0 {
		return cw.finish(secProcess, b)
	}
	// What a process section has no room for makes it a process_info section, one section
	// still, so that a killed writer leaves the process whole or not at all.
	b = appendUvarint(b, uint64(len(attrs)/2))
	for _, a := range attrs {
		b = appendString(b, a)
	}
	return cw.finish(secProcInfo, b)
}

// AddCodeObject records a code object of process pid and returns the ID that samples in
// it are added under. Code must be nil or hold Size bytes; Lines must be ascending. An
// object larger than a section may be (a runtime's code region of tens of MiB) is recorded
// without its code bytes, and without its line table if that is still too large, rather
// than not at all: its samples stay named.
func (cw *CaptureWriter) AddCodeObject(pid uint32, o *codeobj.Object) (ObjectID, error) {
	if err := cw.usable(); err != nil {
		return 0, err
	}
	if o.Code != nil && uint64(len(o.Code)) != o.Size {
		return 0, fmt.Errorf("profileio: code object %q: %d code bytes for size %d: %w", o.Name, len(o.Code), o.Size, ErrMalformed)
	}
	id := ObjectID(len(cw.objects))
	tooLarge := func(b []byte) bool { return len(b)-sectionHeaderBytes > maxSectionBytes }
	b := cw.appendCodeObject(id, pid, o, o.Code, o.Lines)
	if tooLarge(b) {
		b = cw.appendCodeObject(id, pid, o, nil, o.Lines)
	}
	if tooLarge(b) {
		b = cw.appendCodeObject(id, pid, o, nil, nil)
	}
	if err := cw.finish(secCodeObject, b); err != nil {
		return 0, err
	}
	cw.objects = append(cw.objects, pid)
	return id, nil
}

// appendCodeObject is a code object section of o, with code and lines for o's own.
func (cw *CaptureWriter) appendCodeObject(id ObjectID, pid uint32, o *codeobj.Object, code []byte, lines []codeobj.LineEntry) []byte {
	b := cw.begin()
	b = appendUvarint(b, uint64(id))
	b = appendUvarint(b, uint64(pid))
	b = appendString(b, o.Name)
	b = appendUvarint(b, o.Addr)
	b = appendUvarint(b, o.Size)
	b = appendVarint(b, o.LoadNs)
	b = appendVarint(b, o.UnloadNs)
	b = appendUvarint(b, o.CodeIndex)
	b = append(b, byte(o.Source))
	if code == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = append(b, code...)
	}
	b = appendLines(b, o.Addr, lines)
	b = appendUvarint(b, uint64(o.FirstLine))
	cw.buf = b
	return b
}

// appendLines writes the file names once, then each entry as an address delta (zigzag,
// from the previous entry, the first from the object's address), a file index, the line
// and the discriminator.
func appendLines(b []byte, base uint64, lines []codeobj.LineEntry) []byte {
	var files []string
	index := map[string]uint64{}
	for _, l := range lines {
		if _, ok := index[l.File]; !ok {
			index[l.File] = uint64(len(files))
			files = append(files, l.File)
		}
	}
	b = appendUvarint(b, uint64(len(files)))
	for _, f := range files {
		b = appendString(b, f)
	}
	b = appendUvarint(b, uint64(len(lines)))
	prev := base
	for _, l := range lines {
		b = appendVarint(b, int64(l.Addr-prev))
		prev = l.Addr
		b = appendUvarint(b, index[l.File])
		b = appendUvarint(b, uint64(l.Line))
		b = appendUvarint(b, uint64(l.Discriminator))
	}
	return b
}

// SetUnload records that object id was unloaded (or moved away) at unloadNs.
func (cw *CaptureWriter) SetUnload(id ObjectID, unloadNs int64) error {
	if err := cw.usable(); err != nil {
		return err
	}
	if int(id) >= len(cw.objects) {
		return fmt.Errorf("profileio: unload of unknown code object %d: %w", id, ErrMalformed)
	}
	b := cw.begin()
	b = appendUvarint(b, uint64(id))
	b = appendVarint(b, unloadNs)
	return cw.finish(secUnload, b)
}

// AddSamples records sample counts. The same (object, offset) may come again in a later
// batch; readers sum them. Large batches are split into several sections.
func (cw *CaptureWriter) AddSamples(recs []SampleRecord) error {
	if err := cw.usable(); err != nil {
		return err
	}
	for _, r := range recs {
		if int(r.Object) >= len(cw.objects) {
			return fmt.Errorf("profileio: samples for unknown code object %d: %w", r.Object, ErrMalformed)
		}
	}
	sorted := sort.SliceIsSorted(recs, func(i, j int) bool { return recordLess(recs[i], recs[j]) })
	if !sorted {
		recs = append([]SampleRecord(nil), recs...)
		sort.Slice(recs, func(i, j int) bool { return recordLess(recs[i], recs[j]) })
	}
	for len(recs) > 0 {
		b := cw.begin()
		b = append(b, make([]byte, binary.MaxVarintLen64)...) // room for the record count
		body := len(b)
		n := 0
		var prev SampleRecord
		for n < len(recs) && len(b)-body < maxSampleBatchBytes {
			r := recs[n]
			if n == 0 || r.Object != prev.Object {
				b = appendUvarint(b, uint64(r.Object)<<1|1) // object changes: absolute offset
				b = appendUvarint(b, r.Offset)
			} else {
				b = appendUvarint(b, 0) // same object: offset delta from the previous record
				b = appendUvarint(b, r.Offset-prev.Offset)
			}
			b = appendUvarint(b, r.Count)
			prev = r
			n++
		}
		// Move the records up against a minimal record count.
		cnt := binary.AppendUvarint(nil, uint64(n))
		start := sectionHeaderBytes
		copy(b[start:], cnt)
		b = append(b[:start+len(cnt)], b[body:]...)
		if err := cw.finish(secSamples, b); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

func recordLess(a, b SampleRecord) bool {
	if a.Object != b.Object {
		return a.Object < b.Object
	}
	return a.Offset < b.Offset
}

// AddUnmapped records samples that fell outside JIT code.
func (cw *CaptureWriter) AddUnmapped(us []UnmappedCount) error {
	if err := cw.usable(); err != nil {
		return err
	}
	b := cw.begin()
	b = appendUvarint(b, uint64(len(us)))
	for _, u := range us {
		b = appendUvarint(b, uint64(u.Pid))
		b = appendString(b, u.Mapping)
		b = appendUvarint(b, u.Count)
	}
	return cw.finish(secUnmapped, b)
}

// AddUnnamed records samples in JIT memory that no code object named.
func (cw *CaptureWriter) AddUnnamed(us []UnnamedCount) error {
	if err := cw.usable(); err != nil {
		return err
	}
	for len(us) > 0 {
		n := min(len(us), maxUnnamedPerSection)
		b := cw.begin()
		b = appendUvarint(b, uint64(n))
		for _, u := range us[:n] {
			b = appendUvarint(b, uint64(u.Pid))
			b = appendUvarint(b, u.IP)
			b = appendVarint(b, u.FirstNs)
			b = appendVarint(b, u.LastNs-u.FirstNs)
			b = appendUvarint(b, u.Count)
		}
		if err := cw.finish(secUnnamed, b); err != nil {
			return err
		}
		us = us[n:]
	}
	return nil
}

// AddNative records a native mapping's samples, in sections of at most
// maxNativePerSection samples each (readers merge them).
func (cw *CaptureWriter) AddNative(m *NativeMapping) error {
	if err := cw.usable(); err != nil {
		return err
	}
	if m.Limit < m.Start {
		return fmt.Errorf("profileio: native mapping %s: limit %#x below start %#x: %w", m.File, m.Limit, m.Start, ErrMalformed)
	}
	samples := m.Samples
	if !slices.IsSortedFunc(samples, compareNativeSamples) {
		samples = slices.Clone(samples)
		slices.SortFunc(samples, compareNativeSamples)
	}
	for first := true; first || len(samples) > 0; first = false {
		n := min(len(samples), maxNativePerSection)
		b := cw.begin()
		b = appendUvarint(b, uint64(m.Pid))
		b = appendString(b, m.File)
		b = appendString(b, m.BuildID)
		b = appendUvarint(b, m.Start)
		b = appendUvarint(b, m.Limit-m.Start)
		b = appendUvarint(b, m.Offset)
		var names sectionNames
		for _, s := range samples[:n] {
			names.id(s.Function)
		}
		b = names.appendTo(b)
		b = appendUvarint(b, uint64(n))
		prev := m.Start
		for _, s := range samples[:n] {
			b = appendUvarint(b, s.Address-prev)
			prev = s.Address
			b = appendUvarint(b, names.id(s.Function))
			b = appendUvarint(b, s.Count)
		}
		if err := cw.finish(secNative, b); err != nil {
			return err
		}
		samples = samples[n:]
	}
	return cw.addAddressed(m)
}

func cutName(name string) string { return name[:min(len(name), MaxFunctionNameBytes)] }

func compareNativeSamples(a, b NativeSample) int { return cmp.Compare(a.Address, b.Address) }

// maxNativePerSection bounds the samples of a native section: with names of at most
// MaxFunctionNameBytes, a section stays under maxSectionBytes.
const maxNativePerSection = 4096

// MaxFunctionNameBytes is the longest function name a native section holds; writers cut
// longer ones.
const MaxFunctionNameBytes = 4096

// maxUnnamedPerSection keeps an unnamed section under maxSectionBytes (a record takes at
// most 5+10+10+10+10 bytes).
const maxUnnamedPerSection = maxSampleBatchBytes / 45

// Close writes the end section. It does not close the underlying writer.
func (cw *CaptureWriter) Close(end CaptureEnd) error {
	if err := cw.usable(); err != nil {
		return err
	}
	cw.closed = true
	b := cw.begin()
	b = appendVarint(b, end.EndNs)
	b = appendVarint(b, unixNanos(end.EndTime))
	b = appendUvarint(b, end.LostSamples)
	return cw.finish(secEnd, b)
}

// WriteCapture writes a whole capture c to w.
func WriteCapture(w io.Writer, c *Capture) error {
	cw, err := NewCaptureWriter(w, c.Meta)
	if err != nil {
		return err
	}
	for _, p := range c.Processes {
		if err := cw.AddProcess(p); err != nil {
			return err
		}
	}
	var recs []SampleRecord
	for i, o := range c.Objects {
		if o.ID != ObjectID(i) {
			return fmt.Errorf("profileio: capture object %d has ID %d: %w", i, o.ID, ErrMalformed)
		}
		if _, err := cw.AddCodeObject(o.Pid, &o.Object); err != nil {
			return err
		}
		for _, s := range o.Samples {
			recs = append(recs, SampleRecord{Object: o.ID, Offset: s.Offset, Count: s.Count})
		}
	}
	if len(recs) > 0 {
		if err := cw.AddSamples(recs); err != nil {
			return err
		}
	}
	if len(c.Unmapped) > 0 {
		if err := cw.AddUnmapped(c.Unmapped); err != nil {
			return err
		}
	}
	if len(c.Unnamed) > 0 {
		if err := cw.AddUnnamed(c.Unnamed); err != nil {
			return err
		}
	}
	for _, m := range c.Native {
		if err := cw.AddNative(m); err != nil {
			return err
		}
	}
	if len(c.Stacks) > 0 {
		if err := cw.AddStacks(c.Stacks); err != nil {
			return err
		}
	}
	if c.End == nil {
		return nil
	}
	return cw.Close(*c.End)
}
