package elfsym

import (
	"fmt"
	"io"
)

// A Go executable's function table also says, for its runtime's tracebacks, how deep each
// function's frame is at each of its instructions: the record of a function holds, 12 bytes
// after its name's offset in every format, the offset (among the table's pc-value tables,
// counted from the header's pctab word from Go 1.16 on, from the table's start before) of
// its "pcsp" table. A pc-value table is a sequence of pairs of varints, from the value -1
// at the function's entry: the value's change, zig-zag encoded (the low bit the sign), then
// how many instruction quanta it holds for; a change of 0 after the first pair ends it.
//
// Go's linker writes no .eh_frame for Go's code, and the compiler gives a function whose
// frame is empty (a leaf that keeps its locals in registers) no frame pointer of its own:
// a walk by frame pointers from a sample in one skips its caller. These depths are what
// walks Go's code rightly.

// A GoSpan is part of a Go function's code, [Lo, Hi), over which its frame is one depth:
// the stack pointer lies Depth bytes below where it was at the function's entry, where the
// return address is. Outermost marks the functions a goroutine's or a thread's stack starts
// in (runtime.goexit, runtime.mstart, runtime.rt0_go): their caller is not a frame.
// Switches marks those that move to another stack and call on there (runtime.systemstack,
// mcall, morestack, asmcgocall): the frames above a call of theirs are on the stack they
// left, which their depths do not lead to.
type GoSpan struct {
	Lo, Hi    uint64
	Depth     int32
	Outermost bool
	Switches  bool
}

// goOutermost are the functions Go's stacks start in.
var goOutermost = map[string]bool{"runtime.goexit": true, "runtime.mstart": true, "runtime.rt0_go": true}

// goSwitches are the functions that switch stacks and call on the new one.
var goSwitches = map[string]bool{
	"runtime.systemstack": true, "runtime.systemstack_switch": true, "runtime.mcall": true,
	"runtime.morestack": true, "runtime.morestack_noctxt": true,
	"runtime.asmcgocall": true, "runtime.asmcgocall_no_g": true,
}

// maxGoFrameDepth bounds a frame's depth to what a CFA's offset holds (the runtime's
// deepest, reflectcall's runtime.call1073741824, is 1 GB and 16 bytes): a deeper one is of
// a table made up.
const maxGoFrameDepth = 1<<31 - 1<<12

// GoFrames calls fn with the spans of the functions of the Go executable r (size bytes),
// function by function in the table's order, and within one in address order; fn returning
// false stops it. A function whose table cannot be read whole gives no span. A file with no
// Go function table gives none, and no error.
func GoFrames(r io.ReaderAt, size int64, fn func(GoSpan) bool) error {
	ef, err := openELF(r, size)
	if err != nil {
		return err
	}
	t, text, err := ef.goTable(maxParseBytes)
	if t == nil {
		return err
	}
	return t.frames(text, fn)
}

// frames is GoFrames of table t, its entries counted from text.
func (t *goTable) frames(text uint64, fn func(GoSpan) bool) error {
	var err error
	var spans []GoSpan
	// A real table's functions have pcsp tables of their own; a made-up one may point them
	// all at one long table, to be decoded once per function. The bytes decoded in all are
	// bounded by a few times the table's.
	budget := 2*len(t.data) + 1<<16
	t.eachFunc(text, func(entry, end, rec uint64, name string) bool {
		spans = t.frameSpans(entry, end, rec, spans[:0], &budget)
		if budget < 0 {
			err = fmt.Errorf("elfsym: .gopclntab: its functions' frame depths take more than %d bytes to decode: a table made up", 2*len(t.data)+1<<16)
			return false
		}
		outermost, switches := goOutermost[name], goSwitches[name]
		for _, sp := range spans {
			sp.Outermost, sp.Switches = outermost, switches
			if !fn(sp) {
				return false
			}
		}
		return true
	})
	return err
}

// frameSpans appends to spans those of the function at [entry, end) whose record is at
// rec; none when its pcsp table is missing, runs past the table or the function, or
// gives a depth no frame has. A depth may be negative: assembly that pops its own return
// address (a walk cannot go on from there). It takes the bytes it decodes from budget.
func (t *goTable) frameSpans(entry, end, rec uint64, spans []GoSpan, budget *int) []GoSpan {
	at := rec + t.nameAt() + 12
	if at < rec || at > uint64(len(t.data))-4 {
		return spans
	}
	n := len(spans)
	var buf [32]pcSpan
	depths := t.pcValues(uint64(t.bo.Uint32(t.data[at:])), entry, end, buf[:0], budget)
	for _, d := range depths {
		if d.v < -maxGoFrameDepth || d.v > maxGoFrameDepth {
			return spans[:n]
		}
		spans = append(spans, GoSpan{Lo: d.lo, Hi: d.hi, Depth: int32(d.v)})
	}
	return spans
}

