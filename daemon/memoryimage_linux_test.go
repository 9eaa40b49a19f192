package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/attribute"
	"github.com/profd/profd/internal/testenv"
)

// TestNativeImageInMemory runs testdata/native.c's program from a memfd (as fexecve does)
// and from a file of /dev/shm, names JIT memory takes too: its samples must be named by
// its symbols, as from a file anywhere else, not counted as JIT code no symbol names.
func TestNativeImageInMemory(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("cc"))
	exe, _ := buildNative(t)
	for _, tc := range []struct {
		name string
		// place puts the image where it runs from and returns the path to run and the
		// file its mappings name.
		place func(t *testing.T) (run, mapped string)
	}{
		{"memfd", func(t *testing.T) (string, string) {
			return memfdCopy(t, exe, "native"), "/memfd:native"
		}},
		{"/dev/shm", func(t *testing.T) (string, string) {
			path := filepath.Join("/dev/shm", fmt.Sprintf("profd-native-%d", os.Getpid()))
			image, err := os.ReadFile(exe)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, image, 0o700); err != nil {
				t.Skipf("/dev/shm: %v", err)
			}
			t.Cleanup(func() { os.Remove(path) })
			return path, path
		}},
	} {
		t.Run(strings.TrimPrefix(tc.name, "/"), func(t *testing.T) {
			run, mapped := tc.place(t)
			d := newDirs(t)
			w, start := startGated(t, exec.Command(run, "1.5"))
			pid := w.pid()
			r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
				Formats: []Format{FormatCapture}})
			r.waitAdded(t, pid, 60*time.Second)
			start.Write([]byte{1})
			start.Close()
			w.wait(t, 120*time.Second)
			r.wait(t, 60*time.Second)

			found, _ := filepath.Glob(filepath.Join(d.out, "*"+extension[FormatCapture]))
			if len(found) != 1 {
				t.Fatalf("captures %v, want one", found)
			}
			c := readCapture(t, found[0])
			funcs := map[string]uint64{}
			var native uint64
			for _, m := range c.Native {
				for _, s := range m.Samples {
					native += s.Count
					if m.File == mapped && s.Function != "" {
						funcs[s.Function] += s.Count
					}
				}
			}
			jit, outside := c.TotalSamples()
			total := jit + outside + c.UnnamedSamples()
			t.Logf("%d samples, %d in native code, %d in JIT memory unnamed; in %s by function %v",
				total, native, c.UnnamedSamples(), mapped, funcs)
			if total < 300 || float64(native) < 0.9*float64(total) {
				t.Errorf("%d samples, %d in native code: want most of 1.5 s in native code", total, native)
			}
			if funcs["native_hot"] == 0 || funcs["native_warm"] == 0 {
				t.Errorf("the program's own functions are not named in %s: %v", mapped, funcs)
			}
			if u := c.UnnamedSamples(); float64(u) > 0.05*float64(total) {
				t.Errorf("%d of %d samples counted as unnamed JIT code", u, total)
			}
		})
	}
}

// TestShortProcessesFromMemfd: under --all, processes of 20 ms run from a memfd, most of
// them gone before a drain reads their /proc/PID/maps: their mappings come from the
// kernel's records, where the memfd is a name JIT memory takes too. The file the kernel ran
// as the program is an ELF image whatever its name, so their samples are native code (by
// the file, where it cannot be opened again), not JIT code no symbol names.
func TestShortProcessesFromMemfd(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	spin, _ := buildAllSpin(t)
	run := memfdCopy(t, spin, "allspin")
	d := newDirs(t)
	r := startRunAll(t, Config{}, d)
	var pids []int
	for range 30 {
		c := startCmd(t, exec.Command(run, "20", "0"))
		c.wait(t, 60*time.Second)
		pids = append(pids, c.pid())
	}
	r.stop(t)
	var native, jit, total uint64
	for _, pid := range pids {
		for _, path := range pidCaptures(t, d, "", pid) {
			c := readCapture(t, path)
			for _, m := range c.Native {
				if strings.HasPrefix(m.File, "/memfd:allspin") {
					native += m.TotalSamples()
				}
			}
			u := c.UnnamedSamples() + unmappedSamples(c, attribute.JITMemory)
			jit += u
			_, outside := c.TotalSamples()
			total += outside + c.UnnamedSamples()
		}
	}
	t.Logf("%d processes: %d samples, %d in the memfd's code as native, %d as JIT memory", len(pids), total, native, jit)
	if total < 150 || native < total*7/10 || jit > total/10 {
		t.Errorf("%d samples of 30 processes of 20 ms: %d native in the memfd, %d in JIT memory; want 150 or more, 70 %% native, at most 10 %% JIT memory",
			total, native, jit)
	}
}

// memfdCopy copies the file at path into a memfd named name, kept open until the test's
// cleanup, and returns the path that runs it (as fexecve does).
func memfdCopy(t *testing.T, path, name string) string {
	t.Helper()
	image, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("memfd_create: %v", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:"+name)
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(image); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), fd)
}
