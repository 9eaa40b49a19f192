package elfsym

import (
	"context"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/profd/profd/internal/testenv"
)

// dwarfSequences is the line tables of the file at p as debug/dwarf reads them, through
// .debug_info: each sequence's rows, in the file's code (its executable sections), with
// each row's file name as DWARF 5 names it (joined with its unit's directory before).
func dwarfSequences(t testing.TB, p string, code func(uint64) bool) (seqs [][]dwarf.LineEntry, version5 bool) {
	t.Helper()
	f, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	r := d.Reader()
	for {
		cu, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if cu == nil {
			break
		}
		r.SkipChildren()
		lr, err := d.LineReader(cu)
		if err != nil || lr == nil {
			continue
		}
		var seq []dwarf.LineEntry
		for {
			var e dwarf.LineEntry
			if err := lr.Next(&e); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			seq = append(seq, e)
			if e.EndSequence {
				if code(seq[0].Address) {
					seqs = append(seqs, seq)
				}
				seq = nil
			}
		}
		if cu.Val(dwarf.AttrStmtList) != nil {
			version5 = version5 || lineVersion(t, f, cu.Val(dwarf.AttrStmtList).(int64)) >= 5
		}
	}
	return seqs, version5
}

// lineVersion is the version of the line table at off in f's .debug_line.
func lineVersion(t testing.TB, f *elf.File, off int64) uint16 {
	b, err := f.Section(".debug_line").Data()
	if err != nil || off+6 > int64(len(b)) {
		t.Fatalf("line table at %d: %v", off, err)
	}
	return f.ByteOrder.Uint16(b[off+4:])
}

// inCode reports whether an address lies in an executable section of the file at p.
func inCode(t testing.TB, p string) func(uint64) bool {
	f, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var code []*elf.Section
	for _, s := range f.Sections {
		if s.Type == elf.SHT_PROGBITS && s.Flags&elf.SHF_EXECINSTR != 0 {
			code = append(code, s)
		}
	}
	return func(a uint64) bool {
		for _, s := range code {
			if a >= s.Addr && a < s.Addr+s.Size {
				return true
			}
		}
		return false
	}
}

