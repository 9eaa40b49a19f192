package llvmprof

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
)

// maxIRLine caps one line of IR text that SubprogramLines reads (metadata lines are short;
// a longer line is skipped, not buffered).
const maxIRLine = 1 << 20

var (
	subprogramRE = regexp.MustCompile(`= distinct !DISubprogram\((.*)\)`)
	spNameRE     = regexp.MustCompile(`(?:^|, )name: "([^"]*)"`)
	spLinkageRE  = regexp.MustCompile(`(?:^|, )linkageName: "([^"]*)"`)
	spLineRE     = regexp.MustCompile(`(?:^|, )line: (\d+)`)
)

// SubprogramLines reads LLVM IR text (clang -g -S -emit-llvm) and returns each defined
// function's first source line, the DISubprogram's `line:`, keyed by its symbol name (the
// linkageName when the subprogram has one, else its name). LLVM's sample profile counts
// line offsets from that line; without it Project falls back to the lowest line of the
// function's file in the JIT's line table, which is wrong whenever code of a function
// defined above it was inlined (the inlined lines come first).
func SubprogramLines(r io.Reader) (map[string]uint32, error) {
	lines := map[string]uint32{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxIRLine)
	for n := 1; sc.Scan(); n++ {
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
		lines[string(name[1])] = uint32(v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("llvmprof: reading ir: %w", err)
	}
	return lines, nil
}
