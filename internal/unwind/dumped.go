package unwind

import (
	"slices"
	"sort"

	"github.com/profd/profd/internal/cfi"
)

// dumpedCode is the frame information of one function's code a JIT wrote in its jitdump, or
// the code's instructions, from which it is worked out the first time a walk needs it.
type dumpedCode struct {
	lo, hi uint64 // the code, where it is now
	table  *cfi.Table
	code   []byte // until a walk needs the table: the instructions (AddJITCode)
	bias   uint64 // how far the code moved since its table was read, or its code given (CODE_MOVE)
	bytes  int64
}

// dumpedList holds code ranges that do not overlap, in address order, in chunks of at most
// 2·dumpedChunk: a JIT's records come in any address order, and inserting each into one
// sorted slice would move all those above it.
type dumpedList struct {
	chunks [][]dumpedCode // each sorted and non-empty; every range of one below the next's
}

const dumpedChunk = 256

// find returns the range that holds pc (valid until the list changes), nil when none does.
func (l *dumpedList) find(pc uint64) *dumpedCode {
	c := sort.Search(len(l.chunks), func(c int) bool { ch := l.chunks[c]; return ch[len(ch)-1].hi > pc })
	if c == len(l.chunks) {
		return nil
	}
	ch := l.chunks[c]
	i := sort.Search(len(ch), func(i int) bool { return ch[i].hi > pc })
	if ch[i].lo <= pc {
		return &ch[i]
	}
	return nil
}

// at returns the range that starts at addr.
func (l *dumpedList) at(addr uint64) (dumpedCode, bool) {
	d := l.find(addr)
	if d == nil || d.lo != addr {
		return dumpedCode{}, false
	}
	return *d, true
}

// remove takes out the ranges that overlap [lo, hi) and returns them.
func (l *dumpedList) remove(lo, hi uint64) []dumpedCode {
	var out []dumpedCode
	c := sort.Search(len(l.chunks), func(c int) bool { ch := l.chunks[c]; return ch[len(ch)-1].hi > lo })
	for c < len(l.chunks) {
		ch := l.chunks[c]
		i := sort.Search(len(ch), func(i int) bool { return ch[i].hi > lo })
		j := i
		for j < len(ch) && ch[j].lo < hi {
			j++
		}
		out = append(out, ch[i:j]...)
		more := j == len(ch) // the next chunk's first ranges may overlap too
		if ch = slices.Delete(ch, i, j); len(ch) == 0 {
			l.chunks = slices.Delete(l.chunks, c, c+1)
		} else {
			l.chunks[c] = ch
			c++
		}
		if !more {
			break
		}
	}
	return out
}

// insert adds d, which overlaps no range held.
func (l *dumpedList) insert(d dumpedCode) {
	if len(l.chunks) == 0 {
		l.chunks = [][]dumpedCode{{d}}
		return
	}
	// The last chunk whose first range starts below d, else the first.
	c := max(sort.Search(len(l.chunks), func(c int) bool { return l.chunks[c][0].lo > d.lo })-1, 0)
	ch := l.chunks[c]
	i := sort.Search(len(ch), func(i int) bool { return ch[i].lo > d.lo })
	ch = slices.Insert(ch, i, d)
	if len(ch) > 2*dumpedChunk {
		upper := slices.Clone(ch[dumpedChunk:])
		ch = slices.Clip(ch[:dumpedChunk])
		l.chunks = slices.Insert(l.chunks, c+1, upper)
	}
	l.chunks[c] = ch
}
