package profileio

import (
	"cmp"
	"slices"
)

// MaxInlinedCalls is the most inlined calls a capture holds at one address; writers cut
// longer chains (and the source positions there to one more).
const MaxInlinedCalls = 256

// inlinedKey is an address of a process's file that inlined calls or source positions are
// listed at.
type inlinedKey struct {
	pid  uint32
	file string
	addr uint64
}

// addPerAddress records what a capture lists at addresses of native code (the calls
// inlined there, the source positions), in sections sec of about maxSampleBatchBytes each:
// a name table, then per address its process, file (among the names) and address, then
// what put appends for the i-th key.
func (cw *CaptureWriter) addPerAddress(sec uint32, keys []inlinedKey, put func(i int, body []byte, names *sectionNames) []byte) error {
	for i := 0; i < len(keys); {
		var names sectionNames
		var body []byte
		n := 0
		for i+n < len(keys) && (n == 0 || len(body) < maxSampleBatchBytes) {
			k := &keys[i+n]
			body = appendUvarint(body, uint64(k.pid))
			body = appendUvarint(body, names.id(k.file))
			body = appendUvarint(body, k.addr)
			body = put(i+n, body, &names)
			n++
		}
		if err := cw.finishListed(sec, &names, n, body); err != nil {
			return err
		}
		i += n
	}
	return nil
}

// addAddressed records m's inlined calls (a count, then each among the names, innermost
// first) and source positions (a count, then each's file among the names and line).
func (cw *CaptureWriter) addAddressed(m *NativeMapping) error {
	keys := addressKeys(m, m.Inlined)
	err := cw.addPerAddress(secInlined, keys, func(i int, body []byte, names *sectionNames) []byte {
		calls := m.Inlined[keys[i].addr]
		calls = calls[:min(len(calls), MaxInlinedCalls)]
		body = appendUvarint(body, uint64(len(calls)))
		for _, c := range calls {
			body = appendUvarint(body, names.id(c))
		}
		return body
	})
	if err != nil {
		return err
	}
	keys = addressKeys(m, m.Lines)
	return cw.addPerAddress(secLines, keys, func(i int, body []byte, names *sectionNames) []byte {
		lines := m.Lines[keys[i].addr]
		lines = lines[:min(len(lines), MaxInlinedCalls+1)]
		body = appendUvarint(body, uint64(len(lines)))
		for _, l := range lines {
			body = appendUvarint(body, names.id(l.File))
			body = appendUvarint(body, uint64(l.Line))
		}
		return body
	})
}

// addressKeys lists the addresses of m that byAddr has something at, ascending.
func addressKeys[T any](m *NativeMapping, byAddr map[uint64][]T) []inlinedKey {
	keys := make([]inlinedKey, 0, len(byAddr))
	for addr, v := range byAddr {
		if len(v) > 0 {
			keys = append(keys, inlinedKey{m.Pid, m.File, addr})
		}
	}
	slices.SortFunc(keys, func(a, b inlinedKey) int { return cmp.Compare(a.addr, b.addr) })
	return keys
}

// inlinedSection reads an inlined section; finishAddressed gives its calls to the mappings
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

// linesSection reads a lines section; finishAddressed gives its positions to the mappings
// that hold their addresses.
func (cr *captureReader) linesSection(d *payloadDecoder) {
	names := readSectionNames(d)
	n := d.count(4)
	for i := 0; i < n && d.err == nil; i++ {
		k := inlinedKey{pid: d.uint32(), file: d.name(names), addr: d.uvarint()}
		nl := d.count(2)
		if d.err == nil && nl > MaxInlinedCalls+1 {
			d.fail("address %#x: %d source positions, at most %d", k.addr, nl, MaxInlinedCalls+1)
		}
		if d.err != nil {
			return
		}
		lines := make([]SourceLine, nl)
		for j := range lines {
			lines[j] = SourceLine{File: d.name(names), Line: d.uint32()}
		}
		if d.err == nil && nl > 0 {
			if cr.lines == nil {
				cr.lines = map[inlinedKey][]SourceLine{}
			}
			cr.lines[k] = lines
		}
	}
}

// finishAddressed gives the inlined calls and source positions read to the native mappings
// of their process and file that hold their addresses; an address none holds is dropped.
func (cr *captureReader) finishAddressed() {
	if len(cr.inlined) == 0 && len(cr.lines) == 0 {
		return
	}
	byFile := map[inlinedKey][]*NativeMapping{} // by process and file, address 0
	for _, m := range cr.c.Native {
		k := inlinedKey{pid: m.Pid, file: m.File}
		byFile[k] = append(byFile[k], m)
	}
	giveAddressed(byFile, cr.inlined, func(m *NativeMapping) *map[uint64][]string { return &m.Inlined })
	giveAddressed(byFile, cr.lines, func(m *NativeMapping) *map[uint64][]SourceLine { return &m.Lines })
}

// giveAddressed gives what was read at each address to the mappings of byFile that hold it,
// in the map field picks of theirs.
func giveAddressed[T any](byFile map[inlinedKey][]*NativeMapping, read map[inlinedKey][]T, field func(*NativeMapping) *map[uint64][]T) {
	for k, v := range read {
		for _, m := range byFile[inlinedKey{pid: k.pid, file: k.file}] {
			if m.Start <= k.addr && k.addr < m.Limit {
				f := field(m)
				if *f == nil {
					*f = map[uint64][]T{}
				}
				(*f)[k.addr] = v
			}
		}
	}
}

// frameInlined names the calls inlined at native frame f of a chain of process pid, and
// gives the source positions there.
func (c *Capture) frameInlined(pid uint32, f Frame) ([]string, []SourceLine) {
	if f.JIT() {
		return nil, nil
	}
	if m := c.NativeAt(pid, f.Mapping, f.Address); m != nil {
		return m.Inlined[f.Address], m.Lines[f.Address]
	}
	return nil, nil
}

// AppendAddressedKey appends to key what tells native frames of one function and mapping
// apart besides their addresses, as FoldProcesses and a merge of captures compare them: the
// calls inlined at the frame's address and the source positions there.
func AppendAddressedKey(key []byte, calls []string, lines []SourceLine) []byte {
	key = appendUvarint(key, uint64(len(calls)))
	for _, call := range calls {
		key = appendString(key, call)
	}
	key = appendUvarint(key, uint64(len(lines)))
	for _, l := range lines {
		key = appendString(key, l.File)
		key = appendUvarint(key, uint64(l.Line))
	}
	return key
}
