package daemon

import (
	"log/slog"
	"os"
	"strings"
	"testing"
)

// TestCutWarning: the frame-pointer warning comes once per target, only when most of its
// chains are cut and they are enough to say so: under --all, once per image, and not for a
// short command's few samples.
func TestCutWarning(t *testing.T) {
	for _, all := range []bool{false, true} {
		var logs strings.Builder
		d := &daemonRun{cfg: Config{All: all}, log: slog.New(slog.NewTextHandler(&logs, nil))}
		d.flushing.cutWarned = map[string]bool{}
		warnings := func() int { return strings.Count(logs.String(), "call chains stop before") }

		d.noteCut(pending{pid: 1, image: "sh"}, 0, 7) // a shell that ran 7 ms
		d.noteCut(pending{pid: 2, image: "jit"}, 900, 100)
		if n := warnings(); n != 0 {
			t.Fatalf("all=%v: %d warnings for a few cut chains or a minority of them:\n%s", all, n, logs.String())
		}
		d.noteCut(pending{pid: 2, image: "jit"}, 900, 1000)
		d.noteCut(pending{pid: 2, image: "jit"}, 900, 2000)
		if n := warnings(); n != 1 {
			t.Fatalf("all=%v: %d warnings for a target with most chains cut, want 1:\n%s", all, n, logs.String())
		}
		d.noteCut(pending{pid: 3, image: "jit"}, 0, cutWarnMin)
		want := 2
		if all {
			want = 1 // the same image
		}
		if n := warnings(); n != want {
			t.Errorf("all=%v: %d warnings after another process of the image, want %d:\n%s", all, n, want, logs.String())
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
