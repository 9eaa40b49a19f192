package elfsym

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/profd/profd/internal/testenv"
)

// TestGoInlines builds testdata/goprog.go as an executable and a PIE, with its symbols and
// without (-ldflags=-s -w), and holds the inlined calls read from Go's function table against
// the DWARF the compiler wrote for the same code (the full build's): at the first address of
// each range of each inlined subroutine, the chain names it at its depth among the inlined
// subroutines that hold it (innermost first), whichever build's table is asked.
func TestGoInlines(t *testing.T) {
	testenv.Requires(t, testenv.Tool("go"))
	dir := t.TempDir()
	for _, c := range goBuilds {
		t.Run(c.name, func(t *testing.T) {
			full, stripped := buildGoProg(t, filepath.Join(dir, c.name), c.flags)
			calls := dwarfInlinedCalls(t, full)
			if len(calls) < 1000 {
				t.Fatalf("the DWARF of %s has %d inlined calls: the check would say little", full, len(calls))
			}
			for _, path := range []string{full, stripped} {
				tab := readFile(t, path)
				bad := 0
				for _, call := range calls {
					chain := tab.InlinedVaddr(call.addr)
					if i := len(chain) - 1 - call.depth; i < 0 || chain[i] != call.name {
						if bad++; bad <= 5 {
							t.Errorf("%s at %#x: inlined calls %q, want %s at depth %d", filepath.Base(path), call.addr, chain, call.name, call.depth)
						}
					}
				}
				if bad > 0 {
					t.Errorf("%s: %d of %d inlined calls differ from the DWARF's", filepath.Base(path), bad, len(calls))
				}
				t.Logf("%s: %d inlined calls as the DWARF has them; %d spans, %d chains", filepath.Base(path), len(calls), len(tab.inlines), len(tab.chains))
			}
		})
	}
}

// dwarfCall is an inlined call as DWARF has it: the first address of one of its ranges,
// its function's name, how many inlined calls hold it (0: inlined into a function) and the
// line it was called at.
type dwarfCall struct {
	addr  uint64
	name  string
	depth int
	line  int64 // of the call, in the function it was inlined into
}

// dwarfInlinedCalls lists the inlined subroutines of the file at path.
func dwarfInlinedCalls(t *testing.T, path string) []dwarfCall {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	names := map[dwarf.Offset]string{}
	type pending struct {
		e     *dwarf.Entry
		depth int
	}
	var inlined []pending
	var open []bool // per open entry with children: whether it is an inlined subroutine
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			break
		}
		if e.Tag == 0 {
			open = open[:max(len(open)-1, 0)]
			continue
		}
		if n, ok := e.Val(dwarf.AttrName).(string); ok {
			names[e.Offset] = n
		}
		if e.Tag == dwarf.TagInlinedSubroutine {
			depth := 0
			for _, in := range open {
				if in {
					depth++
				}
			}
			inlined = append(inlined, pending{e, depth})
		}
		if e.Children {
			open = append(open, e.Tag == dwarf.TagInlinedSubroutine)
		}
	}
	var calls []dwarfCall
	for _, p := range inlined {
		origin, _ := p.e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		ranges, err := d.Ranges(p.e)
		if err != nil {
			t.Fatal(err)
		}
		for _, rg := range ranges {
			if rg[1] > rg[0] {
				line, _ := p.e.Val(dwarf.AttrCallLine).(int64)
				calls = append(calls, dwarfCall{addr: rg[0], name: names[origin], depth: p.depth, line: line})
			}
		}
	}
	return calls
}

