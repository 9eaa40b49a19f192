package llvmprof

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strconv"

	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
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
)

// Subprogram is a function defined in LLVM IR: its symbol name (the linkageName when the
// DISubprogram has one, else its name), its first source line (the DISubprogram's `line:`,
// from which LLVM's sample profile counts line offsets) and its source file.
type Subprogram struct {
	Name string
	Line uint32
	File string
}

// Subprograms reads LLVM IR text (clang -g -S -emit-llvm) and returns its function
// definitions, in the order of their metadata.
func Subprograms(r io.Reader) ([]Subprogram, error) {
	var subs []Subprogram
	var fileRefs []string
	files := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxIRLine)
	for n := 1; sc.Scan(); n++ {
		if m := diFileRE.FindSubmatch(sc.Bytes()); m != nil {
			files[string(m[1])] = string(m[2])
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
			return nil, fmt.Errorf("llvmprof: ir line %d: subprogram line %q: %w", n, line[1], err)
		}
		ref := ""
		if f := spFileRE.FindSubmatch(fields); f != nil {
			ref = string(f[1])
		}
		subs = append(subs, Subprogram{Name: string(name[1]), Line: uint32(v)})
		fileRefs = append(fileRefs, ref)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("llvmprof: reading ir: %w", err)
	}
	for i := range subs {
		subs[i].File = files[fileRefs[i]]
	}
	return subs, nil
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
func splitInlined(fc profileio.FunctionCounts, subs []Subprogram) []profileio.FunctionCounts {
	o := fc.Object
	if len(o.Lines) == 0 || len(subs) == 0 {
		return []profileio.FunctionCounts{fc}
	}
	file := path.Base(o.Lines[0].File)
	for _, l := range o.Lines {
		if l.Addr <= o.Addr {
			file = path.Base(l.File)
		}
	}
	var own []Subprogram
	found := false
	for _, s := range subs {
		if path.Base(s.File) == file {
			own = append(own, s)
			found = found || s.Name == o.Name
		}
	}
	if !found {
		return []profileio.FunctionCounts{fc}
	}
	sort.Slice(own, func(i, j int) bool { return own[i].Line < own[j].Line })
	owner := func(l jitmap.LineEntry) string {
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
	out := make([]profileio.FunctionCounts, 0, len(names))
	for k, name := range names {
		part := fc
		obj := *o
		obj.Name = name
		obj.Lines = make([]jitmap.LineEntry, len(o.Lines))
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
