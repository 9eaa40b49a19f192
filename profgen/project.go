package profgen

import (
	"sort"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/sampleprof"
)

// BlockCount is a basic block's byte range, as offsets from the start of its code object,
// and how often it ran (reestimated, or raw block averages).
type BlockCount struct {
	Start, End uint64
	Count      uint64
}

// CallCount is a call seen at an offset of a code object: to whom and how often.
type CallCount struct {
	Offset uint64
	Callee string
	Count  uint64
}

// FunctionCounts is what the daemon or the reestimate glue knows of one function; Project
// turns it into the function's LLVM sample profile.
type FunctionCounts struct {
	Object *codeobj.Object // name, address, size and line table
	Blocks []BlockCount    // empty when only raw samples are known (see Raw)
	Entry  int             // index into Blocks of the entry block; its count is the head count
	// Raw holds raw samples per offset; Project uses it only when Blocks is empty, summing
	// each line's samples (no head count can be known then).
	Raw   []profileio.OffsetCount
	Calls []CallCount
	// Samples is the function's raw sample count, used as its total when there is no line
	// table to project block counts onto.
	Samples uint64
	// FirstLine is the function's first source line (the DISubprogram's line), from which
	// LLVM counts line offsets: FromCapture takes it from the IR when given one, else from
	// the code object (codeobj.Object.FirstLine, from the JIT's debug object). 0 means:
	// the line of the line-table entry at the function's first byte (clang gives the
	// prologue the function's own line), else the lowest line of the function's own file in
	// its line table.
	FirstLine uint32
}

// RawFunctionCounts is the projection input for a captured object before reestimation:
// its raw samples per offset. Glue that has block counts sets Blocks and Entry on it.
func RawFunctionCounts(o *profileio.CaptureObject) FunctionCounts {
	return FunctionCounts{Object: &o.Object, Raw: o.Samples, Samples: o.TotalSamples()}
}

// BlocksFromCFG pairs a CFG's blocks with their counts (counts[i] for g.Blocks[i]). base
// is subtracted from block addresses: the object's address when the CFG was recovered at
// its load address, 0 when it was recovered at offset 0.
func BlocksFromCFG(g *cfg.Graph, counts []uint64, base uint64) []BlockCount {
	bs := make([]BlockCount, 0, len(g.Blocks))
	for i, b := range g.Blocks {
		var n uint64
		if i < len(counts) {
			n = counts[i]
		}
		bs = append(bs, BlockCount{Start: b.Start - base, End: b.End - base, Count: n})
	}
	return bs
}

// Projection reports what Project could not place.
type Projection struct {
	Profile *sampleprof.FunctionProfile
	// DroppedLines counts line-table entries of blocks that were left out: lines of another
	// file (inlined code, which the flat line table cannot attribute), lines before
	// FirstLine, or offsets LLVM's text format cannot hold.
	DroppedLines int
}

