package profileio

import (
	"cmp"
	"slices"
	"sort"
	"strings"
)

// LineLocation is a position inside a function as LLVM's sample profile names it: the source
// line minus the function's first line, and the line's DWARF discriminator.
type LineLocation struct {
	LineOffset    uint32
	Discriminator uint32
}

// Less orders locations as LLVM writes them: by offset, then discriminator.
func (l LineLocation) Less(m LineLocation) bool {
	if l.LineOffset != m.LineOffset {
		return l.LineOffset < m.LineOffset
	}
	return l.Discriminator < m.Discriminator
}

// maxTextLineOffset is the largest offset LLVM's text reader takes on a line without a
// discriminator (it checks that the offset fits 16 bits).
const maxTextLineOffset = 0xffff

// MaxLineOffset is the largest offset the writers emit. LLVM 14's ext-binary reader stops
// reading a function, without an error, at a larger offset and then misreads what
// follows; its text reader refuses one without a discriminator.
const MaxLineOffset = 0xffff

// FunctionProfile is one function's samples in LLVM's sample-profile model.
type FunctionProfile struct {
	Name         string // the symbol name as LLVM knows the function (its linkage name)
	TotalSamples uint64 // samples anywhere in the function, inlined callees included
	HeadSamples  uint64 // samples at entry: how often the function was entered
	// Body holds the sample count of each line; LLVM takes a block's weight as the maximum
	// over the lines of its instructions.
	Body map[LineLocation]uint64
	// Calls holds, per line, the call targets seen there and how often each was called.
	Calls map[LineLocation]map[string]uint64
	// Inlined holds the profiles of callees inlined at a line, by callee name. Their
	// HeadSamples are not carried by LLVM's formats and stay zero.
	Inlined map[LineLocation]map[string]*FunctionProfile
	// NoLineTable is true when the function's code had no line table, so only its total
	// and head samples are known. The text writer says so in a comment line; the ext-binary
	// format has no place for it.
	NoLineTable bool
}

// Profile is a whole LLVM sample profile: functions by name.
type Profile struct {
	Functions map[string]*FunctionProfile
}

// NewProfile returns an empty profile.
func NewProfile() *Profile { return &Profile{Functions: map[string]*FunctionProfile{}} }

// Add merges f into the profile, summing counts with any function of the same name (as
// LLVM's readers do). The profile keeps f itself when the name is new.
func (p *Profile) Add(f *FunctionProfile) {
	if old, ok := p.Functions[f.Name]; ok {
		old.merge(f)
		return
	}
	if p.Functions == nil {
		p.Functions = map[string]*FunctionProfile{}
	}
	p.Functions[f.Name] = f
}

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
	return sortedKeys(f.Body)
}

// AddBody adds n samples at loc.
func (f *FunctionProfile) AddBody(loc LineLocation, n uint64) {
	if f.Body == nil {
		f.Body = map[LineLocation]uint64{}
	}
	f.Body[loc] = SatAdd(f.Body[loc], n)
}

// AddCall records n calls from loc to callee. LLVM only keeps call targets on lines that
// have a body entry, so AddCall also makes sure loc has one.
func (f *FunctionProfile) AddCall(loc LineLocation, callee string, n uint64) {
	if f.Calls == nil {
		f.Calls = map[LineLocation]map[string]uint64{}
	}
	m := f.Calls[loc]
	if m == nil {
		m = map[string]uint64{}
		f.Calls[loc] = m
	}
	m[callee] = SatAdd(m[callee], n)
	f.AddBody(loc, 0)
}

// InlinedAt returns the profile of callee inlined at loc, creating it when absent.
func (f *FunctionProfile) InlinedAt(loc LineLocation, callee string) *FunctionProfile {
	if f.Inlined == nil {
		f.Inlined = map[LineLocation]map[string]*FunctionProfile{}
	}
	m := f.Inlined[loc]
	if m == nil {
		m = map[string]*FunctionProfile{}
		f.Inlined[loc] = m
	}
	c := m[callee]
	if c == nil {
		c = &FunctionProfile{Name: callee}
		m[callee] = c
	}
	return c
}

func (f *FunctionProfile) merge(g *FunctionProfile) {
	f.TotalSamples = SatAdd(f.TotalSamples, g.TotalSamples)
	f.HeadSamples = SatAdd(f.HeadSamples, g.HeadSamples)
	for loc, n := range g.Body {
		f.AddBody(loc, n)
	}
	for loc, m := range g.Calls {
		for callee, n := range m {
			f.AddCall(loc, callee, n)
		}
	}
	for loc, m := range g.Inlined {
		for callee, c := range m {
			f.InlinedAt(loc, callee).merge(c)
		}
	}
	f.NoLineTable = f.NoLineTable && g.NoLineTable
}

// sortedCalls appends a line's call targets to buf as LLVM writes them: most calls first,
// then by name.
func sortedCalls(buf []callTarget, m map[string]uint64) []callTarget {
	ts := buf[:0]
	for n, c := range m {
		ts = append(ts, callTarget{n, c})
	}
	if len(ts) > 1 {
		slices.SortFunc(ts, func(a, b callTarget) int {
			if a.count != b.count {
				return cmp.Compare(b.count, a.count)
			}
			return strings.Compare(a.name, b.name)
		})
	}
	return ts
}

func sortedKeys[V any](m map[LineLocation]V) []LineLocation {
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

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SatAdd is a+b, saturating at the largest uint64: counts in profiles and captures never
// wrap.
func SatAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint64(0)
}