// goInlineTable lays out a Go 1.20 function table of one function, main.outer at
// [0x401000, 0x401100) with runtime.text at 0x401000, into which main.mid is inlined over
// [0x401010, 0x401030) (called at 0x401005, line 12 of outer.go), and main.leaf into
// main.mid over [0x401030, 0x401040) (called at 0x401018, line 22 of mid.go); and the
// function's data (from go:func.*), its inline tree first. Its lines: outer.go 11 over
// [0x401000, 0x401005), 12 to 0x401010; mid.go 21 to 0x401018, 22 to 0x401030; leaf.go 31
// to 0x401040; outer.go 13 to its end.
func goInlineTable() (table, funcdata []byte) {
	bo := binary.LittleEndian
	var b bytes.Buffer
	put := func(vs ...any) {
		for _, v := range vs {
			binary.Write(&b, bo, v)
		}
	}
	names := "main.outer\x00main.mid\x00main.leaf\x00"
	files := "outer.go\x00mid.go\x00leaf.go\x00"
	pcsp := goPCSP(0x100)
	// the inlined call's index: -1 over 0x10 bytes, 0 over 0x20, 1 over 0x10, -1 over 0xc0
	inlIndex := []byte{0, 0x10, 2, 0x20, 2, 0x10, 3, 0xc0, 0x01, 0}
	// the file (cutab's entry): 0 over 0x10, 1 over 0x20, 2 over 0x10, 0 over 0xc0
	pcfile := []byte{2, 0x10, 2, 0x20, 2, 0x10, 3, 0xc0, 0x01, 0}
	// the line: 11, 12, 21, 22, 31, 13 (changes zig-zag encoded)
	pcln := []byte{24, 0x05, 2, 0x0b, 18, 0x08, 2, 0x18, 18, 0x10, 35, 0xc0, 0x01, 0}
	const header = 8 + 8*8
	namesAt := uint64(header)
	cutab := namesAt + uint64(len(names))
	filetab := cutab + 3*4
	pctab := filetab + uint64(len(files))
	// pctab's first byte is none's: an offset of 0 means "no table".
	functab := pctab + 1 + uint64(len(pcsp)+len(inlIndex)+len(pcfile)+len(pcln))
	record := functab + 3*4
	put(uint32(goMagic120), [4]byte{0, 0, 1, 8}, uint64(1), uint64(3), uint64(0x401000), namesAt, cutab, filetab, pctab, functab)
	b.WriteString(names)
	put([3]uint32{0, 9, 16})
	b.WriteString(files)
	for _, t := range [][]byte{{0}, pcsp, inlIndex, pcfile, pcln} {
		b.Write(t)
	}
	at := func(i int) uint32 { // where the i-th of pcsp, inlIndex, pcfile, pcln lies in pctab
		return uint32(1 + []int{0, len(pcsp), len(pcsp) + len(inlIndex), len(pcsp) + len(inlIndex) + len(pcfile)}[i])
	}
	put(uint32(0), uint32(record-functab), uint32(0x100))
	// the record: entry, name, args, deferreturn, pcsp, pcfile, pcln, npcdata, cuOffset,
	// startLine, funcID, flag, pad, nfuncdata; pcdata[3]; funcdata[4]
	put(uint32(0), uint32(0), uint32(0), uint32(0), at(0), at(2), at(3), uint32(3), uint32(0), int32(1),
		[4]byte{0, 0, 0, 4}, [3]uint32{0, 0, at(1)}, [4]uint32{^uint32(0), ^uint32(0), ^uint32(0), 0})
	var fd bytes.Buffer
	// main.mid called at 0x401005 (index -1: from main.outer), main.leaf at 0x401018 (index 0)
	binary.Write(&fd, bo, [4]int32{0, int32(strings.Index(names, "main.mid")), 0x05, 10})
	binary.Write(&fd, bo, [4]int32{0, int32(strings.Index(names, "main.leaf")), 0x18, 20})
	return b.Bytes(), fd.Bytes()
}

// treesOf reads inline trees from data, the bytes past go:func.*.
func treesOf(data []byte) treeReader {
	return func(off uint64, n int) []byte {
		if off >= uint64(len(data)) {
			return nil
		}
		return data[off:min(off+uint64(n), uint64(len(data)))]
	}
}

