package profgen

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strconv"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/sampleprof"
)

// maxIRLine caps one line of IR text that Subprograms reads (metadata lines are short).
const maxIRLine = 1 << 20

var (
	subprogramRE = regexp.MustCompile(`= distinct !DISubprogram\((.*)\)`)
	spNameRE     = regexp.MustCompile(`(?:^|, )name: "([^"]*)"`)
	spLinkageRE  = regexp.MustCompile(`(?:^|, )linkageName: "([^"]*)"`)
	spLineRE     = regexp.MustCompile(`(?:^|, )line: (\d+)`)
	spFileRE     = regexp.MustCompile(`(?:^|, )file: !(\d+)`)
	diFileRE     = regexp.MustCompile(`^!(\d+) = !DIFile\(filename: "([^"]*)"`)
	mdIDRE       = regexp.MustCompile(`^!(\d+) = `)
	blockRE      = regexp.MustCompile(`^!(\d+) = (?:distinct )?!DILexicalBlock(?:File)?\((.*)\)`)
	locationRE   = regexp.MustCompile(`^!(\d+) = (?:distinct )?!DILocation\((.*)\)`)
	scopeRE      = regexp.MustCompile(`(?:^|, )scope: !(\d+)`)
	columnRE     = regexp.MustCompile(`(?:^|, )column: (\d+)`)
	inlinedAtRE  = regexp.MustCompile(`(?:^|, )inlinedAt: !(\d+)`)
)

// Subprogram is a function defined in LLVM IR: its symbol name (the linkageName when the
// DISubprogram has one, else its name), its first source line (the DISubprogram's `line:`,
// from which LLVM's sample profile counts line offsets) and its source file.
type Subprogram struct {
	Name string
	Line uint32
	File string
	// CallLines are the lines of File at which the IR inlined the function into another
	// function of File, one per call site (a line:column); see callSiteCount.
	CallLines []uint32
}

// irLocation is a DILocation of the IR's metadata.
type irLocation struct {
	line, column uint32
	scope        string
	inlinedAt    string // "" when not inlined
}

// Subprograms reads LLVM IR text (clang -g -S -emit-llvm) and returns its function
// definitions, in the order of their metadata, with the lines they were inlined at.
func Subprograms(r io.Reader) ([]Subprogram, error) {
	var subs []Subprogram
	var fileRefs []string
	files := map[string]string{}
	subByID := map[string]int{}          // DISubprogram metadata id → index into subs
	parent := map[string]string{}        // lexical block → its scope
	locations := map[string]irLocation{} // DILocation metadata id → location
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxIRLine)
	for n := 1; sc.Scan(); n++ {
		if m := diFileRE.FindSubmatch(sc.Bytes()); m != nil {
			files[string(m[1])] = string(m[2])
			continue
		}
		if m := blockRE.FindSubmatch(sc.Bytes()); m != nil {
			if sm := scopeRE.FindSubmatch(m[2]); sm != nil {
				parent[string(m[1])] = string(sm[1])
			}
			continue
		}
		if m := locationRE.FindSubmatch(sc.Bytes()); m != nil {
			loc, err := parseLocation(m[2])
			if err != nil {
				return nil, fmt.Errorf("profgen: ir line %d: %w", n, err)
			}
			locations[string(m[1])] = loc
			continue
		}
		m := subprogramRE.FindSubmatch(sc.Bytes())
		if m == nil {
			continue
		}
		fields := m[1]
		name := spLinkageRE.FindSubmatch(fields)
		if name == nil {
			name = spNameRE.FindSubmatch(fields)
		}
		line := spLineRE.FindSubmatch(fields)
		if name == nil || line == nil {
			continue
		}
		v, err := strconv.ParseUint(string(line[1]), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("profgen: ir line %d: subprogram line %q: %w", n, line[1], err)
		}
		ref := ""
		if f := spFileRE.FindSubmatch(fields); f != nil {
			ref = string(f[1])
		}
		if id := mdIDRE.FindSubmatch(sc.Bytes()); id != nil {
			subByID[string(id[1])] = len(subs)
		}
		subs = append(subs, Subprogram{Name: string(name[1]), Line: uint32(v)})
		fileRefs = append(fileRefs, ref)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("profgen: reading ir: %w", err)
	}
	for i := range subs {
		subs[i].File = files[fileRefs[i]]
	}
	addCallLines(subs, subByID, parent, locations)
	return subs, nil
}

// parseLocation reads a DILocation's fields.
func parseLocation(fields []byte) (irLocation, error) {
	var loc irLocation
	for _, f := range []struct {
		re  *regexp.Regexp
		dst *uint32
	}{{spLineRE, &loc.line}, {columnRE, &loc.column}} {
		m := f.re.FindSubmatch(fields)
		if m == nil {
			continue
		}
		v, err := strconv.ParseUint(string(m[1]), 10, 32)
		if err != nil {
			return loc, fmt.Errorf("location %q: %w", m[1], err)
		}
		*f.dst = uint32(v)
	}
	if m := scopeRE.FindSubmatch(fields); m != nil {
		loc.scope = string(m[1])
	}
	if m := inlinedAtRE.FindSubmatch(fields); m != nil {
		loc.inlinedAt = string(m[1])
	}
	return loc, nil
}

