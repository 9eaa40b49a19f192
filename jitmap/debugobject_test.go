package jitmap_test

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"

	"github.com/profd/profd/internal/testenv"
)

// testdata/matmul-mcjit-debug.o is a real GDB JIT debug object: what lli-14 -jit-kind=mcjit
// registered (read from __jit_debug_descriptor's list with process_vm_readv) while running
// workloads/matmul.c compiled by clang-14 -O2 -g -fdebug-info-for-profiling -S -emit-llvm.
// Its loaded sections carry their load addresses; its debug sections are unrelocated.
const mcjitDebugObject = "testdata/matmul-mcjit-debug.o"

// dwarfdumpRows parses llvm-dwarfdump-14 --debug-line: the rows (address, line,
// discriminator) as LLVM itself reads the object, end_sequence rows left out.
func dwarfdumpRows(t *testing.T, path string) []codeobj.LineEntry {
	t.Helper()
	out, err := exec.Command("llvm-dwarfdump-14", "--debug-line", path).Output()
	if err != nil {
		t.Fatalf("llvm-dwarfdump-14: %v", err)
	}
	var rows []codeobj.LineEntry
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasPrefix(f[0], "0x") || strings.Contains(sc.Text(), "end_sequence") {
			continue
		}
		addr, err1 := strconv.ParseUint(f[0][2:], 16, 64)
		line, err2 := strconv.ParseUint(f[1], 10, 32)
		disc, err3 := strconv.ParseUint(f[5], 10, 32)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		rows = append(rows, codeobj.LineEntry{Addr: addr, Line: uint32(line), Discriminator: uint32(disc)})
	}
	return rows
}

func sameRows(t *testing.T, got, want []codeobj.LineEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows, llvm-dwarfdump-14 reads %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Addr != w.Addr || g.Line != w.Line || g.Discriminator != w.Discriminator {
			t.Fatalf("row %d: %#x line %d disc %d; llvm-dwarfdump-14: %#x line %d disc %d",
				i, g.Addr, g.Line, g.Discriminator, w.Addr, w.Line, w.Discriminator)
		}
	}
}

// TestDebugObjectMCJIT decodes lli-14's debug object and checks every row against LLVM's
// own reading of it (llvm-dwarfdump-14 applies the relocations against the patched section
// addresses too), that the rows lie in the loaded .text, and that discriminators are there.
func TestDebugObjectMCJIT(t *testing.T) {
	testenv.Requires(t, testenv.Tool("llvm-dwarfdump-14"))
	obj, err := os.ReadFile(mcjitDebugObject)
	if err != nil {
		t.Fatal(err)
	}
	info, err := jitmap.DebugObject(obj, 0)
	if err != nil {
		t.Fatal(err)
	}
	rows := info.Lines
	sameRows(t, rows, dwarfdumpRows(t, mcjitDebugObject))
	f, err := elf.NewFile(bytes.NewReader(obj))
	if err != nil {
		t.Fatal(err)
	}
	text := f.Section(".text")
	discs := 0
	for _, r := range rows {
		if r.Addr < text.Addr || r.Addr >= text.Addr+text.Size {
			t.Errorf("row %#x line %d outside .text %#x+%d", r.Addr, r.Line, text.Addr, text.Size)
		}
		if r.Discriminator != 0 {
			discs++
		}
	}
	if text.Addr == 0 || discs == 0 {
		t.Fatalf(".text at %#x, %d rows with a discriminator: want a loaded object with discriminators", text.Addr, discs)
	}

	// The subprograms: each with code, at its low_pc, declared where LLVM reads it.
	want := dwarfdumpSubprograms(t, mcjitDebugObject)
	if len(want) == 0 || len(info.Subprograms) != len(want) {
		t.Fatalf("subprograms %+v, llvm-dwarfdump-14 reads %+v", info.Subprograms, want)
	}
	for i, w := range want {
		if info.Subprograms[i] != w {
			t.Errorf("subprogram %d: %+v, llvm-dwarfdump-14 %+v", i, info.Subprograms[i], w)
		}
		if got := jitmap.FirstLineAt(info.Subprograms, w.LowPC); got != w.Line {
			t.Errorf("FirstLineAt(%#x) = %d, want %d", w.LowPC, got, w.Line)
		}
	}
	if got := jitmap.FirstLineAt(info.Subprograms, want[0].LowPC+1); got != 0 {
		t.Errorf("FirstLineAt inside a function = %d, want 0", got)
	}
}

// dwarfdumpSubprograms parses llvm-dwarfdump-14 --debug-info: the subprograms with a
// low_pc and a decl_line, in address order.
func dwarfdumpSubprograms(t *testing.T, path string) []jitmap.SubprogramRow {
	t.Helper()
	out, err := exec.Command("llvm-dwarfdump-14", "--debug-info", path).Output()
	if err != nil {
		t.Fatalf("llvm-dwarfdump-14: %v", err)
	}
	var subs []jitmap.SubprogramRow
	var cur *jitmap.SubprogramRow
	var hasLow bool
	flush := func() {
		if cur != nil && hasLow && cur.Line > 0 {
			subs = append(subs, *cur)
		}
		cur, hasLow = nil, false
	}
	value := func(line string) string {
		l, r := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
		if l < 0 || r < l {
			return ""
		}
		return line[l+1 : r]
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "DW_TAG_"):
			flush()
			if strings.Contains(line, "DW_TAG_subprogram") {
				cur = &jitmap.SubprogramRow{}
			}
		case cur == nil:
		case strings.Contains(line, "DW_AT_low_pc"):
			v, err := strconv.ParseUint(strings.TrimPrefix(value(line), "0x"), 16, 64)
			cur.LowPC, hasLow = v, err == nil
		case strings.Contains(line, "DW_AT_decl_line"):
			v, _ := strconv.ParseUint(value(line), 10, 32)
			cur.Line = uint32(v)
		}
	}
	flush()
	sort.Slice(subs, func(i, j int) bool { return subs[i].LowPC < subs[j].LowPC })
	return subs
}

