package execmaps

import (
	"cmp"
	"slices"
)

// layOut lays the mappings made out as the address space had them after the last: under
// (mappings as read from /proc, made before every record; ascending, as read) first, then
// made in the order they were made, each replacing what it overlaps of earlier ones (which
// keep their parts outside it, a file's offset moved with its start). The result is
// ascending by start and without overlaps; nil when both are empty.
func layOut(under, made []mapping) []Mapping {
	if len(under)+len(made) == 0 {
		return nil
	}
	out := make([]Mapping, 0, len(under)+len(made))
	for _, m := range under {
		if m.End > m.Start {
			out = place(out, m.Mapping) // appended: they come ascending
		}
	}
	byTime := func(a, b mapping) int { return cmp.Compare(a.ns, b.ns) }
	if !slices.IsSortedFunc(made, byTime) {
		slices.SortStableFunc(made, byTime)
	}
	for _, m := range made {
		if m.End > m.Start {
			out = place(out, m.Mapping)
		}
	}
	return out
}

// place puts m into space (ascending, no overlaps), cutting what it overlaps.
func place(space []Mapping, m Mapping) []Mapping {
	if n := len(space); n == 0 || space[n-1].End <= m.Start {
		// Above all of it: a process's maps read from /proc come so, thousands at once.
		return append(space, m)
	}
	// first: the first mapping that ends after m starts; last: the first that starts at or
	// after m ends. Those between overlap m.
	first, _ := slices.BinarySearchFunc(space, m.Start, func(s Mapping, start uint64) int {
		if s.End <= start {
			return -1
		}
		return 1
	})
	last, _ := slices.BinarySearchFunc(space, m.End, func(s Mapping, end uint64) int {
		if s.Start < end {
			return -1
		}
		return 1
	})
	var keep []Mapping
	if first < last {
		if head := space[first]; head.Start < m.Start {
			head.End = m.Start
			keep = append(keep, head)
		}
		keep = append(keep, m)
		if tail := space[last-1]; tail.End > m.End {
			keep = append(keep, cut(tail, m.End))
		}
	} else {
		keep = append(keep, m)
	}
	return slices.Replace(space, first, last, keep...)
}

// cut returns m from start on.
func cut(m Mapping, start uint64) Mapping {
	if m.Ino != 0 || m.Path != "" {
		m.Offset += start - m.Start
	}
	m.Start = start
	return m
}
