package sampleprof

import (
	"cmp"
	"slices"
	"sort"
	"strings"
)

// SortedFunctions returns the functions in the order LLVM's writers use: most total samples
// first, then by name.
func (p *Profile) SortedFunctions() []*FunctionProfile {
	fs := make([]*FunctionProfile, 0, len(p.Functions))
	for _, f := range p.Functions {
		fs = append(fs, f)
	}
	sort.Slice(fs, func(i, j int) bool {
		if fs[i].TotalSamples != fs[j].TotalSamples {
			return fs[i].TotalSamples > fs[j].TotalSamples
		}
		return fs[i].Name < fs[j].Name
	})
	return fs
}

// SortedLines returns the locations of f's body lines in ascending order.
func (f *FunctionProfile) SortedLines() []LineLocation {
	return SortedLocations(f.Body)
}

// SortedLocations returns m's locations in ascending order (LineLocation.Less), nil when m
// is empty: the order of a function's body lines, call lines or inlined callsites.
func SortedLocations[V any](m map[LineLocation]V) []LineLocation {
	if len(m) == 0 {
		return nil
	}
	locs := make([]LineLocation, 0, len(m))
	for l := range m {
		locs = append(locs, l)
	}
	slices.SortFunc(locs, func(a, b LineLocation) int {
		if a.LineOffset != b.LineOffset {
			return cmp.Compare(a.LineOffset, b.LineOffset)
		}
		return cmp.Compare(a.Discriminator, b.Discriminator)
	})
	return locs
}

// CallTarget is one call target of a line and how often it was called.
type CallTarget struct {
	Name  string
	Count uint64
}

// SortedCalls returns a line's call targets (a value of FunctionProfile.Calls) in the order
// LLVM writes them, most calls first, then by name. It appends to buf[:0], so a writer can
// reuse one buffer from line to line.
func SortedCalls(buf []CallTarget, m map[string]uint64) []CallTarget {
	ts := buf[:0]
	for n, c := range m {
		ts = append(ts, CallTarget{n, c})
	}
	if len(ts) > 1 {
		slices.SortFunc(ts, func(a, b CallTarget) int {
			if a.Count != b.Count {
				return cmp.Compare(b.Count, a.Count)
			}
			return strings.Compare(a.Name, b.Name)
		})
	}
	return ts
}