// TestDebugObjectLLC checks a fresh object of llc-14 (sections at address 0, so rows
// are .text offsets) against llvm-dwarfdump-14, DWARF 4 and 5.
func TestDebugObjectLLC(t *testing.T) {
	testenv.Requires(t, testenv.Tool("clang-14"), testenv.Tool("llc-14"), testenv.Tool("llvm-dwarfdump-14"))
	dir := t.TempDir()
	src := dir + "/prog.c"
	if err := os.WriteFile(src, []byte(lliSource), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"-gdwarf-4", "-gdwarf-5"} {
		ll, obj := dir+"/prog"+v+".ll", dir+"/prog"+v+".o"
		run(t, exec.Command("clang-14", "-O2", v, "-fdebug-info-for-profiling", "-S", "-emit-llvm", src, "-o", ll))
		run(t, exec.Command("llc-14", "-O2", "-filetype=obj", ll, "-o", obj))
		b, err := os.ReadFile(obj)
		if err != nil {
			t.Fatal(err)
		}
		info, err := jitmap.DebugObject(b, 0)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		rows := info.Lines
		sameRows(t, rows, dwarfdumpRows(t, obj))
		if _, err := jitmap.DebugObject(b, len(rows)-1); !errors.Is(err, jitmap.ErrBadDebugObject) {
			t.Fatalf("%s: maxRows %d of %d: error %v, want jitmap.ErrBadDebugObject", v, len(rows)-1, len(rows), err)
		}
	}
}

func TestDebugObjectRejects(t *testing.T) {
	obj, err := os.ReadFile(mcjitDebugObject)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":     nil,
		"not elf":   []byte("JiTD this is not an object"),
		"truncated": obj[:len(obj)/2],
		"header":    obj[:64],
	}
	for name, b := range cases {
		if info, err := jitmap.DebugObject(b, 0); !errors.Is(err, jitmap.ErrBadDebugObject) {
			t.Errorf("%s: %d rows, error %v; want jitmap.ErrBadDebugObject", name, len(info.Lines), err)
		}
	}
}

func TestMergeDiscriminators(t *testing.T) {
	o := &codeobj.Object{Addr: 0x1000, Size: 0x40, Lines: []codeobj.LineEntry{
		{Addr: 0x1000, Line: 5},
		{Addr: 0x1010, Line: 6},
		{Addr: 0x1020, Line: 6},
		{Addr: 0x1030, Line: 7, Discriminator: 9}, // already set: kept
	}}
	rows := []codeobj.LineEntry{
		{Addr: 0x1000, Line: 5},
		{Addr: 0x1010, Line: 4, Discriminator: 3}, // another line at this address: not taken
		{Addr: 0x1010, Line: 6, Discriminator: 2},
		{Addr: 0x1020, Line: 8, Discriminator: 5}, // line differs: not taken
		{Addr: 0x1030, Line: 7, Discriminator: 4},
	}
	if !jitmap.Covers(o, rows) || jitmap.Covers(&codeobj.Object{Addr: 0x2000, Size: 8}, rows) {
		t.Fatal("jitmap.Covers is wrong")
	}
	if n := jitmap.MergeDiscriminators(o, rows); n != 1 {
		t.Fatalf("merged %d, want 1", n)
	}
	want := []uint32{0, 2, 0, 9}
	for i, l := range o.Lines {
		if l.Discriminator != want[i] {
			t.Errorf("line %d (%#x): discriminator %d, want %d", i, l.Addr, l.Discriminator, want[i])
		}
	}
}

// FuzzDebugObject: whatever the bytes, no panic, a bounded row count, rows and subprograms
// sorted, and errors wrap jitmap.ErrBadDebugObject.
func FuzzDebugObject(f *testing.F) {
	obj, err := os.ReadFile(mcjitDebugObject)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(obj)
	f.Add(obj[:len(obj)*3/4])
	f.Add(obj[:128])
	f.Fuzz(func(t *testing.T, b []byte) {
		const maxRows = 1000
		info, err := jitmap.DebugObject(b, maxRows)
		rows := info.Lines
		if err != nil {
			if !errors.Is(err, jitmap.ErrBadDebugObject) {
				t.Fatalf("error %v does not wrap jitmap.ErrBadDebugObject", err)
			}
			return
		}
		if len(rows) > maxRows {
			t.Fatalf("%d rows, maxRows %d", len(rows), maxRows)
		}
		for i := 1; i < len(rows); i++ {
			if rows[i].Addr < rows[i-1].Addr {
				t.Fatalf("rows not sorted at %d", i)
			}
		}
		subs := info.Subprograms
		for i := 1; i < len(subs); i++ {
			if subs[i].LowPC < subs[i-1].LowPC {
				t.Fatalf("subprograms not sorted at %d", i)
			}
		}
	})
}
