package profileio

import (
	"cmp"
	"slices"
)

// MaxInlinedCalls is the most inlined calls a capture holds at one address; writers cut
// longer chains.
const MaxInlinedCalls = 256

// inlinedKey is an address of a process's file that inlined calls are listed at.
type inlinedKey struct {
	pid  uint32
	file string
	addr uint64
}

// inlinedAt is the inlined calls at one address.
type inlinedAt struct {
	key   inlinedKey
	calls []string
}

// addInlined records the inlined calls at addresses of native code, in sections of about
// maxSampleBatchBytes each: a name table, then per address its process, file (among the
// names), address and calls (innermost first, among the names).
func (cw *CaptureWriter) addInlined(at []inlinedAt) error {
	for len(at) > 0 {
		var names sectionNames
		var body []byte
		n := 0
		for n < len(at) && (n == 0 || len(body) < maxSampleBatchBytes) {
			a := &at[n]
			calls := a.calls[:min(len(a.calls), MaxInlinedCalls)]
			body = appendUvarint(body, uint64(a.key.pid))
			body = appendUvarint(body, names.id(a.key.file))
			body = appendUvarint(body, a.key.addr)
			body = appendUvarint(body, uint64(len(calls)))
			for _, c := range calls {
				body = appendUvarint(body, names.id(c))
			}
			n++
		}
		if err := cw.finishListed(secInlined, &names, n, body); err != nil {
			return err
		}
		at = at[n:]
	}
	return nil
}

// inlinedSection reads an inlined section; finishInlined gives its calls to the mappings
// that hold their addresses.
func (cr *captureReader) inlinedSection(d *payloadDecoder) {
	names := readSectionNames(d)
	name := func() string { return d.name(names) }
	n := d.count(4)
	for i := 0; i < n && d.err == nil; i++ {
		k := inlinedKey{pid: d.uint32(), file: name(), addr: d.uvarint()}
		nc := d.count(1)
		if d.err == nil && nc > MaxInlinedCalls {
			d.fail("address %#x: %d inlined calls, at most %d", k.addr, nc, MaxInlinedCalls)
		}
		if d.err != nil {
			return
		}
		calls := make([]string, 0, nc)
		for j := 0; j < nc && d.err == nil; j++ {
			if c := name(); c != "" {
				calls = append(calls, c)
			}
		}
		if d.err == nil && len(calls) > 0 {
			if cr.inlined == nil {
				cr.inlined = map[inlinedKey][]string{}
			}
			cr.inlined[k] = calls
		}
	}
}

// finishInlined gives the inlined calls read to the native mappings of their process and
// file that hold their addresses; an address none holds is dropped.
func (cr *captureReader) finishInlined() {
	if len(cr.inlined) == 0 {
		return
	}
	type fileKey struct {
		pid  uint32
		file string
	}
	byFile := map[fileKey][]*NativeMapping{}
	for _, m := range cr.c.Native {
		k := fileKey{m.Pid, m.File}
		byFile[k] = append(byFile[k], m)
	}
	for k, calls := range cr.inlined {
		for _, m := range byFile[fileKey{k.pid, k.file}] {
			if m.Start <= k.addr && k.addr < m.Limit {
				if m.Inlined == nil {
					m.Inlined = map[uint64][]string{}
				}
				m.Inlined[k.addr] = calls
			}
		}
	}
}

// frameInlined names the calls inlined at native frame f of a chain of process pid.
func (c *Capture) frameInlined(pid uint32, f Frame) []string {
	if f.JIT() {
		return nil
	}
	if m := c.NativeAt(pid, f.Mapping, f.Address); m != nil {
		return m.Inlined[f.Address]
	}
	return nil
}

// mappingInlined lists m's inlined calls by address.
func mappingInlined(m *NativeMapping) []inlinedAt {
	at := make([]inlinedAt, 0, len(m.Inlined))
	for addr, calls := range m.Inlined {
		if len(calls) > 0 {
			at = append(at, inlinedAt{inlinedKey{m.Pid, m.File, addr}, calls})
		}
	}
	slices.SortFunc(at, func(a, b inlinedAt) int { return cmp.Compare(a.key.addr, b.key.addr) })
	return at
}
