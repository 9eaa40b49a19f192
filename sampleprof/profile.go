package sampleprof

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

// MaxLineOffset is the largest offset LLVM 14 reads back: its ext-binary reader stops
// reading a function, without an error, at a larger offset and then misreads what follows;
// its text reader refuses one without a discriminator.
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
	// and head samples are known. LLVM's formats have no field for it (profileio's text
	// writer says so in a comment line).
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
		old.Merge(f)
		return
	}
	if p.Functions == nil {
		p.Functions = map[string]*FunctionProfile{}
	}
	p.Functions[f.Name] = f
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

// Merge adds g's counts, call targets and inlined callees to f, whatever g's name; f has
// no line table only when neither had one. g is not changed and shares nothing with f.
func (f *FunctionProfile) Merge(g *FunctionProfile) {
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
			f.InlinedAt(loc, callee).Merge(c)
		}
	}
	f.NoLineTable = f.NoLineTable && g.NoLineTable
}

// SatAdd is a+b, saturating at the largest uint64: counts in profiles and captures never
// wrap.
func SatAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint64(0)
}
