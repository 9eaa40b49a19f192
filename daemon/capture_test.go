package daemon

import (
	"log/slog"
	"os"
	"strings"
	"testing"
)

// TestCutWarning: the frame-pointer warning comes once per explicit --pid, and once per image
// under --all and --jit-image, only when most of its chains are cut and they are enough to
// say so: not for a short command's few samples.
func TestCutWarning(t *testing.T) {
	for _, cfg := range []Config{{Pids: []uint32{1, 2, 3}}, {JITImages: []string{"jit"}}, {All: true}} {
		perImage := len(cfg.Pids) == 0
		var logs strings.Builder
		d := &daemonRun{cfg: cfg, log: slog.New(slog.NewTextHandler(&logs, nil))}
		d.flushing.cutWarned = map[string]bool{}
		warnings := func() int { return strings.Count(logs.String(), "call chains stop before") }

		d.noteCut(pending{pid: 1, image: "sh"}, 0, 7) // a shell that ran 7 ms
		d.noteCut(pending{pid: 2, image: "jit"}, 900, 100)
		if n := warnings(); n != 0 {
			t.Fatalf("%+v: %d warnings for a few cut chains or a minority of them:\n%s", cfg, n, logs.String())
		}
		d.noteCut(pending{pid: 2, image: "jit"}, 900, 1000)
		d.noteCut(pending{pid: 2, image: "jit"}, 900, 2000)
		if n := warnings(); n != 1 {
			t.Fatalf("%+v: %d warnings for a target with most chains cut, want 1:\n%s", cfg, n, logs.String())
		}
		d.noteCut(pending{pid: 3, image: "jit"}, 0, cutWarnMin)
		want := 2
		if perImage {
			want = 1 // the same image
		}
		if n := warnings(); n != want {
			t.Errorf("%+v: %d warnings after another process of the image, want %d:\n%s", cfg, n, want, logs.String())
		}
	}
}

// kernelRelease is the release the kernel gives in /proc, as uname -r prints it.
func TestKernelRelease(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Skip(err)
	}
	if got, want := kernelRelease(), strings.TrimSpace(string(b)); got != want || got == "" {
		t.Errorf("kernelRelease() = %q, want %q", got, want)
	}
}