// TestGoInlineTable reads a made-up table's inlined calls: the chains innermost first, none
// outside them, and a tree that names outside the data, or calls in a cycle, refused.
func TestGoInlineTable(t *testing.T) {
	data, funcdata := goInlineTable()
	tab, err := parseGoTable(data)
	if err != nil {
		t.Fatal(err)
	}
	base, inl, chains, capped := tab.inlines(tab.text, treesOf(funcdata), 100)
	lines, linesCapped := tab.lines(tab.text, 100, 1<<20)
	got := &Table{inlineBase: base, inlines: inl, chains: chains, lines: lines}
	for _, c := range []struct {
		addr uint64
		want []string
	}{
		{0x401000, nil}, {0x40100f, nil}, {0x401010, []string{"main.mid"}}, {0x40102f, []string{"main.mid"}},
		{0x401030, []string{"main.leaf", "main.mid"}}, {0x40103f, []string{"main.leaf", "main.mid"}},
		{0x401040, nil}, {0x4010ff, nil}, {0x401100, nil},
	} {
		if g := got.InlinedVaddr(c.addr); !slices.Equal(g, c.want) {
			t.Errorf("at %#x: %q, want %q", c.addr, g, c.want)
		}
	}
	outer, mid, leaf := func(l uint32) SourceLine { return SourceLine{"outer.go", l} },
		func(l uint32) SourceLine { return SourceLine{"mid.go", l} }, func(l uint32) SourceLine { return SourceLine{"leaf.go", l} }
	for _, c := range []struct {
		addr uint64
		want []SourceLine
	}{
		{0x401000, []SourceLine{outer(11)}}, {0x401007, []SourceLine{outer(12)}},
		{0x401012, []SourceLine{mid(21), outer(12)}}, {0x401020, []SourceLine{mid(22), outer(12)}},
		{0x401035, []SourceLine{leaf(31), mid(22), outer(12)}},
		{0x401050, []SourceLine{outer(13)}}, {0x4010ff, []SourceLine{outer(13)}}, {0x401100, nil}, {0x400fff, nil},
	} {
		if g := got.SourceVaddr(c.addr, nil); !slices.Equal(g, c.want) {
			t.Errorf("at %#x: source %+v, want %+v", c.addr, g, c.want)
		}
	}
	if capped || linesCapped {
		t.Error("capped under its bound")
	}
	if _, capped := tab.lines(tab.text, 100, 10); !capped {
		t.Error("tables of 24 bytes kept under a bound of 10")
	}
	if _, _, _, capped := tab.inlines(tab.text, treesOf(funcdata), 1); !capped {
		t.Error("two spans kept under a bound of one")
	}
	// main.leaf's call site in main.leaf's own code: a cycle.
	cycle := slices.Clone(funcdata)
	binary.LittleEndian.PutUint32(cycle[16+8:], 0x35)
	if _, inl, _, _ := tab.inlines(tab.text, treesOf(cycle), 100); len(inl) != 1 {
		t.Errorf("a cycle gave spans %+v, want main.mid's alone", inl)
	}
	if _, inl, _, _ := tab.inlines(tab.text, treesOf(funcdata[:20]), 100); len(inl) != 1 {
		t.Errorf("a tree cut short gave spans %+v, want main.mid's alone", inl)
	}
}

// FuzzGoInlines reads arbitrary bytes as a Go function table and its functions' data: no
// crash, at most the spans asked for, ascending and apart, each with a chain of names.
// Seeds: goInlineTable's.
func FuzzGoInlines(f *testing.F) {
	data, funcdata := goInlineTable()
	f.Add(data, funcdata)
	f.Fuzz(func(t *testing.T, data, funcdata []byte) {
		tab, err := parseGoTable(data)
		if err != nil || !tab.inlineTrees {
			return
		}
		base, inl, chains, _ := tab.inlines(0x400000, treesOf(funcdata), 64)
		if len(inl) > 64 {
			t.Fatalf("%d spans past a bound of 64", len(inl))
		}
		lines, _ := tab.lines(0x400000, 64, 1<<16)
		got := &Table{inlineBase: base, inlines: inl, chains: chains, lines: lines}
		for _, s := range inl {
			for _, addr := range []uint64{base + uint64(s.lo), base + s.hi() - 1} {
				if n, want := len(got.SourceVaddr(addr, nil)), len(chains[s.chain])+1; lines != nil && lines.funcAt(addr) != nil && n != want {
					t.Fatalf("at %#x: %d positions for %d inlined calls", addr, n, want-1)
				}
			}
		}
		for i, s := range inl {
			if s.size == 0 || i > 0 && uint64(s.lo) < inl[i-1].hi() {
				t.Fatalf("span %d %+v after %+v", i, s, inl[max(i-1, 0)])
			}
			if c := chains[s.chain]; len(c) == 0 || len(c) > maxInlineDepth || slices.Contains(c, "") {
				t.Fatalf("span %d: chain %q", i, c)
			}
		}
	})
}
