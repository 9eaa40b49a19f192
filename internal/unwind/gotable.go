package unwind

import (
	"os"

	"github.com/profd/profd/internal/cfi"
	"github.com/profd/profd/internal/elfsym"
)

// goTable is the frame information of a Go executable's own code, from the depths of its
// frames its function table holds (elfsym.GoFrames): Go's linker writes no .eh_frame for
// it, and a walk by frame pointers skips the caller of each function whose frame is empty.
// Within a frame the return address is at the CFA's word below, and from the moment the
// frame holds more than it, the caller's frame pointer below that (Go saves it first,
// with a push or at the top of the space it makes). The functions Go's stacks start in are
// outermost; at those that switch stacks the walk of the copy stops (the frames before the
// switch are on the stack left, which the copy does not hold), and the sampler goes on by
// the kernel's frame-pointer chain. Nil when the file holds no such table.
func goTable(f *os.File) (*cfi.Table, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var rows []cfi.Row
	err = elfsym.GoFrames(f, st.Size(), func(s elfsym.GoSpan) bool {
		if n := len(rows); n > 0 && s.Lo < rows[n-1].PC {
			return true // out of order: the table is made up
		}
		if len(rows)+2 > cfi.MaxRows {
			return false
		}
		row := cfi.Row{PC: s.Lo, CFA: cfi.RegSP, CFAOffset: s.Depth + 8, RAOffset: -8}
		if s.Depth > 0 {
			row.BP, row.BPOffset = cfi.BPSaved, -16
		}
		if s.Outermost {
			row.RAOffset = 0
		}
		if s.Switches {
			row = cfi.Row{PC: s.Lo, CFA: cfi.RegUnknown} // the walk stops: the kernel's goes on
		}
		// The end of the span's rule, replaced by the next span's where it starts there.
		rows = append(rows, row, cfi.Row{PC: s.Hi, CFA: cfi.RegNone})
		return true
	})
	return cfi.NewTable(rows), err
}
