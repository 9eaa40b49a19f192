package elfsym

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/testenv"
)

// build compiles testdata sources with cc (c++ for .cc) into dir/out.
func build(t testing.TB, dir, out string, args ...string) string {
	t.Helper()
	testenv.Requires(t, testenv.Tool("cc"), testenv.Tool("objcopy"), testenv.Tool("strip"))
	path := filepath.Join(dir, out)
	argv := append([]string{"-O1", "-o", path}, args...)
	if b, err := exec.Command("cc", argv...).CombinedOutput(); err != nil {
		t.Fatalf("cc %s: %v\n%s", strings.Join(argv, " "), err, b)
	}
	return path
}

func run(t testing.TB, argv ...string) {
	t.Helper()
	if b, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, b)
	}
}

// started is a test program running, with the function addresses it printed.
type started struct {
	pid   uint32
	addrs map[string]uint64
}

// start runs prog until the test ends and reads the addresses it prints.
func start(t *testing.T, prog string) started {
	t.Helper()
	p := testenv.StartPiped(t, prog)
	s := started{pid: uint32(p.Cmd.Process.Pid), addrs: map[string]uint64{}}
	sc := bufio.NewScanner(p.Out)
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), " ")
		if name == "sum" {
			break
		}
		v, err := strconv.ParseUint(strings.TrimPrefix(value, "0x"), 16, 64)
		if err != nil {
			t.Fatalf("%s printed %q", prog, sc.Text())
		}
		s.addrs[name] = v
	}
	return s
}

// nameInProcess names a live process's address as profd does: the mapping holding it, the
// file offset, the file's table read through root.
func nameInProcess(t *testing.T, c *Cache, pid uint32, addr uint64) (string, *Table) {
	t.Helper()
	maps, err := procfs.ReadMaps(pid)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := procfs.Find(maps, addr)
	if !ok || m.Path == "" {
		t.Fatalf("%#x is in no file mapping of pid %d", addr, pid)
	}
	root := procfs.Root(pid)
	f, err := os.Open(root + m.Path)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := c.Open(f, root, m.Path).Wait(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", m.Path, err)
	}
	name, _ := tab.Lookup(addr - m.Start + m.Offset)
	return name, tab
}

func newTestCache(t testing.TB, logs io.Writer) *Cache {
	if logs == nil {
		logs = io.Discard
	}
	c := NewCache(Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	t.Cleanup(c.Close)
	return c
}

// TestLiveProcesses names the functions of running programs, PIE and not, and of a shared
// library they load, from the addresses the programs print of themselves.
func TestLiveProcesses(t *testing.T) {
	dir := t.TempDir()
	lib := build(t, dir, "libhot.so", "-shared", "-fPIC", "testdata/lib.c")
	for _, kind := range []string{"pie", "no-pie"} {
		t.Run(kind, func(t *testing.T) {
			flags := []string{"-fPIE", "-pie"}
			if kind == "no-pie" {
				flags = []string{"-fno-PIE", "-no-pie"}
			}
			prog := build(t, dir, "prog-"+kind, append(flags, "-DWITH_LIB", "testdata/prog.c", lib, "-Wl,-rpath,"+dir)...)
			p := start(t, prog)
			c := newTestCache(t, nil)
			for fn, addr := range p.addrs {
				want := fn
				got, _ := nameInProcess(t, c, p.pid, addr)
				if got != want {
					t.Errorf("%s at %#x named %q", fn, addr, got)
				}
				// Inside the function, not only at its entry.
				if got, _ := nameInProcess(t, c, p.pid, addr+4); got != want {
					t.Errorf("%s+4 named %q", fn, got)
				}
			}
			if len(p.addrs) != 3 {
				t.Errorf("program printed %v", p.addrs)
			}
		})
	}
}

// TestMatchesSymtab looks up every function symbol debug/elf lists in a real binary of
// the machine at its own address.
func TestMatchesSymtab(t *testing.T) {
	dir := t.TempDir()
	prog := build(t, dir, "prog", "testdata/prog.c")
	syms := testenv.ELFSymbols(t, prog)
	tab := readFile(t, prog)
	n := 0
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 || s.Section == elf.SHN_UNDEF {
			continue
		}
		n++
		if got, ok := tab.LookupVaddr(s.Value); !ok || got != s.Name {
			t.Errorf("%s at %#x: %q %v", s.Name, s.Value, got, ok)
		}
	}
	if n < 3 || tab.Len() < n {
		t.Errorf("%d function symbols, table of %d", n, tab.Len())
	}
	if tab.BuildID == "" {
		t.Error("no build-id read")
	}
}

