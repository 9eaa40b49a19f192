package compare

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"

	"github.com/profd/profd/sampleprof"
)

// Callsites says where each function of an IR module had another inlined into it: per
// caller, per callee, the distinct call locations in the caller (line and raw
// discriminator). Only the innermost level is kept: a location inlined through two calls
// names its callee and the function it was inlined into first.
type Callsites map[string]map[string][]Loc

var (
	subprogramRE = regexp.MustCompile(`^!(\d+) = (?:distinct )?!DISubprogram\(name: "([^"]*)"(?:, linkageName: "([^"]*)")?`)
	lexScopeRE   = regexp.MustCompile(`^!(\d+) = (?:distinct )?!DILexicalBlock(?:File)?\(scope: !(\d+)`)
	inlinedLocRE = regexp.MustCompile(`^!(\d+) = (?:distinct )?!DILocation\(line: (\d+)(?:, column: \d+)?, scope: !(\d+)(?:, inlinedAt: !(\d+))?`)
)

// ParseCallsites reads the inlining record of LLVM IR text: the inlinedAt chains of its
// DILocations. Errors name the line.
func ParseCallsites(r io.Reader) (Callsites, error) {
	type location struct{ line, scope, at uint64 }
	names := map[uint64]string{}  // DISubprogram → linkage name, else name
	parent := map[uint64]uint64{} // lexical scope → enclosing scope
	discs := map[uint64]uint32{}  // DILexicalBlockFile → discriminator
	locs := map[uint64]location{} // DILocation
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxIRLineBytes)
	id := func(s string) uint64 { v, _ := strconv.ParseUint(s, 10, 64); return v }
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := subprogramRE.FindStringSubmatch(line); m != nil {
			names[id(m[1])] = m[2]
			if m[3] != "" {
				names[id(m[1])] = m[3]
			}
		} else if m := lexScopeRE.FindStringSubmatch(line); m != nil {
			parent[id(m[1])] = id(m[2])
			if d := blockFileRE.FindStringSubmatch(line); d != nil {
				v, err := strconv.ParseUint(d[2], 10, 32)
				if err != nil {
					return nil, fmt.Errorf("compare: ir line %d: discriminator %q: %w", n, d[2], err)
				}
				discs[id(m[1])] = uint32(v)
			}
		} else if m := inlinedLocRE.FindStringSubmatch(line); m != nil {
			l, err := strconv.ParseUint(m[2], 10, 32)
			if err != nil {
				return nil, fmt.Errorf("compare: ir line %d: location line %q: %w", n, m[2], err)
			}
			locs[id(m[1])] = location{l, id(m[3]), id(m[4])}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("compare: reading ir: %w", err)
	}
	function := func(scope uint64) string {
		for range len(parent) + 1 { // a bounded walk: malformed IR may hold a cycle
			if name, ok := names[scope]; ok {
				return name
			}
			next, ok := parent[scope]
			if !ok {
				return ""
			}
			scope = next
		}
		return ""
	}
	calls := Callsites{}
	for _, l := range locs {
		site, ok := locs[l.at]
		if l.at == 0 || !ok || site.at != 0 {
			continue
		}
		callee, caller := function(l.scope), function(site.scope)
		if callee == "" || caller == "" {
			continue
		}
		loc := Loc{uint32(site.line), discs[site.scope]}
		if calls[caller] == nil {
			calls[caller] = map[string][]Loc{}
		}
		seen := false
		for _, have := range calls[caller][callee] {
			seen = seen || have == loc
		}
		if !seen {
			calls[caller][callee] = append(calls[caller][callee], loc)
		}
	}
	return calls, nil
}

// NestInlined moves into p's callers the profiles of the functions inlined into them, as
// inlined callsite records: the shape LLVM's sample loader needs to annotate IR in which
// the inlining has already happened (the IR the JIT ran), since it finds an inlined
// instruction's samples through its inline stack. profd's profiles hold inlined code as
// standalone functions instead (package profgen), which fits a compilation from source,
// where the loader runs before the inliner. A callee inlined at several places (in one
// caller or in several) is left alone: its standalone profile merges the samples of every
// copy, which a flat line table cannot split among them. first gives
// each caller's first line (profgen.SubprogramLines), from which callsite offsets count.
// It returns how many profiles it nested.
func NestInlined(p *sampleprof.Profile, calls Callsites, first map[string]uint32) int {
	copies := map[string]int{}
	for _, callees := range calls {
		for callee, sites := range callees {
			copies[callee] += len(sites)
		}
	}
	n := 0
	for caller, callees := range calls {
		cp := p.Functions[caller]
		if cp == nil {
			continue
		}
		for callee, sites := range callees {
			fp := p.Functions[callee]
			if fp == nil || copies[callee] != 1 || sites[0].Line < first[caller] {
				continue
			}
			base, _ := sampleprof.DecodeDiscriminator(sites[0].Discriminator)
			at := sampleprof.LineLocation{LineOffset: sites[0].Line - first[caller], Discriminator: base}
			nested := *fp
			nested.HeadSamples = 0
			if cp.Inlined == nil {
				cp.Inlined = map[sampleprof.LineLocation]map[string]*sampleprof.FunctionProfile{}
			}
			if cp.Inlined[at] == nil {
				cp.Inlined[at] = map[string]*sampleprof.FunctionProfile{}
			}
			cp.Inlined[at][callee] = &nested
			cp.TotalSamples += nested.TotalSamples
			n++
		}
	}
	return n
}
