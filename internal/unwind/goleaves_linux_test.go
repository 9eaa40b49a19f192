package unwind

import (
	"bytes"
	"debug/elf"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/testenv"
)

// foundLog records what a GoLeaves' Found and Lost were told.
type foundLog struct {
	mu     sync.Mutex
	found  map[uint32][2]uint64
	events []string
}

func newFoundLog() *foundLog { return &foundLog{found: map[uint32][2]uint64{}} }

func (l *foundLog) config() GoLeavesConfig {
	return GoLeavesConfig{
		Found: func(pid uint32, lo, hi uint64) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.found[pid] = [2]uint64{lo, hi}
			l.events = append(l.events, "found")
		},
		Lost: func(pid uint32) {
			l.mu.Lock()
			defer l.mu.Unlock()
			delete(l.found, pid)
			l.events = append(l.events, "lost")
		},
	}
}

// wait waits until pid's code is found, and returns its range.
func (l *foundLog) wait(t *testing.T, pid uint32) (lo, hi uint64) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		l.mu.Lock()
		r, ok := l.found[pid]
		l.mu.Unlock()
		if ok {
			return r[0], r[1]
		}
	}
	t.Fatalf("pid %d's Go code not found in 20 s", pid)
	return 0, 0
}

// startGo starts the Go program exe with args, and returns its pid once its code is mapped
// (Start returns when the exec is past its point of no return, which comes before the
// kernel maps the new program: a read then would find nothing, and wait for a Recheck).
func startGo(t *testing.T, exe string, args ...string) uint32 {
	t.Helper()
	cmd := exec.Command(exe, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := uint32(cmd.Process.Pid)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		maps, _ := procfs.ReadMaps(pid)
		if slices.ContainsFunc(maps, func(m procfs.Mapping) bool { return m.Executable() && m.Path == exe }) {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) not mapped in 20 s", exe, pid)
		}
	}
}

// TestGoLeaves: for a Go program (built as an executable and as a PIE), GoLeaves finds the
// range of its code, and says where its functions' frames are empty as the table does:
// the whole of main.mixInts, which Go gives no frame; main.run at its first instruction
// and hardly anywhere else; nothing outside the code.
func TestGoLeaves(t *testing.T) {
	for _, mode := range []string{"exe", "pie"} {
		t.Run(mode, func(t *testing.T) {
			exe := testenv.GoBuild(t, "../../workloads/runtimes/hot.go", "-buildmode="+mode)
			pid := startGo(t, exe, "60")
			log := newFoundLog()
			g := NewGoLeaves(log.config())
			defer g.Close()
			g.Add(pid)
			lo, hi := log.wait(t, pid)
			bias := biasIn(t, pid, exe, lo)
			syms := map[string]elf.Symbol{}
			for _, s := range testenv.ELFSymbols(t, exe) {
				syms[s.Name] = s
			}
			mix, run := syms["main.mixInts"], syms["main.run"]
			if mix.Size == 0 || run.Size == 0 {
				t.Fatalf("no main.mixInts or main.run in %s", exe)
			}
			for a := mix.Value; a < mix.Value+mix.Size; a++ {
				if !g.Frameless(pid, a+bias) || !g.InText(pid, a+bias) {
					t.Fatalf("main.mixInts+%#x: not frameless", a-mix.Value)
				}
			}
			if !g.Frameless(pid, run.Value+bias) {
				t.Errorf("main.run's first instruction: not frameless")
			}
			frameless := 0
			for a := run.Value; a < run.Value+run.Size; a++ {
				if g.Frameless(pid, a+bias) {
					frameless++
				}
			}
			t.Logf("code %#x-%#x, bias %#x; main.run frameless over %d of its %d bytes", lo, hi, bias, frameless, run.Size)
			if frameless*5 > int(run.Size) {
				t.Errorf("main.run frameless over %d of its %d bytes", frameless, run.Size)
			}
			if g.Frameless(pid, hi) || g.InText(pid, hi) || g.InText(pid, lo-1) || g.Frameless(pid+1, run.Value+bias) {
				t.Errorf("frameless or in the code outside it")
			}
			if !g.Wanted(pid) {
				t.Errorf("pid %d not wanted once added", pid)
			}
			g.Forget(pid)
			if g.Frameless(pid, mix.Value+bias) || g.Wanted(pid) {
				t.Errorf("frameless, or wanted, after Forget")
			}
		})
	}
}