// stripped builds prog.c with a build-id (or none), splits its symbols into a debug file
// and strips it; it returns the stripped program and the debug file.
func stripped(t *testing.T, dir, name string, buildID string, extra ...string) (prog, debug string) {
	t.Helper()
	prog = build(t, dir, name, append([]string{"-g", "-Wl,--build-id=" + buildID, "testdata/prog.c"}, extra...)...)
	debug = prog + ".debug"
	run(t, "objcopy", "--only-keep-debug", prog, debug)
	run(t, "strip", "--strip-all", prog)
	return prog, debug
}

// install copies src to root/dst, making its directories.
func install(t *testing.T, src, root, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(root+dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root+dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// lookupIn reads root/p through a fresh cache and names p's function fn (by its address in
// the unstripped build, taken from the debug file).
func lookupIn(t *testing.T, root, p, debug, fn string, logs io.Writer) (string, *Table) {
	t.Helper()
	return lookupAs(t, newTestCache(t, logs), root, p, debug, fn)
}

// lookupAs is lookupIn through c; the file's table must be read within 10 s.
func lookupAs(t *testing.T, c *Cache, root, p, debug, fn string) (string, *Table) {
	t.Helper()
	var addr uint64
	for _, s := range testenv.ELFSymbols(t, debug) {
		if s.Name == fn {
			addr = s.Value
		}
	}
	if addr == 0 {
		t.Fatalf("%s not in %s", fn, debug)
	}
	f, err := os.Open(root + p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tab, err := c.Open(f, root, p).Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	name, _ := tab.LookupVaddr(addr)
	return name, tab
}

// TestDebugFiles names a stripped program's static function from its separate debug file,
// found by build-id and by .gnu_debuglink in each place, under a root directory as a
// container's files are; and refuses a debug file whose build-id is another build's.
func TestDebugFiles(t *testing.T) {
	dir := t.TempDir()
	t.Run("build-id", func(t *testing.T) {
		prog, debug := stripped(t, dir, "bid", "sha1")
		root := t.TempDir()
		install(t, prog, root, "/usr/bin/bid")
		tab0, _ := Read(bytes.NewReader(must(os.ReadFile(prog))), int64(len(must(os.ReadFile(prog)))), Options{})
		if name, ok := tab0.LookupVaddr(0); ok || tab0.BuildID == "" {
			t.Fatalf("stripped program: %q, build-id %q", name, tab0.BuildID)
		}
		id := tab0.BuildID
		install(t, debug, root, "/usr/lib/debug/.build-id/"+id[:2]+"/"+id[2:]+".debug")
		if name, tab := lookupIn(t, root, "/usr/bin/bid", debug, "hot", nil); name != "hot" {
			t.Errorf("hot named %q from %v", name, tab.From)
		}
	})
	for _, place := range []string{"/usr/bin/", "/usr/bin/.debug/", "/usr/lib/debug/usr/bin/"} {
		t.Run("debuglink "+place, func(t *testing.T) {
			prog, debug := stripped(t, dir, "dl"+strconv.Itoa(len(place)), "none")
			run(t, "objcopy", "--add-gnu-debuglink="+debug, prog)
			root := t.TempDir()
			install(t, prog, root, "/usr/bin/dl")
			install(t, debug, root, place+filepath.Base(debug))
			if name, tab := lookupIn(t, root, "/usr/bin/dl", debug, "hot", nil); name != "hot" {
				t.Errorf("hot named %q from %v", name, tab.From)
			}
		})
	}
	t.Run("debuglink with a wrong CRC", func(t *testing.T) {
		prog, debug := stripped(t, dir, "crc", "none")
		run(t, "objcopy", "--add-gnu-debuglink="+debug, prog)
		root := t.TempDir()
		install(t, prog, root, "/usr/bin/crc")
		b := must(os.ReadFile(debug))
		b = append(b, 0) // another file by its CRC
		os.MkdirAll(root+"/usr/bin", 0o755)
		os.WriteFile(root+"/usr/bin/"+filepath.Base(debug), b, 0o644)
		if name, _ := lookupIn(t, root, "/usr/bin/crc", debug, "hot", nil); name == "hot" {
			t.Error("a debug file with another CRC named hot")
		}
	})
	t.Run("absolute link out of the root", func(t *testing.T) {
		// A container's absolute link is resolved in the container: it does not reach the
		// host's file of that path.
		prog, debug := stripped(t, dir, "esc", "sha1")
		root := t.TempDir()
		install(t, prog, root, "/usr/bin/esc")
		tab0, _ := Read(bytes.NewReader(must(os.ReadFile(prog))), int64(len(must(os.ReadFile(prog)))), Options{})
		id := tab0.BuildID
		link := root + "/usr/lib/debug/.build-id/" + id[:2] + "/" + id[2:] + ".debug"
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		abs, _ := filepath.Abs(debug)
		if err := os.Symlink(abs, link); err != nil {
			t.Fatal(err)
		}
		if name, _ := lookupIn(t, root, "/usr/bin/esc", debug, "hot", nil); name == "hot" {
			t.Error("an absolute link in the root reached the host's debug file")
		}
		// The same link relative to the root's own copy is followed.
		install(t, debug, root, "/usr/lib/debug/files/esc.debug")
		os.Remove(link)
		if err := os.Symlink("../../files/esc.debug", link); err != nil {
			t.Fatal(err)
		}
		if name, _ := lookupIn(t, root, "/usr/bin/esc", debug, "hot", nil); name != "hot" {
			t.Errorf("a relative link inside the root: hot named %q", name)
		}
	})
	t.Run("build-id mismatch refused", func(t *testing.T) {
		prog, _ := stripped(t, dir, "mine", "sha1")
		_, otherDebug := stripped(t, dir, "theirs", "0x0123456789abcdef0123456789abcdef01234567")
		root := t.TempDir()
		install(t, prog, root, "/usr/bin/mine")
		tab0, _ := Read(bytes.NewReader(must(os.ReadFile(prog))), int64(len(must(os.ReadFile(prog)))), Options{})
		id := tab0.BuildID
		install(t, otherDebug, root, "/usr/lib/debug/.build-id/"+id[:2]+"/"+id[2:]+".debug")
		var logs bytes.Buffer
		name, tab := lookupIn(t, root, "/usr/bin/mine", otherDebug, "hot", &logs)
		if name == "hot" || !slices.Equal(tab.From, []string{".dynsym", ".rela.plt", ".plt.got"}) {
			t.Errorf("a debug file of another build was used: %q from %v", name, tab.From)
		}
		if !strings.Contains(logs.String(), "build-id is not the file's") {
			t.Errorf("no log line about the refused debug file:\n%s", logs.String())
		}
	})
}

// TestDebugFilesRefused: the debug file paths a process names (its file's debuglink, its
// directories) lead to no FIFO, which would hold the cache's one load forever, to no file its
// user may not read, and to no file too large to hash.
func TestDebugFilesRefused(t *testing.T) {
	dir := t.TempDir()
	prog, debug := stripped(t, dir, "dl", "none")
	run(t, "objcopy", "--add-gnu-debuglink="+debug, prog)
	name := filepath.Base(debug)
	t.Run("FIFO", func(t *testing.T) {
		root := t.TempDir()
		install(t, prog, root, "/usr/bin/dl")
		fifo := root + "/usr/bin/" + name
		if err := unix.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		c := newTestCache(t, &logs)
		t.Cleanup(func() { // lets a blocked open go on, before the cache's Close waits for it
			if fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				unix.Close(fd)
			}
		})
		if got, _ := lookupAs(t, c, root, "/usr/bin/dl", debug, "hot"); got == "hot" {
			t.Errorf("hot named from a FIFO")
		}
		if !strings.Contains(logs.String(), "debug file refused") {
			t.Errorf("no log line about the FIFO:\n%s", logs.String())
		}
	})
	t.Run("not every user's to read", func(t *testing.T) {
		testenv.Requires(t, testenv.Root) // a file another user may not read
		root := t.TempDir()
		install(t, prog, root, "/usr/bin/dl")
		// The process links its debuglink's name to a root-only file: root's copy of the
		// debug file.
		secret := filepath.Join(t.TempDir(), name)
		install(t, debug, "", secret)
		if err := os.Chmod(secret, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, root+"/usr/bin/"+name); err != nil {
			t.Fatal(err)
		}
		// The table would be every user's who maps the file: root's process, whose user may
		// read the debug file, does not name from it either.
		if got, _ := lookupAs(t, newTestCache(t, nil), "", root+"/usr/bin/dl", debug, "hot"); got == "hot" {
			t.Errorf("hot named from a debug file not every user may read")
		}
		if err := os.Chmod(secret, 0o644); err != nil {
			t.Fatal(err)
		}
		if got, _ := lookupAs(t, newTestCache(t, nil), "", root+"/usr/bin/dl", debug, "hot"); got != "hot" {
			t.Errorf("once every user may read it: hot named %q", got)
		}
	})
	t.Run("too large to hash", func(t *testing.T) {
		root := t.TempDir()
		install(t, prog, root, "/usr/bin/dl")
		install(t, debug, root, "/usr/bin/"+name)
		if err := os.Truncate(root+"/usr/bin/"+name, 1<<40); err != nil { // a sparse terabyte
			t.Skipf("a sparse file of 1 TiB: %v", err)
		}
		var logs bytes.Buffer
		if got, _ := lookupIn(t, root, "/usr/bin/dl", debug, "hot", &logs); got == "hot" {
			t.Errorf("hot named from a debug file of 1 TiB")
		}
		if !strings.Contains(logs.String(), "debug file refused") {
			t.Errorf("no log line about the debug file too large:\n%s", logs.String())
		}
	})
}

// TestParseBound: debug/elf reads no more than maxParseBytes of a file whose section names
// claim more, in a sparse file.
func TestParseBound(t *testing.T) {
	dir := t.TempDir()
	data := must(os.ReadFile(build(t, dir, "prog", "testdata/prog.c")))
	ef := must(elf.NewFile(bytes.NewReader(data)))
	shstrndx := int(ef.ByteOrder.Uint16(data[0x3e:]))
	hdr := shdrOffset(t, data, ef, ef.Sections[shstrndx])
	const claimed = 4 * maxParseBytes
	ef.ByteOrder.PutUint64(data[hdr+24:], uint64(len(data)))
	ef.ByteOrder.PutUint64(data[hdr+32:], claimed)
	r := &countingReader{r: bytes.NewReader(data), size: int64(len(data)) + claimed}
	if _, err := openELF(r, r.size); !errors.Is(err, ErrNotELF) {
		t.Errorf("section names of %d bytes: %v, want ErrNotELF", claimed, err)
	}
	if r.read > maxParseBytes {
		t.Errorf("%d bytes read to parse the file, want at most %d", r.read, maxParseBytes)
	}
}

// countingReader reads r, zeros past its end up to size, and counts the bytes read.
type countingReader struct {
	r          *bytes.Reader
	size, read int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= c.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), c.size-off)]
	clear(p)
	c.r.ReadAt(p, off)
	c.read += int64(len(p))
	return len(p), nil
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestDemangleCxx names a C++ template member function by its source name.
func TestDemangleCxx(t *testing.T) {
	testenv.Requires(t, testenv.Tool("c++"))
	dir := t.TempDir()
	so := filepath.Join(dir, "cxx.so")
	run(t, "c++", "-O1", "-shared", "-fPIC", "-o", so, "testdata/cxx.cc")
	f := must(os.Open(so))
	defer f.Close()
	tab, err := Read(f, must(f.Stat()).Size(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range tab.names {
		names = append(names, Demangle(n))
	}
	want := "pg::Tuple<long>::form(long, int)"
	found := false
	for _, n := range names {
		found = found || n == want
	}
	if !found {
		t.Errorf("no %q among %q", want, names)
	}
	if got := Demangle("heap_form_minimal_tuple"); got != "heap_form_minimal_tuple" {
		t.Errorf("a C name demangled to %q", got)
	}
	if got := Demangle("_RNvCs15kBYyAo9fc_7mycrate7example"); got != "mycrate::example" {
		t.Errorf("a Rust v0 name demangled to %q", got)
	}
}

// TestSharedAcrossProcesses reads a file once for every process that maps it.
func TestSharedAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	prog := build(t, dir, "prog", "testdata/prog.c")
	c := newTestCache(t, nil)
	var first *Table
	for i := 0; i < 3; i++ {
		p := start(t, prog)
		name, tab := nameInProcess(t, c, p.pid, p.addrs["hot"])
		if name != "hot" {
			t.Errorf("process %d: hot named %q", i, name)
		}
		if first == nil {
			first = tab
		} else if tab != first {
			t.Errorf("process %d: the file was read again", i)
		}
	}
	// A copy of the file (another inode) with the same build-id shares the table too.
	cp := filepath.Join(dir, "copy")
	install(t, prog, "", cp)
	f := must(os.Open(cp))
	if tab, err := c.Open(f, "", cp).Wait(context.Background()); err != nil || tab != first {
		t.Errorf("a copy with the same build-id: %p %v, want %p", tab, err, first)
	}
}

// TestChangedWhileRead refuses a file rewritten between its first stat and the end of its
// reading.
func TestChangedWhileRead(t *testing.T) {
	dir := t.TempDir()
	prog := build(t, dir, "prog", "testdata/prog.c")
	f := must(os.OpenFile(prog, os.O_RDWR, 0))
	defer f.Close()
	key := must(statOf(f))
	time.Sleep(10 * time.Millisecond) // a later ctime on file systems with coarse clocks
	if _, err := f.WriteAt([]byte{0}, key.size); err != nil {
		t.Fatal(err)
	}
	c := newTestCache(t, nil)
	if _, err := c.load(f, key, "", prog); !errors.Is(err, ErrChanged) {
		t.Errorf("a file that changed while read: %v", err)
	}
}

// TestCaps keeps at most MaxSymbols of a file, says so once, and reads a symbol table
// claiming 10^7 entries (a sparse file) in bounded memory.
func TestCaps(t *testing.T) {
	dir := t.TempDir()
	prog := build(t, dir, "prog", "testdata/prog.c")
	data := must(os.ReadFile(prog))
	tab, err := Read(bytes.NewReader(data), int64(len(data)), Options{MaxSymbols: 2})
	if err != nil || tab.Len() != 2 || !tab.Capped {
		t.Errorf("capped at 2: %d symbols, capped %v, %v", tab.Len(), tab.Capped, err)
	}

	// The .symtab's header is pointed at a hole of 10^7 entries past the file's end.
	big := filepath.Join(dir, "big")
	const entries = 10_000_000
	ef := must(elf.NewFile(bytes.NewReader(data)))
	s := ef.Section(".symtab")
	hdr := shdrOffset(t, data, ef, s)
	patched := append([]byte(nil), data...)
	holeAt := uint64(len(data)+4095) &^ 4095
	ef.ByteOrder.PutUint64(patched[hdr+24:], holeAt)     // sh_offset
	ef.ByteOrder.PutUint64(patched[hdr+32:], entries*24) // sh_size
	if err := os.WriteFile(big, patched, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, int64(holeAt+entries*24)); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	c := NewCache(Config{Options: Options{MaxSymbols: 1000}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer c.Close()
	tab, err = c.Open(must(os.Open(big)), "", big).Wait(context.Background())
	if err != nil || !tab.Capped {
		t.Errorf("10^7 entries: capped %v, %v", tab != nil && tab.Capped, err)
	}
	if n := strings.Count(logs.String(), "more symbols than profd keeps"); n != 1 {
		t.Errorf("%d log lines about the cap, want 1:\n%s", n, logs.String())
	}
}

// shdrOffset is the file offset of section s's header.
func shdrOffset(t *testing.T, data []byte, f *elf.File, s *elf.Section) int {
	t.Helper()
	if f.Class != elf.ELFCLASS64 {
		t.Skip("64-bit ELF only")
	}
	shoff := f.ByteOrder.Uint64(data[0x28:])
	for i, x := range f.Sections {
		if x == s {
			return int(shoff) + i*64
		}
	}
	t.Fatalf("no section %s", s.Name)
	return 0
}

// TestDamaged reads a real binary cut at every 97th byte and with its sections' sizes
// inflated: whatever it returns, it does not crash, and what it names is sound.
func TestDamaged(t *testing.T) {
	dir := t.TempDir()
	data := must(os.ReadFile(build(t, dir, "prog", "testdata/prog.c")))
	for cut := 0; cut < len(data); cut += 97 {
		tab, _ := Read(bytes.NewReader(data[:cut]), int64(cut), Options{})
		checkTable(t, tab)
	}
	ef := must(elf.NewFile(bytes.NewReader(data)))
	for _, s := range ef.Sections {
		if s.Type == elf.SHT_NULL {
			continue
		}
		hdr := shdrOffset(t, data, ef, s)
		for _, size := range []uint64{1 << 62, uint64(len(data)), 7} {
			bad := append([]byte(nil), data...)
			ef.ByteOrder.PutUint64(bad[hdr+32:], size)
			tab, _ := Read(bytes.NewReader(bad), int64(len(bad)), Options{})
			checkTable(t, tab)
		}
	}
}

// checkTable fails t when tab is not sorted or lookups disagree with it.
func checkTable(t testing.TB, tab *Table) {
	t.Helper()
	if tab == nil {
		return
	}
	for i := range tab.addrs {
		if i > 0 && tab.addrs[i] <= tab.addrs[i-1] {
			t.Fatalf("symbol %d at %#x after %#x", i, tab.addrs[i], tab.addrs[i-1])
		}
		if name, ok := tab.LookupVaddr(tab.addrs[i]); !ok || name != tab.names[i] {
			t.Fatalf("symbol %d %q at %#x looked up as %q", i, tab.names[i], tab.addrs[i], name)
		}
	}
}

// A sample of process 1234 at ip, in its mapping of /usr/bin/prog starting at start with
// file offset offset, is named from the file as the process sees it.
func ExampleCache() {
	const pid, ip, start, offset = 1234, 0x55d0c0001234, 0x55d0c0000000, 0x1000
	root := "/proc/1234/root"
	f, err := os.Open(root + "/usr/bin/prog")
	if err != nil {
		return
	}
	c := NewCache(Config{})
	defer c.Close()
	tab, err := c.Open(f, root, "/usr/bin/prog").Wait(context.Background())
	if err != nil {
		return
	}
	if name, ok := tab.Lookup(ip - start + offset); ok {
		fmt.Println(Demangle(name))
	}
}

// TestBuildIDSharedByOwner: a file takes the table of another file with its build-id only
// when both have one owner: a user's file that claims a system library's build-id (and has
// symbols of its choosing) is read for itself, and names nothing of the library's.
func TestBuildIDSharedByOwner(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	dir := t.TempDir()
	prog := build(t, dir, "prog", "testdata/prog.c")
	c := newTestCache(t, nil)
	first, err := c.Open(must(os.Open(prog)), "", prog).Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(dir, "mine")
	install(t, prog, "", mine)
	if err := os.Chown(mine, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	tab, err := c.Open(must(os.Open(mine)), "", mine).Wait(context.Background())
	if err != nil || tab == first {
		t.Errorf("another owner's file with the build-id: table %p (%v), want one of its own, not %p", tab, err, first)
	}
}

// TestCacheLetsGo: past MaxFiles, the cache lets go of loaded tables to load new files'
// (a run of weeks keeps meeting new programs), and holds no more than MaxFiles.
func TestCacheLetsGo(t *testing.T) {
	dir := t.TempDir()
	prog := build(t, dir, "prog", "testdata/prog.c")
	c := NewCache(Config{MaxFiles: 4})
	t.Cleanup(c.Close)
	for i := range 10 {
		p := filepath.Join(dir, "copy"+strconv.Itoa(i))
		install(t, prog, "", p)
		if _, err := c.Open(must(os.Open(p)), "", p).Wait(context.Background()); err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
		c.mu.Lock()
		n := len(c.byStat)
		c.mu.Unlock()
		if n > 4 {
			t.Fatalf("after file %d the cache holds %d files, want at most 4", i, n)
		}
	}
}

// TestOpenLaterStalled: a file whose open does not end (a network file system that does not
// answer) holds the loads one at a time only for StallAfter: a second file's table loads
// after it, and Close does not wait for it. Each file is told by its status, asked of no
// file system, and one opened with another inode fails with ErrChanged.
func TestOpenLaterStalled(t *testing.T) {
	dir := t.TempDir()
	prog := build(t, dir, "prog", "testdata/prog.c")
	other := filepath.Join(dir, "other")
	install(t, prog, "", other)
	status := func(path string) unix.Statx_t {
		st, err := procfs.StatNoSync(unix.AT_FDCWD, path)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	c := NewCache(Config{StallAfter: 200 * time.Millisecond})
	entered, held := make(chan struct{}), make(chan struct{})
	defer close(held)
	stuck := c.OpenLater(status(prog), func() (*os.File, error) { close(entered); <-held; return os.Open(prog) }, "", prog)
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tab, err := c.OpenLater(status(other), func() (*os.File, error) { return os.Open(other) }, "", other).Wait(ctx)
	if err != nil || tab == nil || tab.Len() == 0 {
		t.Fatalf("the file after a stalled one: table %v, %v", tab, err)
	}
	if _, err := c.OpenLater(status(other), func() (*os.File, error) { return os.Open(prog) }, "", other).Wait(ctx); err != nil {
		t.Errorf("a file the cache has is opened again: %v", err)
	}
	moved := filepath.Join(dir, "moved")
	install(t, prog, "", moved)
	if _, err := c.OpenLater(status(moved), func() (*os.File, error) { return os.Open(other) }, "", moved).Wait(ctx); !errors.Is(err, ErrChanged) {
		t.Errorf("another file opened: %v, want ErrChanged", err)
	}
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close waits for the stalled load")
	}
	select {
	case <-stuck.done:
		t.Error("the stalled load ended while its open was held")
	default:
	}
}

// TestOpenLaterRetried: a file whose open failed (its process gone before the cache's
// goroutine opened it through the process) is not kept failed: the next Open of the same
// file opens it again, and loads its table.
func TestOpenLaterRetried(t *testing.T) {
	dir := t.TempDir()
	prog := build(t, dir, "prog", "testdata/prog.c")
	st, err := procfs.StatNoSync(unix.AT_FDCWD, prog)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache(Config{})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gone := errors.New("the process is gone")
	if _, err := c.OpenLater(st, func() (*os.File, error) { return nil, gone }, "", prog).Wait(ctx); !errors.Is(err, gone) {
		t.Fatalf("an open that fails: %v", err)
	}
	tab, err := c.OpenLater(st, func() (*os.File, error) { return os.Open(prog) }, "", prog).Wait(ctx)
	if err != nil || tab == nil || tab.Len() == 0 {
		t.Errorf("the same file opened again: table %v, %v", tab, err)
	}
}

// TestPLTNames: every PLT entry objdump names (name@plt), in .plt and, in a build for
// Intel CET, in .plt.sec, and in .plt.got (the entries of functions whose address the
// program also takes: gcc's PIE start code's __cxa_finalize), is named so, to its last
// byte; the sizeless _init before .plt names none of it.
func TestPLTNames(t *testing.T) {
	testenv.Requires(t, testenv.Tool("objdump"))
	dir := t.TempDir()
	for _, c := range []struct {
		name, section string
		flags         []string
	}{
		{"plt", ".plt", nil},
		{"plt-sec", ".plt.sec", []string{"-fcf-protection=full", "-Wl,-z,ibtplt"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			prog := build(t, dir, c.name, append(c.flags, "testdata/prog.c")...)
			tab := readFile(t, prog)
			ef, err := elf.Open(prog)
			if err != nil {
				t.Fatal(err)
			}
			defer ef.Close()
			for _, section := range []string{c.section, ".plt.got"} {
				out, err := exec.Command("objdump", "-d", "-j", section, prog).Output()
				if err != nil {
					t.Fatal(err)
				}
				want := map[uint64]string{}
				for _, line := range strings.Split(string(out), "\n") {
					addr, name, ok := strings.Cut(strings.TrimSuffix(line, ">:"), " <")
					if v, err := strconv.ParseUint(addr, 16, 64); ok && err == nil && strings.HasSuffix(name, "@plt") {
						want[v] = name
					}
				}
				if min := map[bool]int{true: 1, false: 3}[section == ".plt.got"]; len(want) < min {
					t.Fatalf("objdump names %d entries in %s:\n%s", len(want), section, out)
				}
				last := uint64(pltEntryBytes - 1)
				if section == ".plt.got" {
					last = ef.Section(section).Entsize - 1
				}
				for addr, name := range want {
					for _, at := range []uint64{addr, addr + last} {
						if got, _ := tab.LookupVaddr(at); got != name {
							t.Errorf("%s %#x: %q, want %q", section, at, got, name)
						}
					}
				}
			}
			plt := ef.Section(".plt")
			for at := plt.Addr; at < plt.Addr+plt.Size; at++ {
				if got, _ := tab.LookupVaddr(at); got == "_init" {
					t.Fatalf("%#x in .plt named _init", at)
				}
			}
		})
	}
}
