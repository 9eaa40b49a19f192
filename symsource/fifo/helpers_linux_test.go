package fifo

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/symtest"
	"github.com/profd/profd/internal/testenv"
)

// startServer starts a Server in a fresh directory with a collector and a log buffer.
func startServer(t *testing.T, cfg Config) (*Server, *symtest.Collector, *testenv.SyncBuffer) {
	t.Helper()
	c := &symtest.Collector{}
	logs := &testenv.SyncBuffer{}
	if cfg.Dir == "" {
		cfg.Dir = privateDir(t)
	}
	cfg.Handler = c.Handle
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

// testOwner is the user the tests' FIFOs belong to: the test's, which runs the writers.
var testOwner = Owner{UID: os.Geteuid(), GID: os.Getegid()}

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

// cProgram compiles testdata/writer.c or jit/testjit.c (with jit/profd_jit.h) once per
// test binary and returns the executable's path.
func cProgram(t *testing.T, name string) string {
	t.Helper()
	testenv.Requires(t, testenv.Tool("gcc"))
	buildOnce.Do(func() {
		builtDir, buildErr = os.MkdirTemp("", "profd-fifo-c-")
		if buildErr != nil {
			return
		}
		for out, src := range map[string]string{"writer": "testdata/writer.c", "testjit": "../../jit/testjit.c"} {
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
