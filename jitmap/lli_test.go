package jitmap_test

import (
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"

	"github.com/profd/profd/internal/testenv"
)

// lliSource is compiled with clang-14 -g to IR that lli-14 runs; its lines are what the
// jitdump's line tables must name.
const lliSource = `int sq(int x) {
  int s = 0;
  for (int i = 0; i < x; i++)
    s += i * x;
  return s;
}

static int tri(int n) {
  int t = 0;
  while (n > 0)
    t += n--;
  return t;
}

int mix(int a, int b) {
  if (a > b)
    return sq(a) - tri(b);
  return tri(a) + sq(b);
}

int main(void) {
  int t = 0;
  for (int k = 0; k < 50; k++)
    t += mix(k, 50 - k);
  return t & 7;
}
`

// TestLLI14Jitdump runs real lli-14 with a jitdump and checks the decoded code objects against
// an independent compilation of the same IR by llc-14 with lli's code generation settings
// (x86-64 JIT: large code model, static relocation, -O2): same functions, sizes, code bytes
// (apart from relocated fields, which lli's jitdump holds unrelocated) and line tables (the
// object file's DWARF line rows, which lli's jitdump repeats with LLVM 14's +0x40 bias).
func TestLLI14Jitdump(t *testing.T) {
	testenv.Requires(t, testenv.Tool("lli-14"), testenv.Tool("clang-14"), testenv.Tool("llc-14"))
	dir := t.TempDir()
	src := filepath.Join(dir, "prog.c")
	ll := filepath.Join(dir, "prog.ll")
	obj := filepath.Join(dir, "prog.o")
	if err := os.WriteFile(src, []byte(lliSource), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, exec.Command("clang-14", "-g", "-O0", "-S", "-emit-llvm", src, "-o", ll))
	run(t, exec.Command("llc-14", "-O2", "-code-model=large", "-relocation-model=static", "-filetype=obj", ll, "-o", obj))

	cmd := exec.Command("lli-14", "-jit-kind=mcjit", ll)
	cmd.Env = append(os.Environ(), "JITDUMPDIR="+dir)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); err != nil && !ok || ok && ee.ExitCode() > 7 {
		t.Fatalf("lli-14: %v\n%s", err, out)
	}
	dumps, _ := filepath.Glob(filepath.Join(dir, ".debug", "jit", "*", "jit-*.dump"))
	if len(dumps) != 1 {
		t.Fatalf("jitdump files %v, want one", dumps)
	}
	stream, err := os.ReadFile(dumps[0])
	if err != nil {
		t.Fatal(err)
	}
	pid := uint32(cmd.ProcessState.Pid())
	if !strings.HasSuffix(dumps[0], fmt.Sprintf("jit-%d.dump", pid)) {
		t.Fatalf("jitdump %s is not lli's (pid %d)", dumps[0], pid)
	}

	d := jitmap.NewDecoder(pid, codeobj.SourceJitdumpFile, jitmap.DecoderOptions{})
	evs, errs := d.Write(stream)
	if len(errs) > 0 {
		t.Fatalf("decode errors: %v", errs)
	}
	if h, ok := d.JitdumpHeader(); !ok || h.Pid != pid || h.ElfMach != uint32(elf.EM_X86_64) || h.BigEndian {
		t.Errorf("header %+v", h)
	}
	// The same file fed in odd-sized pieces decodes the same.
	var cuts []int
	for c := 7; c < len(stream); c += 7 {
		cuts = append(cuts, c)
	}
	if split, errs := decodeChunks(t, pid, codeobj.SourceJitdumpFile, jitmap.DecoderOptions{}, stream, cuts...); len(errs) > 0 || !reflect.DeepEqual(evs, split) {
		t.Errorf("7-byte pieces decode differently (errors %v)\n%s\n%s", errs, dump(evs), dump(split))
	}

	loads := map[string]*codeobj.Object{}
	for _, ev := range evs {
		if l, ok := ev.(*jitmap.CodeLoad); ok {
			if l.Pid != pid {
				t.Errorf("load of %s for pid %d", l.Object.Name, l.Pid)
			}
			loads[l.Object.Name] = &l.Object
		}
	}

	ef, err := elf.Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	text := ef.Section(".text")
	textBytes, err := text.Data()
	if err != nil {
		t.Fatal(err)
	}
	masked := relocatedBytes(t, ef, text)
	rows := dwarfRows(t, ef)
	syms, err := ef.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	srcLines := strings.Split(lliSource, "\n")
	checked := 0
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC {
			continue
		}
		checked++
		o := loads[s.Name]
		if o == nil {
			t.Errorf("function %s: no CODE_LOAD in the jitdump (loads: %v)", s.Name, keys(loads))
			continue
		}
		if o.Size != s.Size || uint64(len(o.Code)) != s.Size {
			t.Errorf("%s: jitdump size %d (%d code bytes), llc size %d", s.Name, o.Size, len(o.Code), s.Size)
			continue
		}
		if o.LoadNs <= 0 || o.Addr == 0 || o.CodeIndex == 0 {
			t.Errorf("%s: load time %d addr %#x index %d", s.Name, o.LoadNs, o.Addr, o.CodeIndex)
		}
		for i := uint64(0); i < s.Size; i++ {
			if masked[s.Value+i] {
				continue
			}
			if o.Code[i] != textBytes[s.Value+i] {
				t.Errorf("%s+%#x: jitdump byte %#02x, llc byte %#02x", s.Name, i, o.Code[i], textBytes[s.Value+i])
				break
			}
		}
		var want, got []string
		for _, r := range rows {
			if r.off >= s.Value && r.off < s.Value+s.Size {
				want = append(want, fmt.Sprintf("+%#x:%d", r.off-s.Value, r.line))
			}
		}
		for _, e := range o.Lines {
			got = append(got, fmt.Sprintf("+%#x:%d", e.Addr-o.Addr, e.Line))
			if e.File != filepath.Join(dir, "prog.c") {
				t.Errorf("%s: line entry file %q", s.Name, e.File)
			}
		}
		if len(want) == 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("%s line table:\n jitdump %v\n    llc %v", s.Name, got, want)
		}
		// The first entry is the line that declares the function.
		if len(o.Lines) > 0 {
			if l := o.Lines[0].Line; l == 0 || int(l) > len(srcLines) || !strings.Contains(srcLines[l-1], s.Name+"(") {
				t.Errorf("%s: first line %d is not its declaration", s.Name, l)
			}
		}
		// The jitmap.Map names every byte of the function from its load on, and none before it.
		m := jitmap.NewMap(jitmap.MapOptions{})
		for _, ev := range evs {
			if err := m.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
		if got, ok := m.Lookup(pid, o.Addr+o.Size-1, o.LoadNs); !ok || got.Name != s.Name {
			t.Errorf("%s: Lookup at its last byte = %v", s.Name, got)
		}
		if _, ok := m.Lookup(pid, o.Addr, o.LoadNs-1); ok {
			t.Errorf("%s: Lookup before its load found something", s.Name)
		}
	}
	if checked < 4 {
		t.Errorf("llc object has %d functions, want sq, tri, mix, main", checked)
	}
}