// addCallLines gives each subprogram the lines of its own file it was inlined at: for every
// location inlined at a call site, the callee is the subprogram its scope chain ends in, the
// caller the one the call site's does. Call sites are told apart by line and column.
func addCallLines(subs []Subprogram, subByID map[string]int, parent map[string]string, locations map[string]irLocation) {
	subprogramOf := func(scope string) (int, bool) {
		for steps := 0; steps <= len(parent); steps++ { // a cycle in hostile input ends
			if i, ok := subByID[scope]; ok {
				return i, true
			}
			p, ok := parent[scope]
			if !ok {
				return 0, false
			}
			scope = p
		}
		return 0, false
	}
	type site struct {
		callee       int
		line, column uint32
	}
	seen := map[site]bool{}
	for _, loc := range locations {
		if loc.inlinedAt == "" {
			continue
		}
		call, ok := locations[loc.inlinedAt]
		if !ok || call.line == 0 {
			continue
		}
		callee, ok := subprogramOf(loc.scope)
		if !ok {
			continue
		}
		caller, ok := subprogramOf(call.scope)
		if !ok || subs[caller].File != subs[callee].File {
			continue
		}
		s := site{callee, call.line, call.column}
		if seen[s] {
			continue
		}
		seen[s] = true
		subs[callee].CallLines = append(subs[callee].CallLines, call.line)
	}
	for i := range subs {
		sort.Slice(subs[i].CallLines, func(a, b int) bool { return subs[i].CallLines[a] < subs[i].CallLines[b] })
	}
}

// SubprogramLines is Subprograms as a map from name to first line (Options.FirstLines).
func SubprogramLines(r io.Reader) (map[string]uint32, error) {
	subs, err := Subprograms(r)
	if err != nil {
		return nil, err
	}
	lines := make(map[string]uint32, len(subs))
	for _, s := range subs {
		lines[s.Name] = s.Line
	}
	return lines, nil
}

// splitInlined splits fc by the function each source line belongs to. The JIT's line table
// is flat: code inlined from another function of the same file carries that function's
// lines, which LLVM would read as lines of fc's function at wrong offsets (or which Project
// drops, when they lie above its first line). A line belongs to the subprogram of the
// object's file with the greatest first line at or below it. The result's first element
// is fc's own function, with every other function's lines hidden (line 0); then one
// FunctionCounts per inlined function, named after it, with only its lines and no head
// count: LLVM's sample loader annotates a function's body before inlining it, so the
// standalone profile reaches the inlined copies.
//
// Without a subprogram for fc's own function (or without a line table) fc is returned
// alone, unchanged.
func splitInlined(fc FunctionCounts, subs []Subprogram) []FunctionCounts {
	o := fc.Object
	if len(o.Lines) == 0 || len(subs) == 0 {
		return []FunctionCounts{fc}
	}
	file := objectFile(o)
	var own []Subprogram
	found := false
	for _, s := range subs {
		if path.Base(s.File) == file {
			own = append(own, s)
			found = found || s.Name == o.Name
		}
	}
	if !found {
		return []FunctionCounts{fc}
	}
	sort.Slice(own, func(i, j int) bool { return own[i].Line < own[j].Line })
	owner := func(l codeobj.LineEntry) string {
		if path.Base(l.File) != file || l.Line == 0 {
			return ""
		}
		i := sort.Search(len(own), func(i int) bool { return own[i].Line > l.Line })
		if i == 0 {
			return ""
		}
		return own[i-1].Name
	}
	names := []string{o.Name}
	seen := map[string]bool{o.Name: true}
	for _, l := range o.Lines {
		if n := owner(l); n != "" && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	firstLine := map[string]uint32{}
	for _, s := range own {
		firstLine[s.Name] = s.Line
	}
	out := make([]FunctionCounts, 0, len(names))
	for k, name := range names {
		part := fc
		obj := *o
		obj.Name = name
		obj.Lines = make([]codeobj.LineEntry, len(o.Lines))
		for i, l := range o.Lines {
			if owner(l) != name && !(k == 0 && owner(l) == "") {
				l.Line = 0 // another function's line: Project drops it
			}
			obj.Lines[i] = l
		}
		part.Object = &obj
		part.FirstLine = firstLine[name]
		if k > 0 {
			part.Entry = -1
			part.Calls = nil
			part.Samples = 0
		}
		out = append(out, part)
	}
	return out
}

// objectFile is the base name of the source file of o's entry: that of the last line-table
// entry at or below o's address (or of the first entry). o must have a line table.
func objectFile(o *codeobj.Object) string {
	file := path.Base(o.Lines[0].File)
	for _, l := range o.Lines {
		if l.Addr <= o.Addr {
			file = path.Base(l.File)
		}
	}
	return file
}

// callSiteCount is the head count of an inlined function's own profile: how often fc's
// object ran the callee's call sites (callLines, lines of the object's file), each line
// counted as Project counts it (the largest count of a block holding code of it). The copies
// inlined into fc's code have no entry block of their own, and without a head count LLVM's
// sample loader gives the function an entry count of 1, from which it infers that every loop
// in it runs hundreds of iterations per call (their exits get weight 1). 0 without block
// counts or line table.
func callSiteCount(fc FunctionCounts, callLines []uint32) uint64 {
	o := fc.Object
	if len(fc.Blocks) == 0 || len(o.Lines) == 0 || len(callLines) == 0 {
		return 0
	}
	file := objectFile(o)
	count := make(map[uint32]uint64, len(callLines))
	for _, l := range callLines {
		count[l] = 0
	}
	EachBlockLine(fc, func(b BlockCount, l codeobj.LineEntry) {
		if c, ok := count[l.Line]; ok && b.Count > c && path.Base(l.File) == file {
			count[l.Line] = b.Count
		}
	})
	var head uint64
	for _, l := range callLines {
		head = sampleprof.SatAdd(head, count[l])
	}
	return head
}
