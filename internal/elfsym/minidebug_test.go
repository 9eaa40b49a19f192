package elfsym

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"

	"github.com/profd/profd/internal/testenv"
)

// miniDebugInfoBuild builds prog.c and strips it as Fedora's packages are: .dynsym kept,
// the other functions' symbols in .gnu_debugdata (a .symtab of them alone, compressed with
// xz), as GDB's manual describes MiniDebugInfo. It returns the program with that section,
// the program without it, the xz bytes it holds, and the functions .dynsym lacks (name to
// address).
func miniDebugInfoBuild(t *testing.T) (prog, bare string, packed []byte, static map[string]uint64) {
	t.Helper()
	testenv.Requires(t, testenv.Tool("nm"), testenv.Tool("xz"))
	dir := t.TempDir()
	prog = build(t, dir, "prog", "-Wl,--build-id=sha1", "testdata/prog.c")
	dynamic := map[string]bool{}
	f, err := elf.Open(prog)
	if err != nil {
		t.Fatal(err)
	}
	dyn, _ := f.DynamicSymbols()
	f.Close()
	for _, s := range dyn {
		dynamic[s.Name] = true
	}
	static = map[string]uint64{}
	var keep []string
	for _, s := range testenv.ELFSymbols(t, prog) {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 && s.Section != elf.SHN_UNDEF && !dynamic[s.Name] {
			static[s.Name] = s.Value
			keep = append(keep, s.Name)
		}
	}
	if static["hot"] == 0 {
		t.Fatalf("prog.c's static hot is not among the functions .dynsym lacks: %v", keep)
	}
	keepFile, debug, mini := filepath.Join(dir, "keep"), filepath.Join(dir, "debug"), filepath.Join(dir, "mini")
	if err := os.WriteFile(keepFile, []byte(strings.Join(keep, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "objcopy", "--only-keep-debug", prog, debug)
	run(t, "objcopy", "-S", "--remove-section", ".gdb_index", "--remove-section", ".comment",
		"--keep-symbols="+keepFile, debug, mini)
	run(t, "strip", "--strip-all", "-R", ".comment", prog)
	run(t, "xz", mini)
	bare = prog + ".bare"
	run(t, "cp", prog, bare)
	run(t, "objcopy", "--add-section", ".gnu_debugdata="+mini+".xz", prog)
	packed, err = os.ReadFile(mini + ".xz")
	if err != nil {
		t.Fatal(err)
	}
	return prog, bare, packed, static
}

// TestMiniDebugInfo: a program stripped to .dynsym and .gnu_debugdata has its static
// functions named at their addresses, as its build with symbols names them; without the
// section, they are not.
func TestMiniDebugInfo(t *testing.T) {
	prog, bare, _, static := miniDebugInfoBuild(t)
	tab := readFile(t, prog)
	if !slices.Contains(tab.From, ".gnu_debugdata:.symtab") {
		t.Errorf("symbols from %q, want .gnu_debugdata's .symtab among them", tab.From)
	}
	without := readFile(t, bare)
	for name, addr := range static {
		if got, ok := tab.LookupVaddr(addr); !ok || got != name {
			t.Errorf("%s at %#x: named %q (%v)", name, addr, got, ok)
		}
		if got, ok := without.LookupVaddr(addr); ok && got == name {
			t.Errorf("%s at %#x named without .gnu_debugdata: the test shows nothing", name, addr)
		}
	}
	// The program's own functions (those .dynsym has) keep their names.
	if tab.Len() <= len(static) {
		t.Errorf("a table of %d symbols for %d static functions and .dynsym's", tab.Len(), len(static))
	}
}

// TestMiniDebugInfoRefused: an xz stream whose block asks for a dictionary of 4 GiB is
// refused before it is decoded (the decoder would allocate it), and so is one that would
// decode past the limit; the program's .dynsym names stay.
func TestMiniDebugInfoRefused(t *testing.T) {
	prog, _, packed, _ := miniDebugInfoBuild(t)
	// The block header after the stream header: its size, flags (none set: one filter, no
	// sizes), LZMA2's id, its properties' size (1) and the dictionary's code, ..., CRC32.
	h := packed[xzHeaderBytes:]
	n := (int(h[0]) + 1) * 4
	if h[1] != 0 || h[2] != xzFilterLZMA2 || h[3] != 1 {
		t.Fatalf("xz wrote a block header % x, not the layout this test patches", h[:n])
	}
	huge := slices.Clone(packed)
	h = huge[xzHeaderBytes:]
	h[4] = 40
	binary.LittleEndian.PutUint32(h[n-4:], crc32.ChecksumIEEE(h[:n-4]))
	if _, err := unxz(huge, 64<<20); err == nil || !strings.Contains(err.Error(), "dictionary") {
		t.Errorf("a 4 GiB dictionary: %v, want it refused", err)
	}
	want, err := unxz(packed, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unxz(packed, int64(len(want)-1)); err == nil {
		t.Errorf("%d bytes decoded under a limit of %d", len(want), len(want)-1)
	}
	// In the program: the section refused, its .dynsym read.
	data, err := os.ReadFile(prog)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(data, packed)
	if at < 0 {
		t.Fatal("the section's bytes are not in the program")
	}
	copy(data[at:], huge)
	tab, err := Read(bytes.NewReader(data), int64(len(data)), Options{})
	if err == nil || !strings.Contains(err.Error(), "dictionary") {
		t.Errorf("read with the section refused: %v", err)
	}
	if tab == nil || !slices.Contains(tab.From, ".dynsym") || slices.Contains(tab.From, ".gnu_debugdata:.symtab") {
		t.Errorf("read with the section refused: symbols from %v, want .dynsym's alone", tab.From)
	}
}

// FuzzMiniDebugInfo decodes arbitrary bytes as .gnu_debugdata's xz stream: no crash, and
// nothing decoded past the limit. Seeds: streams the xz package wrote, whole and cut.
func FuzzMiniDebugInfo(f *testing.F) {
	for _, text := range []string{"", "x", strings.Repeat("profd ", 5000)} {
		var b bytes.Buffer
		w, err := xz.NewWriter(&b)
		if err != nil {
			f.Fatal(err)
		}
		w.Write([]byte(text))
		w.Close()
		f.Add(b.Bytes())
		f.Add(b.Bytes()[:b.Len()/2])
	}
	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := unxz(data, limit)
		if err == nil && len(out) > limit {
			t.Fatalf("%d bytes decoded, limit %d", len(out), limit)
		}
	})
}
