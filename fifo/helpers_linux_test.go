package fifo

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
	"golang.org/x/sys/unix"
)

// collector gathers a Server's events for a test.
type collector struct {
	mu     sync.Mutex
	events []Event
	cond   *sync.Cond
}

func newCollector() *collector {
	c := &collector{}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *collector) handle(ev Event) {
	c.mu.Lock()
	c.events = append(c.events, ev)
	c.mu.Unlock()
	c.cond.Broadcast()
}

func (c *collector) snapshot() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Event(nil), c.events...)
}

// waitFor waits until ok holds for the events so far, or fails the test after 10 s.
func (c *collector) waitFor(t *testing.T, what string, ok func([]Event) bool) []Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs := c.snapshot()
		if ok(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; have %d events: %s", what, len(evs), describe(evs))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func countLoads(evs []Event) int {
	n := 0
	for _, e := range evs {
		if _, ok := e.Event.(*jitmap.CodeLoad); ok {
			n++
		}
	}
	return n
}

func hasStreamEnd(evs []Event) bool {
	for _, e := range evs {
		if _, ok := e.Event.(*jitmap.StreamEnd); ok {
			return true
		}
	}
	return false
}

func describe(evs []Event) string {
	var b bytes.Buffer
	for _, e := range evs {
		switch ev := e.Event.(type) {
		case *jitmap.CodeLoad:
			b.WriteString("load:" + ev.Object.Name + " ")
		case *jitmap.CodeMove:
			b.WriteString("move ")
		case *jitmap.CodeUnload:
			b.WriteString("unload ")
		case *jitmap.StreamEnd:
			b.WriteString("end ")
		}
	}
	return b.String()
}

// startServer starts a Server in a fresh directory with a collector and a log buffer.
func startServer(t *testing.T, cfg Config) (*Server, *collector, *testenv.SyncBuffer) {
	t.Helper()
	c := newCollector()
	logs := &testenv.SyncBuffer{}
	if cfg.Dir == "" {
		cfg.Dir = privateDir(t)
	}
	cfg.Handler = c.handle
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, c, logs
}

// openWriter opens a FIFO for writing as a JIT would (non-blocking open, then blocking writes).
func openWriter(t *testing.T, path string) *os.File {
	t.Helper()
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s for writing: %v", path, err)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fd), path)
}

var (
	buildOnce sync.Once
	builtDir  string
	buildErr  error
)

// cProgram compiles testdata/writer.c or ../jit/testjit.c (with jit/profd_jit.h) once per
// test binary and returns the executable's path.
func cProgram(t *testing.T, name string) string {
	t.Helper()
	testenv.Requires(t, testenv.Tool("gcc"))
	buildOnce.Do(func() {
		builtDir, buildErr = os.MkdirTemp("", "profd-fifo-c-")
		if buildErr != nil {
			return
		}
		for out, src := range map[string]string{"writer": "testdata/writer.c", "testjit": "../jit/testjit.c"} {
			cmd := exec.Command("gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-D_GNU_SOURCE", "-O1",
				"-o", filepath.Join(builtDir, out), src)
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = &buildError{src: src, out: string(b), err: err}
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	if runtime.GOARCH != "amd64" && name == "testjit" {
		t.Skip("testjit emits x86-64 code")
	}
	return filepath.Join(builtDir, name)
}

type buildError struct {
	src, out string
	err      error
}

func (e *buildError) Error() string { return "gcc " + e.src + ": " + e.err.Error() + "\n" + e.out }

func monotonicNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}