// Project projects block counts onto source lines: each block's count goes to every line
// whose code lies in the block, and a line in several blocks keeps the largest count, so
// that LLVM, which takes a block's weight as the maximum over its lines, reads the block
// counts back. Without blocks, raw samples are summed per line instead. The head count is
// the entry block's count; the total is the sum over lines, in the same unit (with no line
// table, which NoLineTable then records, the sum over blocks, or Samples when there are no
// blocks either). Calls are attributed to the line of their
// offset. Line entries' discriminators are DWARF discriminators in LLVM's encoding
// (sampleprof.DecodeDiscriminator): the profile keys counts by the base discriminator. Unlike LLVM's
// AutoFDO tooling, which counts executions, Project does not multiply the counts of
// duplicated code (unrolled or vectorised) by its duplication factor: block counts estimated
// from time samples are off by small factors, which a factor of up to 32 would blow up (on
// hash, a vector epilogue that runs once per call read as 31 iterations of its loop, and
// clang vectorised the loop, which runs 10). Project is a pure function, safe to call
// concurrently.
func Project(fc FunctionCounts) Projection {
	o := fc.Object
	f := &sampleprof.FunctionProfile{Name: o.Name}
	if fc.Entry >= 0 && fc.Entry < len(fc.Blocks) {
		f.HeadSamples = fc.Blocks[fc.Entry].Count
	}
	if len(o.Lines) == 0 {
		// The total in the head's unit: each block stands for a line of its own. Raw
		// samples (no blocks) have no head.
		f.TotalSamples = fc.Samples
		if len(fc.Blocks) > 0 {
			f.TotalSamples = 0
			for _, b := range fc.Blocks {
				f.TotalSamples = sampleprof.SatAdd(f.TotalSamples, b.Count)
			}
		}
		f.NoLineTable = true
		return Projection{Profile: f}
	}
	lines := sortedLines(o.Lines)
	head := lines[codeobj.CoveringLine(lines, o.Addr)]
	file := head.File
	first := fc.FirstLine
	if first == 0 && head.Addr == o.Addr {
		// The prologue carries the function's own line (the DISubprogram's scope line):
		// what LLVM counts offsets from. Inlined code above it makes the lowest line wrong.
		first = head.Line
	}
	if first == 0 {
		for _, l := range lines {
			if l.File == file && l.Line != 0 && (first == 0 || l.Line < first) {
				first = l.Line
			}
		}
	}
	var pr Projection
	// locate gives a line entry's location: LLVM keys counts by base discriminator.
	locate := func(l codeobj.LineEntry) (sampleprof.LineLocation, bool) {
		if l.File != file || l.Line < first || l.Line-first > sampleprof.MaxLineOffset {
			pr.DroppedLines++
			return sampleprof.LineLocation{}, false
		}
		base, _ := sampleprof.DecodeDiscriminator(l.Discriminator)
		return sampleprof.LineLocation{LineOffset: l.Line - first, Discriminator: base}, true
	}
	eachBlockLine(fc, lines, func(b BlockCount, l codeobj.LineEntry) {
		loc, ok := locate(l)
		if !ok {
			return
		}
		if f.Body == nil {
			f.Body = map[sampleprof.LineLocation]uint64{}
		}
		if c, seen := f.Body[loc]; !seen || b.Count > c {
			f.Body[loc] = b.Count
		}
	})
	if len(fc.Blocks) == 0 {
		for _, r := range fc.Raw {
			if loc, ok := locate(lines[codeobj.CoveringLine(lines, o.Addr+r.Offset)]); ok {
				f.AddBody(loc, r.Count)
			}
		}
	}
	for _, c := range fc.Calls {
		if loc, ok := locate(lines[codeobj.CoveringLine(lines, o.Addr+c.Offset)]); ok {
			f.AddCall(loc, c.Callee, c.Count)
		}
	}
	for _, n := range f.Body {
		f.TotalSamples = sampleprof.SatAdd(f.TotalSamples, n)
	}
	pr.Profile = f
	return pr
}

// EachBlockLine calls fn for each of fc's blocks and each entry of its object's line table
// that holds code of the block: the entry covering the block's start and every entry that
// starts inside it. Project gives a line the largest count fn sees for it.
func EachBlockLine(fc FunctionCounts, fn func(b BlockCount, l codeobj.LineEntry)) {
	if len(fc.Blocks) > 0 && len(fc.Object.Lines) > 0 {
		eachBlockLine(fc, sortedLines(fc.Object.Lines), fn)
	}
}

// eachBlockLine is EachBlockLine over lines, fc's line table in address order.
func eachBlockLine(fc FunctionCounts, lines []codeobj.LineEntry, fn func(b BlockCount, l codeobj.LineEntry)) {
	for _, b := range fc.Blocks {
		start, end := fc.Object.Addr+b.Start, fc.Object.Addr+b.End
		for i := codeobj.CoveringLine(lines, start); i < len(lines) && lines[i].Addr < end; i++ {
			fn(b, lines[i])
		}
	}
}

// sortedLines returns lines in address order: lines itself when it is, else a sorted copy.
func sortedLines(lines []codeobj.LineEntry) []codeobj.LineEntry {
	if sort.SliceIsSorted(lines, func(i, j int) bool { return lines[i].Addr < lines[j].Addr }) {
		return lines
	}
	lines = append([]codeobj.LineEntry(nil), lines...)
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].Addr < lines[j].Addr })
	return lines
}