// pcSpan is part of a function's code, [lo, hi), over which a pc-value table has value v.
type pcSpan struct {
	lo, hi uint64
	v      int64
}

// pcValues appends to spans those of the pc-value table at off (among the table's
// pc-value tables) of the function at [entry, end), neighbours of one value merged; none
// when off is 0 (no table), or the table runs past the data or the function. It takes the
// bytes it decodes from budget.
func (t *goTable) pcValues(off, entry, end uint64, spans []pcSpan, budget *int) []pcSpan {
	r, ok := t.pcReader(off, entry, end, budget)
	if !ok {
		return spans
	}
	n := len(spans)
	for {
		lo, hi, v, ok := r.next()
		if !ok {
			if r.done {
				return spans
			}
			return spans[:n]
		}
		if last := len(spans) - 1; last >= n && spans[last].v == v {
			spans[last].hi = hi
		} else {
			spans = append(spans, pcSpan{lo: lo, hi: hi, v: v})
		}
	}
}

// quantum is the table's instruction quantum: pc-value tables count in it.
func (t *goTable) quantum() uint64 { return uint64(max(t.data[6], 1)) }

// pcReader reads the pc-value table at off (among the table's pc-value tables) of the
// function at [entry, end), taking the bytes it decodes from budget; false when off is 0
// (no table) or lies past the data.
func (t *goTable) pcReader(off, entry, end uint64, budget *int) (pcReader, bool) {
	if off == 0 || t.pctab > uint64(len(t.data)) || off >= uint64(len(t.data))-t.pctab {
		return pcReader{}, false
	}
	r := newPCReader(t.data[t.pctab+off:], entry, end, t.quantum())
	r.budget = budget
	return r, true
}

// A pcReader steps through a pc-value table of the function at [pc, end).
type pcReader struct {
	p           []byte
	pc, end, q  uint64
	v           int64
	first, done bool
	budget      *int // nil: no bound
}

func newPCReader(p []byte, entry, end, quantum uint64) pcReader {
	return pcReader{p: p, pc: entry, end: end, q: quantum, v: -1, first: true}
}

// next reads the table's next value and the code it holds for, [lo, hi); false at the
// table's end (done set) or where the table is damaged: it runs past its bytes or its
// function, or past the reader's budget.
func (r *pcReader) next() (lo, hi uint64, v int64, ok bool) {
	left := len(r.p)
	lo, hi, v, ok = r.step()
	if r.budget != nil {
		if *r.budget -= left - len(r.p); *r.budget < 0 {
			r.done = false
			return 0, 0, 0, false
		}
	}
	return lo, hi, v, ok
}

// step is next without the budget.
func (r *pcReader) step() (lo, hi uint64, v int64, ok bool) {
	for {
		change, k := uvarint(r.p)
		if k == 0 {
			return 0, 0, 0, false
		}
		r.p = r.p[k:]
		if change == 0 && !r.first {
			r.done = true
			return 0, 0, 0, false
		}
		r.first = false
		r.v += int64(change>>1) ^ -int64(change&1)
		length, k := uvarint(r.p)
		if k == 0 || length > (r.end-r.pc)/r.q {
			return 0, 0, 0, false
		}
		r.p = r.p[k:]
		if length == 0 {
			continue
		}
		lo, r.pc = r.pc, r.pc+length*r.q
		return lo, r.pc, r.v, true
	}
}

// spanAt is the index of the span of spans (ascending and apart) that holds a, bounds
// giving a span's [lo, hi); -1 when none does.
func spanAt[S any](spans []S, a uint64, bounds func(S) (lo, hi uint64)) int {
	i, j := 0, len(spans)
	for i < j { // the first span that ends past a
		h := int(uint(i+j) >> 1)
		if _, hi := bounds(spans[h]); hi <= a {
			i = h + 1
		} else {
			j = h
		}
	}
	if i < len(spans) {
		if lo, _ := bounds(spans[i]); lo <= a {
			return i
		}
	}
	return -1
}

// uvarint reads an unsigned LEB128 of at most 32 bits from the start of p: the value and
// the bytes it took, 0 when p ends first or it is longer.
func uvarint(p []byte) (uint64, int) {
	var v uint64
	for i := 0; i < len(p) && i < 5; i++ {
		v |= uint64(p[i]&0x7f) << (7 * i)
		if p[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}