// checkLines compares the positions tab gives with debug/dwarf's reading of the line tables
// of debugPath (the file itself or its debug file; code is the file's): at each row's
// address and the byte before the next row, the position of the last row at that address,
// none past a sequence's end. Addresses two sequences hold are left out. It returns the
// addresses compared.
func checkLines(t *testing.T, tab *Table, debugPath string, code func(uint64) bool) int {
	t.Helper()
	seqs, v5 := dwarfSequences(t, debugPath, code)
	held := map[uint64]int{}
	for _, seq := range seqs {
		for _, e := range seq[:len(seq)-1] {
			held[e.Address]++
		}
	}
	want := func(seq []dwarf.LineEntry, i int) SourceLine {
		e := seq[i]
		if e.EndSequence || e.Line == 0 {
			return SourceLine{}
		}
		pos := SourceLine{Line: uint32(e.Line)}
		if e.File != nil {
			pos.File = path.Clean(e.File.Name)
		}
		return pos
	}
	checked, bad := 0, 0
	var dst []SourceLine
	for _, seq := range seqs {
		for i := 0; i+1 < len(seq); i++ {
			if seq[i].Address == seq[i+1].Address {
				continue // the last row at an address holds it
			}
			w := want(seq, i)
			for _, a := range []uint64{seq[i].Address, seq[i+1].Address - 1} {
				if held[a] > 1 {
					continue
				}
				dst = tab.SourceVaddr(a, dst[:0])
				var got SourceLine
				if len(dst) > 0 {
					got = dst[0]
				}
				ok := got == w
				if !ok && got.Line == w.Line && got.File != "" && w.File != "" {
					// Before DWARF 5 the unit's own directory is in .debug_info alone;
					// from it on, debug/dwarf leaves a relative directory relative.
					ok = strings.HasSuffix(w.File, "/"+got.File) || v5 && strings.HasSuffix(got.File, "/"+w.File)
				}
				if checked++; !ok {
					if bad++; bad <= 5 {
						t.Errorf("%#x: %+v, want %+v", a, got, w)
					}
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d addresses with another position", bad, checked)
	}
	return checked
}

// TestDWARFLines: the positions elfsym gives a C or C++ program's code are debug/dwarf's,
// for GCC's and Clang's line tables of DWARF 3, 4 and 5, compressed or not, in the program
// or in its debug file.
func TestDWARFLines(t *testing.T) {
	testenv.Requires(t, testenv.Tool("cc"), testenv.Tool("objcopy"), testenv.Tool("strip"))
	for _, tc := range []struct {
		name  string
		cc    string
		args  []string
		strip string // stripped by this strip flag, its debug file found by build-id
	}{
		{name: "gcc-dwarf5", cc: "cc", args: []string{"-g", "-O2", "testdata/prog.c"}},
		{name: "gcc-dwarf4-nopie", cc: "cc", args: []string{"-gdwarf-4", "-O2", "-no-pie", "testdata/prog.c"}},
		{name: "gcc-dwarf3", cc: "cc", args: []string{"-gdwarf-3", "-O0", "testdata/prog.c"}},
		{name: "gxx-dwarf5", cc: "c++", args: []string{"-g", "-O2", "testdata/lines.cc"}},
		{name: "clang-dwarf5", cc: "clang-14", args: []string{"-g", "-O2", "testdata/prog.c"}},
		{name: "clang-dwarf4", cc: "clang-14", args: []string{"-gdwarf-4", "-O1", "-ffunction-sections", "-Wl,--gc-sections", "testdata/prog.c"}},
		{name: "gcc-zlib-debugfile", cc: "cc", args: []string{"-g", "-gz=zlib", "-O2", "testdata/prog.c"}, strip: "--strip-all"},
		// Its .symtab kept, its DWARF in its debug file alone.
		{name: "gcc-symtab-debugfile", cc: "cc", args: []string{"-g", "-O2", "testdata/prog.c"}, strip: "--strip-debug"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exec.LookPath(tc.cc); err != nil {
				t.Skip(err)
			}
			dir := t.TempDir()
			prog := filepath.Join(dir, "prog")
			argv := append([]string{"-o", prog, "-Wl,--build-id=sha1"}, tc.args...)
			if b, err := exec.Command(tc.cc, argv...).CombinedOutput(); err != nil {
				t.Fatalf("%s %s: %v\n%s", tc.cc, strings.Join(argv, " "), err, b)
			}
			code := inCode(t, prog)
			var hot uint64
			for _, s := range testenv.ELFSymbols(t, prog) {
				if s.Name == "hot" {
					hot = s.Value
				}
			}
			debug := prog
			var tab *Table
			if tc.strip != "" {
				tab, debug = readStrippedWithDebug(t, prog, tc.strip)
			} else {
				tab = readFile(t, prog)
			}
			if tab.dwarfLines == nil {
				t.Fatal("no line table read")
			}
			if src := tc.args[len(tc.args)-1]; src == "testdata/prog.c" && !slices.Contains(tc.args, "-gdwarf-4") && !slices.Contains(tc.args, "-gdwarf-3") {
				// DWARF 5 names the unit's directory: the file's path is whole.
				want := must(filepath.Abs(src))
				if got := tab.SourceVaddr(hot, nil); len(got) != 1 || got[0].File != want || got[0].Line == 0 {
					t.Errorf("hot at %#x: %+v, want a line of %s", hot, got, want)
				}
			}
			n := checkLines(t, tab, debug, code)
			t.Logf("%d addresses compared, %d bytes of table", n, len(tab.dwarfLines.data))
			if n < 20 {
				t.Errorf("%d addresses compared, want 20 at least", n)
			}
		})
	}
}

// readStrippedWithDebug moves prog's debug information into a debug file installed by its
// build-id, strips it with the strip flag, and reads it through a cache; it returns the
// table and the debug file.
func readStrippedWithDebug(t *testing.T, prog, strip string) (*Table, string) {
	t.Helper()
	id := readFile(t, prog).BuildID
	root := t.TempDir()
	debug := prog + ".debug"
	run(t, "objcopy", "--only-keep-debug", prog, debug)
	run(t, "strip", strip, prog)
	install(t, debug, root, path.Join(debugDir, ".build-id", id[:2], id[2:]+".debug"))
	install(t, prog, root, "/bin/prog")
	c := newTestCache(t, io.Discard)
	tab, err := c.Open(must(os.Open(root+"/bin/prog")), root, "/bin/prog").Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tab, debug
}

// readLibc reads the C library through a cache, with its distribution's debug file found by
// its build-id; it returns the table and the debug file. It skips the test without them.
func readLibc(t *testing.T) (*Table, string) {
	t.Helper()
	if _, err := os.Stat(libc); err != nil {
		t.Skip(err)
	}
	id := readFile(t, libc).BuildID
	debug := path.Join(debugDir, ".build-id", id[:2], id[2:]+".debug")
	if _, err := os.Stat(debug); err != nil {
		t.Skipf("the C library's debug file (libc6-dbg): %v", err)
	}
	tab, err := newTestCache(t, io.Discard).Open(must(os.Open(libc)), "", libc).Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tab, debug
}

// TestDWARFLinesLibc: the C library's code, named by its distribution's debug file (DWARF
// 5, compressed), has the positions debug/dwarf reads there.
func TestDWARFLinesLibc(t *testing.T) {
	tab, debug := readLibc(t)
	n := checkLines(t, tab, debug, inCode(t, libc))
	t.Logf("%d addresses compared, %d bytes of table", n, len(tab.dwarfLines.data))
	if n < 100000 {
		t.Errorf("%d addresses compared, want 100 000 at least", n)
	}
}

// FuzzDWARFLines decodes arbitrary bytes as a .debug_line section (its strings sections
// the same bytes): no crash, each sequence's addresses ascending and its last row an end,
// and each row of a sequence no other overlaps found at its address in the table. Seeds:
// prog.c's line tables of DWARF 3, 4 and 5, whole and cut.
func FuzzDWARFLines(f *testing.F) {
	testenv.Requires(f, testenv.Tool("cc"))
	dir := f.TempDir()
	for i, version := range []string{"-gdwarf-3", "-gdwarf-4", "-gdwarf-5"} {
		prog := build(f, dir, "prog"+version, version, "testdata/prog.c")
		ef := must(elf.Open(prog))
		data, err := ef.Section(".debug_line").Data()
		ef.Close()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)*(i+1)/4])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := lineDecoder{bo: binary.LittleEndian, lineStr: string(data), str: string(data), maxNameBytes: 1 << 16}
		var seqs [][]lineRow
		var tb lineTableBuilder
		d.decode(data, func(rows []lineRow) bool {
			for i := 1; i < len(rows); i++ {
				if rows[i].addr <= rows[i-1].addr {
					t.Fatalf("row %d at %#x after %#x", i, rows[i].addr, rows[i-1].addr)
				}
			}
			if rows[len(rows)-1].line != 0 {
				t.Fatalf("a sequence ends with line %d", rows[len(rows)-1].line)
			}
			seqs = append(seqs, slices.Clone(rows))
			tb.add(rows)
			return len(seqs) < 1000
		})
		if d.nameBytes > 1<<16 {
			t.Fatalf("%d bytes of names kept", d.nameBytes)
		}
		tab := tb.table()
		for i, seq := range seqs {
			lo, hi := seq[0].addr, seq[len(seq)-1].addr
			if slices.ContainsFunc(seqs[:i], func(o []lineRow) bool { return o[0].addr <= hi && lo <= o[len(o)-1].addr }) ||
				slices.ContainsFunc(seqs[i+1:], func(o []lineRow) bool { return o[0].addr <= hi && lo <= o[len(o)-1].addr }) {
				continue
			}
			for _, r := range seq[:len(seq)-1] {
				wantFile := r.file
				if r.line == 0 {
					wantFile = noFile
				}
				if line, file := tab.at(r.addr); line != r.line || file != wantFile {
					t.Fatalf("%#x: line %d of file %d, want %d of %d", r.addr, line, file, r.line, wantFile)
				}
			}
		}
	})
}