func run(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
}

func keys(m map[string]*codeobj.Object) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}

// relocatedBytes marks the bytes of sec that relocations patch.
func relocatedBytes(t *testing.T, ef *elf.File, sec *elf.Section) []bool {
	masked := make([]bool, sec.Size)
	for _, rs := range ef.Sections {
		if rs.Type != elf.SHT_RELA || ef.Sections[rs.Info] != sec {
			continue
		}
		data, err := rs.Data()
		if err != nil {
			t.Fatal(err)
		}
		for ; len(data) >= 24; data = data[24:] {
			off := ef.ByteOrder.Uint64(data)
			width := uint64(8)
			switch elf.R_X86_64(ef.ByteOrder.Uint64(data[8:]) & 0xffffffff) {
			case elf.R_X86_64_PC32, elf.R_X86_64_PLT32, elf.R_X86_64_GOTPCREL, elf.R_X86_64_32, elf.R_X86_64_32S, elf.R_X86_64_GOTPC32:
				width = 4
			}
			for i := off; i < off+width && i < sec.Size; i++ {
				masked[i] = true
			}
		}
	}
	return masked
}

type lineRow struct {
	off  uint64
	line int
}

// dwarfRows reads the object's line table rows (end-of-sequence rows left out).
func dwarfRows(t *testing.T, ef *elf.File) []lineRow {
	dw, err := ef.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	var rows []lineRow
	r := dw.Reader()
	for {
		cu, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if cu == nil {
			break
		}
		lr, err := dw.LineReader(cu)
		if err != nil || lr == nil {
			continue
		}
		var e = new(struct{ dwarf.LineEntry })
		for lr.Next(&e.LineEntry) == nil {
			if !e.EndSequence {
				rows = append(rows, lineRow{e.Address, e.Line})
			}
		}
		r.SkipChildren()
	}
	if len(rows) == 0 {
		t.Fatal("no DWARF line rows in the llc object")
	}
	return rows
}
