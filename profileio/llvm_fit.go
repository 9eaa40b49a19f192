package profileio

import "github.com/profd/profd/sampleprof"

// LeftOut counts what FitText or FitExtBinary left out of a profile because the format
// cannot hold its name.
type LeftOut struct {
	Functions   int    // top-level functions, with their samples
	CallTargets int    // call targets, from the lines that name them (the lines' counts stay)
	Inlined     int    // inlined callees, with their lines (their callers' totals keep them)
	Least       string // the least name left out, in byte order: one for a warning to give
}

// Any reports whether anything was left out.
func (l LeftOut) Any() bool { return l.Functions+l.CallTargets+l.Inlined > 0 }

// FitText returns p without what LLVM's text format cannot hold, which WriteText refuses
// with ErrName: a function or inlined callee whose name is empty, starts with a blank, '#'
// or '!' (an inlined callee's also with a digit) or holds a control character, and a call
// target whose name also holds a blank or a colon before a digit (V8's "JS:*f file.js:1:2",
// say). It returns p itself when nothing is left out, else a copy; p is not changed.
func FitText(p *sampleprof.Profile) (*sampleprof.Profile, LeftOut) {
	return fit(p, nameRules{
		function:   func(name string) bool { return checkTextName(name, false) == nil },
		callTarget: func(name string) bool { return checkTextName(name, true) == nil },
		inlined:    func(name string) bool { return checkTextName(name, false) == nil && (name[0] < '0' || name[0] > '9') },
	})
}

// FitExtBinary returns p without what LLVM's ext-binary format cannot hold, which
// WriteExtBinary refuses with ErrName: names that are empty or hold a NUL byte. It returns
// p itself when nothing is left out, else a copy; p is not changed.
func FitExtBinary(p *sampleprof.Profile) (*sampleprof.Profile, LeftOut) {
	ok := func(name string) bool { return name != "" && !containsNUL(name) }
	return fit(p, nameRules{function: ok, callTarget: ok, inlined: ok})
}

// nameRules says which names a format holds, as a function's, a call target's and an
// inlined callee's.
type nameRules struct {
	function, callTarget, inlined func(string) bool
}

// fit is FitText and FitExtBinary under the format's rules.
func fit(p *sampleprof.Profile, r nameRules) (*sampleprof.Profile, LeftOut) {
	var left LeftOut
	fits := true
	for _, f := range p.Functions {
		if fits = r.function(f.Name) && fitsAll(f, r); !fits {
			break
		}
	}
	if fits {
		return p, left
	}
	out := &sampleprof.Profile{Functions: make(map[string]*sampleprof.FunctionProfile, len(p.Functions))}
	for _, f := range p.Functions {
		if !r.function(f.Name) {
			left.note(&left.Functions, f.Name)
			continue
		}
		out.Functions[f.Name] = fitFunction(f, r, &left)
	}
	return out, left
}

// note counts one name left out in *n and keeps it when it is the least so far.
func (l *LeftOut) note(n *int, name string) {
	if !l.Any() || name < l.Least {
		l.Least = name
	}
	*n++
}

// fitsAll reports whether the format holds every name f's lines hold, its inlined callees'
// included.
func fitsAll(f *sampleprof.FunctionProfile, r nameRules) bool {
	for _, targets := range f.Calls {
		for name := range targets {
			if !r.callTarget(name) {
				return false
			}
		}
	}
	for _, callees := range f.Inlined {
		for _, c := range callees {
			if !r.inlined(c.Name) || !fitsAll(c, r) {
				return false
			}
		}
	}
	return true
}

// fitFunction returns f without the call targets and inlined callees the format cannot
// hold, counting them in left: f itself when it has none, else a copy that shares what did
// not change.
func fitFunction(f *sampleprof.FunctionProfile, r nameRules, left *LeftOut) *sampleprof.FunctionProfile {
	if fitsAll(f, r) {
		return f
	}
	g := *f
	g.Calls = make(map[sampleprof.LineLocation]map[string]uint64, len(f.Calls))
	for loc, targets := range f.Calls {
		kept := make(map[string]uint64, len(targets))
		for name, n := range targets {
			if r.callTarget(name) {
				kept[name] = n
			} else {
				left.note(&left.CallTargets, name)
			}
		}
		if len(kept) > 0 {
			g.Calls[loc] = kept
		}
	}
	g.Inlined = make(map[sampleprof.LineLocation]map[string]*sampleprof.FunctionProfile, len(f.Inlined))
	for loc, callees := range f.Inlined {
		kept := make(map[string]*sampleprof.FunctionProfile, len(callees))
		for name, c := range callees {
			if r.inlined(c.Name) {
				kept[name] = fitFunction(c, r, left)
			} else {
				left.note(&left.Inlined, c.Name)
			}
		}
		if len(kept) > 0 {
			g.Inlined[loc] = kept
		}
	}
	return &g
}