// addr2line runs tool, binutils' addr2line or LLVM's, as addr2line -a -f -i on the file at
// p for addrs: per address, its functions and places innermost first (the inlined calls',
// then the function's), as it names them; "??" and 0 where it does not know.
func addr2line(t *testing.T, tool, p string, addrs []uint64) [][]struct {
	fn  string
	pos SourceLine
} {
	t.Helper()
	var in strings.Builder
	for _, a := range addrs {
		fmt.Fprintf(&in, "%#x\n", a)
	}
	cmd := exec.Command(tool, "-a", "-f", "-i", "-e", p)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	type frame = struct {
		fn  string
		pos SourceLine
	}
	var all [][]frame
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := 0; i < len(lines); {
		if !strings.HasPrefix(lines[i], "0x") {
			t.Fatalf("%s: %q where an address was due", tool, lines[i])
		}
		i++
		var frames []frame
		for i+1 < len(lines) && !strings.HasPrefix(lines[i], "0x") {
			f := frame{fn: lines[i]}
			place, _, _ := strings.Cut(lines[i+1], " (discriminator")
			if file, line, ok := strings.Cut(place, ":"); ok && file != "??" {
				n, _ := strconv.Atoi(line)
				f.pos = SourceLine{File: path.Clean(file), Line: uint32(n)}
			}
			frames = append(frames, f)
			i += 2
		}
		all = append(all, frames)
	}
	if len(all) != len(addrs) {
		t.Fatalf("%s: %d answers for %d addresses", tool, len(all), len(addrs))
	}
	return all
}