// biasIn is how far process pid moved the file exe, whose code it maps at lo: what the
// unwinder computes, from the mapping and the file's load segments.
func biasIn(t *testing.T, pid uint32, exe string, lo uint64) uint64 {
	t.Helper()
	m := mappingAt(t, pid, lo)
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bias, ok := biasOf(loadsOf(f), m)
	if !ok {
		t.Fatalf("no load segment for %+v", m)
	}
	return bias
}

// TestGoLeavesNotGo: a program without Go's table is not found, nor is a pid with no
// process.
func TestGoLeavesNotGo(t *testing.T) {
	pid, _ := startSleep(t)
	log := newFoundLog()
	g := NewGoLeaves(log.config())
	g.Add(pid)
	g.Add(1 << 30)
	exe := testenv.GoBuild(t, "../../workloads/runtimes/hot.go")
	goPid := startGo(t, exe, "60")
	g.Add(goPid) // read after the others
	log.wait(t, goPid)
	g.Close()
	if len(log.found) != 1 {
		t.Errorf("found %v, want pid %d alone", log.found, goPid)
	}
}

// TestGoLeavesExec: a Go program that execs another Go executable is found again, with the
// other file's code, once Recheck sees the exec (and lost in between), also when it is read
// while the exec is under way (a busy machine: its new code is not mapped yet).
func TestGoLeavesExec(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "execs.go")
	if err := os.WriteFile(src, []byte(`package main

import (
	"os"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 2 {
		time.Sleep(time.Second)
		syscall.Exec(os.Args[2], os.Args[:1], nil)
	}
	time.Sleep(time.Minute)
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	first := testenv.GoBuild(t, src)
	second := testenv.GoBuild(t, src, "-buildmode=pie")
	pid := startGo(t, first, "exec", second)
	log := newFoundLog()
	g := NewGoLeaves(log.config())
	defer g.Close()
	g.Add(pid)
	lo, _ := log.wait(t, pid)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the exec not seen in 20 s: %v", log.events)
		}
		g.Recheck()
		log.mu.Lock()
		r, ok := log.found[pid]
		log.mu.Unlock()
		if ok && r[0] != lo {
			break
		}
	}
	// Found, lost at the exec, found again; read while the exec was under way (its code not
	// mapped yet), lost once more before it is found.
	ev := log.events
	if len(ev) < 3 || ev[0] != "found" || ev[len(ev)-1] != "found" || slices.Contains(ev[1:len(ev)-1], "found") {
		t.Errorf("told %v, want found, lost, then found again", ev)
	}
}

// TestGoLeavesBound: past MaxBytes no file's spans are held, and one warning says so.
func TestGoLeavesBound(t *testing.T) {
	exe := testenv.GoBuild(t, "../../workloads/runtimes/hot.go")
	pids := []uint32{startGo(t, exe, "60"), startGo(t, exe, "60")}
	var logs bytes.Buffer
	log := newFoundLog()
	cfg := log.config()
	cfg.MaxBytes, cfg.Logger = 1024, slog.New(slog.NewTextHandler(&logs, nil))
	g := NewGoLeaves(cfg)
	for _, pid := range pids {
		g.Add(pid)
	}
	time.Sleep(2 * time.Second)
	g.Close()
	if len(log.found) != 0 || strings.Count(logs.String(), "past its bound") != 1 {
		t.Errorf("found %v; logs:\n%s", log.found, logs.String())
	}
}

func TestMergeSpans(t *testing.T) {
	got := mergeSpans([]leafSpan{{1, 3}, {2, 4}, {4, 5}, {7, 9}, {8, 8}, {10, 11}})
	if want := []leafSpan{{1, 5}, {7, 9}, {10, 11}}; !reflect.DeepEqual(got, want) {
		t.Errorf("merged %v, want %v", got, want)
	}
}
