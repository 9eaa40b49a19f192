package oracle

// Count is how many times the instruction at addr ran (0 if it never did). For a CFG over the
// function's code, a block's exact count is the Count of its first instruction.
func (f *Function) Count(addr uint64) uint64 { return f.Counts[Addr(addr)] }

// EdgeCount is how many times control went from the instruction at from directly to the one
// at to: taken jumps plus the fall-through. For a CFG edge, from is the source block's last
// instruction and to the target block's first.
func (f *Function) EdgeCount(from, to uint64) uint64 {
	var n uint64
	for _, j := range f.Jumps {
		if j.From == Addr(from) && j.To == Addr(to) {
			n += j.Count
		}
	}
	for _, e := range f.Fallthroughs {
		if e.From == Addr(from) && e.To == Addr(to) {
			n += e.Count
		}
	}
	return n
}
