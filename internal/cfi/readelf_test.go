package cfi

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readelfRow is one row of `readelf --debug-dump=frames-interp`.
type readelfRow struct {
	pc           uint64
	cfa, bp, ra  string
	begin, end   uint64 // the FDE's range
	line, header string
}

var (
	fdeLine = regexp.MustCompile(`^[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ FDE cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+)`)
	cieLine = regexp.MustCompile(`^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ CIE`)
)

// readelfRows runs readelf on path and returns every row of every FDE's table (an FDE
// printed without a table has its CIE's).
func readelfRows(t *testing.T, path string) []readelfRow {
	t.Helper()
	// readelf exits 1 on some libraries whose tables it prints whole (a debug link it
	// cannot follow, silently): the tables are what the test reads.
	out, err := exec.Command("readelf", "--debug-dump=frames-interp", path).Output()
	if err != nil && len(out) == 0 {
		t.Fatalf("readelf %s: %v", path, err)
	}
	var rows []readelfRow
	cies := map[string][]readelfRow{}
	var header []string
	var cur *readelfRow // the FDE (or CIE) whose rows follow
	var curCIE string
	var pending []readelfRow
	flush := func() {
		if cur == nil {
			return
		}
		if curCIE != "" {
			cies[curCIE] = pending
		} else {
			if len(pending) == 0 {
				for _, r := range cies[cur.header] {
					r.pc, r.begin, r.end, r.line = cur.begin, cur.begin, cur.end, cur.line
					pending = append(pending, r)
					break
				}
			}
			rows = append(rows, pending...)
		}
		cur, curCIE, pending = nil, "", nil
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := cieLine.FindStringSubmatch(line); m != nil {
			flush()
			cur, curCIE = &readelfRow{line: line}, m[1]
			continue
		}
		if m := fdeLine.FindStringSubmatch(line); m != nil {
			flush()
			b, _ := strconv.ParseUint(m[2], 16, 64)
			e, _ := strconv.ParseUint(m[3], 16, 64)
			cur = &readelfRow{begin: b, end: e, line: line, header: m[1]}
			continue
		}
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "LOC" {
			header = f
			continue
		}
		if cur == nil || len(f) != len(header) || len(f) < 2 {
			continue
		}
		pc, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil || curCIE == "" && (pc < cur.begin || pc >= cur.end) {
			continue // a row readelf prints at an FDE's end describes no instruction
		}
		r := readelfRow{pc: pc, cfa: f[1], bp: "u", begin: cur.begin, end: cur.end, line: cur.line}
		for i, name := range header {
			switch name {
			case "rbp":
				r.bp = f[i]
			case "ra":
				r.ra = f[i]
			}
		}
		pending = append(pending, r)
	}
	flush()
	return rows
}

// wantRow is what Find should give for a readelf row.
func wantRow(t *testing.T, r readelfRow) Row {
	off := func(s, prefix string) (int32, bool) {
		if !strings.HasPrefix(s, prefix) {
			return 0, false
		}
		n, err := strconv.ParseInt(s[len(prefix):], 10, 32)
		return int32(n), err == nil
	}
	w := Row{CFA: RegUnknown}
	if n, ok := off(r.cfa, "rsp+"); ok {
		w.CFA, w.CFAOffset = RegSP, n
	} else if n, ok := off(r.cfa, "rbp+"); ok {
		w.CFA, w.CFAOffset = RegBP, n
	}
	switch n, ok := off(r.ra, "c"); {
	case ok && n != 0:
		w.RAOffset = n
	case r.ra == "u":
	default:
		w.CFA = RegUnknown
	}
	switch n, ok := off(r.bp, "c"); {
	case ok:
		w.BP, w.BPOffset = BPSaved, n
	case r.bp == "u":
		w.BP = BPSame // or BPUnknown: readelf prints both as u
	default:
		w.BP = BPUnknown
	}
	if w.CFA == RegUnknown {
		w = Row{CFA: RegUnknown}
	}
	return w
}

// libcPath is this machine's C library, which every test here reads.
const libcPath = "/lib/x86_64-linux-gnu/libc.so.6"

// readLibc opens the C library (closed when the test ends) and reads its table.
func readLibc(tb testing.TB) (*elf.File, *Table) {
	tb.Helper()
	f, err := elf.Open(libcPath)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	tab, err := ReadELF(f)
	if err != nil {
		tb.Fatal(err)
	}
	return f, tab
}

