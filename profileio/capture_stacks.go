package profileio

import "fmt"

// MaxStackFrames is the most frames a stack section holds per stack; writers cut deeper
// chains (and mark them Cut).
const MaxStackFrames = 1024

// maxStackSectionBytes: the writer starts a new stacks section past about this size.
const maxStackSectionBytes = maxSampleBatchBytes

// AddStacks records samples by thread and call chain, in sections of about
// maxStackSectionBytes each; readers concatenate them. Frames in JIT code must name objects
// added before.
func (cw *CaptureWriter) AddStacks(stacks []StackSample) error {
	if err := cw.usable(); err != nil {
		return err
	}
	for len(stacks) > 0 {
		// A section's name table, then its stacks referring to it.
		var names sectionNames
		var body []byte
		n := 0
		for n < len(stacks) && (n == 0 || len(body) < maxStackSectionBytes) {
			st := &stacks[n]
			frames := st.Frames[:min(len(st.Frames), MaxStackFrames)]
			var flags uint64
			if st.Cut || len(frames) < len(st.Frames) {
				flags |= 1
			}
			body = appendUvarint(body, uint64(st.Pid))
			body = appendUvarint(body, uint64(st.Tid))
			body = appendUvarint(body, names.id(st.Comm))
			body = appendUvarint(body, flags)
			body = appendUvarint(body, st.Count)
			body = appendUvarint(body, uint64(len(frames)))
			for _, f := range frames {
				if f.JIT() {
					if int(f.Object) >= len(cw.objects) {
						return fmt.Errorf("profileio: stack frame in code object %d of %d: %w", f.Object, len(cw.objects), ErrMalformed)
					}
					body = appendUvarint(body, uint64(f.Object)+1)
					body = appendUvarint(body, f.Offset)
					body = appendUvarint(body, f.Address)
					continue
				}
				body = appendUvarint(body, 0)
				body = appendUvarint(body, f.Address)
				body = appendUvarint(body, names.id(f.Function))
				body = appendUvarint(body, names.id(f.Mapping))
			}
			n++
		}
		if err := cw.finishListed(secStacks, &names, n, body); err != nil {
			return err
		}
		stacks = stacks[n:]
	}
	return nil
}

// stacksSection reads a stacks section.
func (cr *captureReader) stacksSection(d *payloadDecoder) {
	names := readSectionNames(d)
	name := func() string { return d.name(names) }
	n := d.count(6)
	for i := 0; i < n && d.err == nil; i++ {
		st := StackSample{Pid: d.uint32(), Tid: d.uint32(), Comm: name()}
		flags := d.uvarint()
		st.Cut = flags&1 != 0
		st.Count = d.uvarint()
		nf := d.count(2)
		if d.err == nil && nf > MaxStackFrames {
			d.fail("stack %d of %d frames, at most %d", i, nf, MaxStackFrames)
		}
		if d.err != nil {
			return
		}
		st.Frames = make([]Frame, 0, nf)
		for j := 0; j < nf && d.err == nil; j++ {
			obj := d.uvarint()
			if obj > 0 {
				if d.err == nil && obj > uint64(len(cr.c.Objects)) {
					d.fail("stack %d frame %d: code object %d of %d", i, j, obj-1, len(cr.c.Objects))
				}
				f := Frame{Object: ObjectID(obj - 1), Offset: d.uvarint(), Address: d.uvarint()}
				st.Frames = append(st.Frames, f)
				continue
			}
			f := Frame{Object: NoObject, Address: d.uvarint()}
			f.Function = name()
			f.Mapping = name()
			st.Frames = append(st.Frames, f)
		}
		if d.err == nil {
			cr.c.Stacks = append(cr.c.Stacks, st)
		}
	}
}