// checkInlines compares the inlined calls and places tab gives at addresses of the file at
// p (or its debug file) with those tool (an addr2line) reads: the names of the inlined
// functions, innermost first, and the place of each call. It returns the addresses inside
// inlined calls.
func checkInlines(t *testing.T, tab *Table, tool, p string, addrs []uint64) int {
	t.Helper()
	want := addr2line(t, tool, p, addrs)
	inside, bad := 0, 0
	samePlace := func(got, want SourceLine) bool {
		return got == want || got.Line == want.Line && got.File != "" && want.File != "" &&
			(strings.HasSuffix(want.File, "/"+got.File) || strings.HasSuffix(got.File, "/"+want.File))
	}
	for i, a := range addrs {
		calls := tab.InlinedVaddr(a)
		places := tab.SourceVaddr(a, nil)
		w := want[i]
		if len(calls) > 0 {
			inside++
		}
		ok := len(w) == len(calls)+1 && (len(calls) == 0 || len(places) == len(w))
		for k := 0; ok && k < len(calls); k++ {
			ok = calls[k] == Demangle(w[k].fn) && samePlace(places[k+1], w[k+1].pos)
		}
		if !ok {
			if bad++; bad <= 5 {
				t.Errorf("%#x: calls %q at %+v; %s %+v", a, calls, places, tool, w)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d addresses differ from %s's", bad, len(addrs), tool)
	}
	return inside
}

// rowAddresses is at most n addresses of rows of the line tables of the file at p (or its
// debug file), spread over them.
func rowAddresses(t *testing.T, p string, code func(uint64) bool, n int) []uint64 {
	t.Helper()
	seqs, _ := dwarfSequences(t, p, code)
	var all []uint64
	for _, seq := range seqs {
		for _, e := range seq[:len(seq)-1] {
			all = append(all, e.Address)
		}
	}
	if len(all) <= n {
		return all
	}
	some := make([]uint64, 0, n)
	for i := range n {
		some = append(some, all[i*len(all)/n])
	}
	return some
}

// TestDWARFInlines: the calls elfsym says a C++ program's compiler inlined at each address,
// with the place of each call, are those the compiler's own toolchain's addr2line reads
// (binutils' reads Clang's DWARF 5 without them), for GCC's DWARF 5 and 4 and Clang's; and
// for the C library, from its distribution debug file.
func TestDWARFInlines(t *testing.T) {
	for _, tc := range []struct {
		name, cc, addr2line string
		args                []string
	}{
		{name: "gxx-dwarf5", cc: "c++", addr2line: "addr2line", args: []string{"-g", "-O2", "testdata/lines.cc"}},
		{name: "gxx-dwarf4", cc: "c++", addr2line: "addr2line", args: []string{"-gdwarf-4", "-O3", "testdata/lines.cc"}},
		{name: "clangxx-dwarf5", cc: "clang++-14", addr2line: "llvm-addr2line-14", args: []string{"-std=c++17", "-g", "-O2", "testdata/lines.cc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testenv.Requires(t, testenv.Tool(tc.cc), testenv.Tool(tc.addr2line))
			prog := filepath.Join(t.TempDir(), "prog")
			argv := append([]string{"-o", prog}, tc.args...)
			if b, err := exec.Command(tc.cc, argv...).CombinedOutput(); err != nil {
				t.Fatalf("%s %s: %v\n%s", tc.cc, strings.Join(argv, " "), err, b)
			}
			tab := readFile(t, prog)
			addrs := rowAddresses(t, prog, inCode(t, prog), 20000)
			inside := checkInlines(t, tab, tc.addr2line, prog, addrs)
			t.Logf("%d addresses, %d in inlined calls; %d spans, %d chains", len(addrs), inside, len(tab.inlines), len(tab.chains))
			if inside < len(addrs)/4 {
				t.Errorf("%d of %d addresses in inlined calls, want a quarter at least", inside, len(addrs))
			}
		})
	}
	t.Run("libc", func(t *testing.T) {
		testenv.Requires(t, testenv.Tool("addr2line"))
		tab, debug := readLibc(t)
		addrs := rowAddresses(t, debug, inCode(t, libc), 20000)
		inside := checkInlines(t, tab, "addr2line", debug, addrs)
		t.Logf("%d addresses, %d in inlined calls; %d spans, %d chains", len(addrs), inside, len(tab.inlines), len(tab.chains))
		if inside < 100 {
			t.Errorf("%d of %d addresses in inlined calls", inside, len(addrs))
		}
	})
}

// FuzzDWARFInlines walks arbitrary bytes as .debug_info and .debug_abbrev, the other
// sections those of testdata/inline.c built by GCC (DWARF 5 and 4) or Clang (DWARF 5, its
// indexed addresses and ranges), which picks: no crash, at most MaxSymbols spans, apart and
// ascending, and at each span as many places as calls and the function. Seeds: each build's
// own, whole and cut.
func FuzzDWARFInlines(f *testing.F) {
	testenv.Requires(f, testenv.Tool("cc"), testenv.Tool("clang-14"))
	dir := f.TempDir()
	var bases []dwarfSections
	for i, build := range [][]string{{"cc", "-gdwarf-5"}, {"cc", "-gdwarf-4"}, {"clang-14", "-gdwarf-5"}} {
		prog := filepath.Join(dir, fmt.Sprint("prog", i))
		if b, err := exec.Command(build[0], build[1], "-O2", "-o", prog, "testdata/inline.c").CombinedOutput(); err != nil {
			f.Fatalf("%s: %v\n%s", build, err, b)
		}
		ef := must(elf.Open(prog))
		sec := func(name string) []byte {
			if s := ef.Section(name); s != nil {
				return must(s.Data())
			}
			return nil
		}
		bases = append(bases, dwarfSections{bo: binary.LittleEndian, line: sec(".debug_line"), lineStr: string(sec(".debug_line_str")),
			str: string(sec(".debug_str")), ranges: sec(".debug_ranges"), rnglists: sec(".debug_rnglists"),
			strOffsets: sec(".debug_str_offsets"), addr: sec(".debug_addr"), info: sec(".debug_info"), abbrev: sec(".debug_abbrev")})
		code := codeRangesOf(&elfFile{f: ef})
		ef.Close()
		b := newBuilder(Options{})
		if b.useDWARF(&bases[i], code); len(b.inlines) == 0 {
			f.Fatalf("%s: no inlined calls read", build)
		}
		f.Add(uint8(i), bases[i].info, bases[i].abbrev)
		f.Add(uint8(i), bases[i].info[:len(bases[i].info)*2/3], bases[i].abbrev)
	}
	f.Fuzz(func(t *testing.T, which uint8, info, abbrev []byte) {
		s := bases[int(which)%len(bases)]
		s.info, s.abbrev = info, abbrev
		b := newBuilder(Options{MaxSymbols: 4096, MaxStringBytes: 1 << 20})
		b.useDWARF(&s, codeRanges{{0, ^uint64(0)}})
		tab := b.table(nil, "")
		if len(tab.inlines) > 4096 {
			t.Fatalf("%d spans", len(tab.inlines))
		}
		var prev uint64
		for i, sp := range tab.inlines {
			if sp.size == 0 || i > 0 && uint64(sp.lo) < prev {
				t.Fatalf("span %d at %#x+%d after %#x", i, sp.lo, sp.size, prev)
			}
			prev = sp.hi()
			addr := tab.inlineBase + uint64(sp.lo)
			calls := tab.InlinedVaddr(addr)
			if places := tab.SourceVaddr(addr, nil); len(calls) == 0 || len(places) != len(calls)+1 {
				t.Fatalf("%#x: %d calls, %d places", addr, len(calls), len(places))
			}
		}
	})
}

// TestDWARFBudget: a file whose DWARF sections pass twice MaxStringBytes keeps its line
// tables without its inlined calls, or neither when its line tables and strings pass it,
// and says so; each section past MaxStringBytes is not read either.
func TestDWARFBudget(t *testing.T) {
	testenv.Requires(t, testenv.Tool("c++"))
	prog := filepath.Join(t.TempDir(), "prog")
	if b, err := exec.Command("c++", "-g", "-O2", "-o", prog, "testdata/lines.cc").CombinedOutput(); err != nil {
		t.Fatalf("c++: %v\n%s", err, b)
	}
	ef := must(elf.Open(prog))
	size := func(name string) int64 {
		if s := ef.Section(name); s != nil {
			return int64(s.Size)
		}
		return 0
	}
	lines := size(".debug_line") + 2*(size(".debug_line_str")+size(".debug_str"))
	all := size(".debug_line") + size(".debug_line_str") + size(".debug_str") + size(".debug_info") + size(".debug_abbrev") + size(".debug_rnglists")
	largest := max(size(".debug_info"), size(".debug_line"), size(".debug_str"))
	ef.Close()
	if all/2 <= max(lines/2, largest) {
		t.Fatalf("sections of %d bytes, %d of line tables and strings, the largest %d: no budget keeps the lines alone", all, lines, largest)
	}
	f, n := openSized(t, prog)
	for _, tc := range []struct {
		name           string
		max            int64
		lines, inlines bool
	}{
		{"all", all, true, true},
		{"lines", max((lines+1)/2, largest), true, false},
		{"none", lines/2 - 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := Read(f, n, Options{MaxStringBytes: tc.max})
			if tab == nil {
				t.Fatal(err)
			}
			if got := tab.dwarfLines != nil; got != tc.lines {
				t.Errorf("line tables read: %v, want %v (%v)", got, tc.lines, err)
			}
			if got := len(tab.inlines) > 0; got != tc.inlines {
				t.Errorf("inlined calls read: %v, want %v (%v)", got, tc.inlines, err)
			}
			if !tc.inlines && !errors.Is(err, errSectionNotRead) {
				t.Errorf("error %v, want one that says what was not read", err)
			}
		})
	}
	// Rows and inlined calls past their caps (MaxSymbols calls, four times as many rows):
	// no more kept, and an error says so.
	tab, err := Read(f, n, Options{MaxSymbols: 16})
	if len(tab.inlines) > 16 || !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "inlined calls") || !strings.Contains(err.Error(), "line table rows") {
		t.Errorf("capped: %d spans, error %v", len(tab.inlines), err)
	}
}