// oracleFiles are real ELF files of this machine, built by different compilers and
// options, and a program built here without frame pointers.
func oracleFiles(t *testing.T) []string {
	var files []string
	for _, pattern := range []string{
		libcPath,
		"/lib/x86_64-linux-gnu/libstdc++.so.6",
		"/lib/x86_64-linux-gnu/libm.so.6",
		"/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1",
		"/usr/bin/perl",
		"/root/.pyenv/versions/3.1*/lib/libpython3.*.so.1.0",
	} {
		m, _ := filepath.Glob(pattern)
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no system library to read (libc.so.6 is on every Debian machine)")
	}
	if cc, err := exec.LookPath("gcc"); err == nil {
		dir := t.TempDir()
		src := filepath.Join(dir, "p.c")
		os.WriteFile(src, []byte(`
#include <alloca.h>
#include <string.h>
__attribute__((noinline)) long deep(long n) { char *b = alloca(n); memset(b, 1, n); return b[n/2] + n; }
int main(int argc, char **argv) { return (int)deep(argc * 100); }
`), 0o644)
		for i, flags := range [][]string{{"-O2", "-fomit-frame-pointer"}, {"-O0", "-fno-omit-frame-pointer"}, {"-Os", "-fasynchronous-unwind-tables"}} {
			bin := filepath.Join(dir, "p"+strconv.Itoa(i))
			args := append(append([]string{}, flags...), "-o", bin, src)
			if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
				t.Fatalf("gcc %v: %v\n%s", flags, err, out)
			}
			files = append(files, bin)
		}
	}
	return files
}

// TestReadAgainstReadelf checks every row readelf interprets from the frame information
// of real files against Find.
func TestReadAgainstReadelf(t *testing.T) {
	if _, err := exec.LookPath("readelf"); err != nil {
		t.Fatal("readelf (binutils) is needed: it is the reference this test holds the parser to")
	}
	for _, path := range oracleFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tab, err := ReadELF(f)
			if err != nil {
				t.Fatalf("ReadELF: %v", err)
			}
			rows := readelfRows(t, path)
			if len(rows) == 0 {
				t.Fatalf("readelf printed no rows for %s", path)
			}
			bad, unknown, plt := 0, 0, 0
			for _, r := range rows {
				want := wantRow(t, r)
				got, ok := tab.Find(r.pc)
				if !ok {
					bad++
					if bad <= 5 {
						t.Errorf("%#x (%s): no rule, want %+v", r.pc, r.line, want)
					}
					continue
				}
				got.PC = 0
				if want.CFA == RegUnknown {
					unknown++
				}
				if got.CFA == RegPLT && r.cfa == "exp" && r.ra == "c-8" {
					plt++
					continue // readelf shows the expression as exp: TestPLT checks it
				}
				if got != want && !(r.bp == "u" && got.BP == BPUnknown && sameButBP(got, want)) {
					bad++
					if bad <= 5 {
						t.Errorf("%#x (%s): got %+v, want %+v (readelf: cfa %s rbp %s ra %s)", r.pc, r.line, got, want, r.cfa, r.bp, r.ra)
					}
				}
				if end := r.end; end > r.begin {
					if _, ok := tab.Find(end - 1); !ok {
						t.Errorf("%#x, the last address of %s: no rule", end-1, r.line)
					}
				}
			}
			if bad > 0 {
				t.Fatalf("%d of %d rows differ from readelf's", bad, len(rows))
			}
			t.Logf("%d rows as readelf reads them (%d expressions, %d of them a PLT's), %d in the table", len(rows), unknown, plt, tab.Len())
		})
	}
}

func sameButBP(a, b Row) bool {
	a.BP, a.BPOffset = b.BP, b.BPOffset
	return a == b
}

// TestGaps: an address between two frame descriptions, or past the last, has no rule; the
// table spans the descriptions, from the first one's start to the last one's end.
func TestGaps(t *testing.T) {
	_, tab := readLibc(t)
	rows := readelfRows(t, libcPath)
	covered := map[uint64]bool{}
	var ends []uint64
	for _, r := range rows {
		covered[r.begin] = true
		ends = append(ends, r.end)
	}
	gaps := 0
	for _, e := range ends {
		if covered[e] {
			continue
		}
		if row, ok := tab.Find(e); ok && !coveredBy(rows, e) {
			t.Fatalf("%#x, past a description's end, has a rule %+v", e, row)
		}
		gaps++
	}
	if gaps == 0 {
		t.Fatal("no gap between descriptions found to check")
	}
	if _, ok := tab.Find(0); ok {
		t.Error("address 0 has a rule")
	}
	lo, hi := tab.Span()
	first, end := rows[0].begin, rows[0].end
	for _, r := range rows {
		first, end = min(first, r.begin), max(end, r.end)
	}
	if lo != first || hi != end {
		t.Errorf("Span %#x-%#x, the descriptions %#x-%#x", lo, hi, first, end)
	}
}

