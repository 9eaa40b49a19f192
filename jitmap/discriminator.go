package jitmap

import (
	"sort"

	"github.com/profd/profd/codeobj"
)

// MergeDiscriminators copies discriminators from rows (a debug line table of the same code,
// such as DebugObject returns, sorted by address) onto o's line entries: an entry whose
// discriminator is 0 takes that of the last row at the same address with the same line.
// Entries without such a row keep theirs, so a line table from another source (another
// compilation of the code, or none) changes nothing. It returns how many entries it changed.
// Files are not compared: the two tables may spell a path differently.
func MergeDiscriminators(o *codeobj.Object, rows []codeobj.LineEntry) int {
	n := 0
	for i := range o.Lines {
		l := &o.Lines[i]
		if l.Discriminator != 0 {
			continue
		}
		j := sort.Search(len(rows), func(j int) bool { return rows[j].Addr > l.Addr })
		for j--; j >= 0 && rows[j].Addr == l.Addr; j-- {
			if rows[j].Line == l.Line {
				if rows[j].Discriminator != 0 {
					l.Discriminator = rows[j].Discriminator
					n++
				}
				break
			}
		}
	}
	return n
}

// Covers reports whether some row of rows (sorted by address) lies inside o's code range.
func Covers(o *codeobj.Object, rows []codeobj.LineEntry) bool {
	j := sort.Search(len(rows), func(j int) bool { return rows[j].Addr >= o.Addr })
	return j < len(rows) && o.Contains(rows[j].Addr)
}
