package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/profd/profd/internal/testenv"
)

// TestUnprivileged: a user other than root profiles a process of their own. BPF is not
// theirs to load: profd says so in one warning naming what it takes (not the BPF library's
// hint of a low memory-lock limit), samples with perf ring buffers, exits 0 and writes the
// outputs, that user's; with --backend bpf it stops at once, naming --backend ring.
func TestUnprivileged(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	if b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid"); err != nil || paranoid(b) > 2 {
		t.Skip("perf_event_paranoid above 2: a user other than root may not sample")
	}
	built, _ := binaries(t)
	const nobody = 65534
	home := testenv.ReachableTempDir(t)
	if err := os.Chown(home, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	profd := filepath.Join(home, "profd")
	data, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(profd, data, 0o755); err != nil {
		t.Fatal(err)
	}
	asNobody := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	spin := exec.Command("/bin/sh", "-c", "while :; do :; done")
	spin.SysProcAttr = asNobody
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { spin.Process.Kill(); spin.Wait() }()

	out := filepath.Join(home, "out")
	cmd := exec.Command(profd, "--pid", strconv.Itoa(spin.Process.Pid), "--event", "cpu-clock", "--duration", "1s",
		"--out", out, "--fifo-dir", filepath.Join(home, "fifo"))
	cmd.SysProcAttr = asNobody
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("profd as uid %d: %v\n%s", nobody, err, output)
	}
	if !strings.Contains(string(output), "unavailable to a user other than root") || strings.Contains(string(output), "MEMLOCK") {
		t.Errorf("the warning does not say BPF takes root:\n%s", output)
	}
	if !strings.Contains(string(output), "with the ring back end") {
		t.Errorf("not sampled with perf ring buffers:\n%s", output)
	}
	// Asked for by name, BPF fails the start, saying what to ask for instead.
	cmd = exec.Command(profd, "--pid", strconv.Itoa(spin.Process.Pid), "--event", "cpu-clock", "--duration", "1s",
		"--out", out, "--fifo-dir", filepath.Join(home, "fifo"), "--backend", "bpf")
	cmd.SysProcAttr = asNobody
	if refused, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(refused), "--backend ring") || strings.Contains(string(refused), "MEMLOCK") {
		t.Errorf("--backend bpf as uid %d: %v, want a failure naming --backend ring:\n%s", nobody, err, refused)
	}
	captures, _ := filepath.Glob(filepath.Join(out, "*-"+strconv.Itoa(spin.Process.Pid)+".profd"))
	if len(captures) != 1 {
		t.Fatalf("captures %v, want the shell's\n%s", captures, output)
	}
	st, err := os.Stat(captures[0])
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != nobody {
		t.Errorf("capture owned by uid %d, want %d", uid, nobody)
	}
}

// paranoid is perf_event_paranoid's value in b (3 when it cannot be read: none may sample).
func paranoid(b []byte) int {
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 3
	}
	return n
}