// coveredBy reports whether some description of rows other than the one ending at pc
// covers pc (descriptions are not always sorted or disjoint); the check above is of gaps.
func coveredBy(rows []readelfRow, pc uint64) bool {
	for _, r := range rows {
		if r.begin <= pc && pc < r.end {
			return true
		}
	}
	return false
}

// TestPLT: libc's .plt is described by GNU ld's expression, read as RegPLT: the CFA is the
// stack pointer plus 8 in an entry's first 11 bytes (before its push), plus 16 after.
func TestPLT(t *testing.T) {
	f, tab := readLibc(t)
	plt := f.Section(".plt")
	if plt == nil {
		t.Fatal("libc has no .plt")
	}
	entry := plt.Addr + 16 // past PLT0
	row, ok := tab.Find(entry)
	if !ok || row.CFA != RegPLT || row.CFAOffset != 11 || row.RAOffset != -8 {
		t.Fatalf("the rule at .plt+16: %+v, %v; want RegPLT after byte 11, the return address at CFA-8", row, ok)
	}
	const sp = 0x7ffd0000
	for _, tc := range []struct{ off, cfa uint64 }{{0, sp + 8}, {6, sp + 8}, {11, sp + 16}, {15, sp + 16}} {
		if got := row.PLTCFA(entry+tc.off, sp); got != tc.cfa {
			t.Errorf("CFA at byte %d of an entry: %#x, want %#x", tc.off, got, tc.cfa)
		}
	}
}

// TestReadReturnSlots: libc's table by ReadReturnSlots finds the return address where Read's
// does, in fewer rows; and a rule finds it where the CFA is the stack pointer plus 8 to
// 8·ReturnSlots (slots 0 to ReturnSlots-1), a PLT entry's before and after its push, and
// nowhere else.
func TestReadReturnSlots(t *testing.T) {
	ef, full := readLibc(t)
	s := ef.Section(".eh_frame")
	data, err := s.Data()
	if err != nil {
		t.Fatal(err)
	}
	checkReturnSlots(t, full, data, s.Addr)
	less, _ := ReadReturnSlots(data, s.Addr)
	var slots [ReturnSlots]int
	for _, r := range full.allRows() {
		if slot, ok := r.ReturnSlot(r.PC); ok {
			slots[slot]++
		}
	}
	t.Logf("libc: %d rows, %v of them with the return address in slots 0 to %d; ReadReturnSlots %d rows", full.Len(), slots, ReturnSlots-1, less.Len())
	if slots[0] == 0 || slots[1] == 0 || slots[2] == 0 || less.Len() >= full.Len() {
		t.Errorf("ReadReturnSlots kept %d of %d rows (slots %v)", less.Len(), full.Len(), slots)
	}

	sp := func(off int32) Row { return Row{CFA: RegSP, CFAOffset: off, RAOffset: -8} }
	for _, c := range []struct {
		row  Row
		pc   uint64
		slot int // -1: none
	}{
		{sp(8), 0, 0}, {sp(16), 0, 1}, {sp(24), 0, 2}, {sp(32), 0, 3}, {sp(40), 0, 4}, {sp(128), 0, 15}, {sp(136), 0, -1},
		{sp(12), 0, -1}, {Row{CFA: RegSP, CFAOffset: 8}, 0, -1}, // no return address
		{Row{CFA: RegBP, CFAOffset: 16, RAOffset: -8}, 0, -1},
		{Row{CFA: RegPLT, CFAOffset: 11, RAOffset: -8}, 0x1006, 0}, {Row{CFA: RegPLT, CFAOffset: 11, RAOffset: -8}, 0x100b, 1},
	} {
		slot, ok := c.row.ReturnSlot(c.pc)
		if !ok {
			slot = -1
		}
		if slot != c.slot {
			t.Errorf("%+v at %#x: slot %d, want %d", c.row, c.pc, slot, c.slot)
		}
	}
}
