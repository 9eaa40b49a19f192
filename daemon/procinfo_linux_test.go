package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/profileio"
)

// TestProcessInfo: a target's capture names its command line and the service name its
// environment gives it (OTEL_SERVICE_NAME over OTEL_RESOURCE_ATTRIBUTES), read as it was
// added and kept after it exited.
func TestProcessInfo(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	argv := []string{testjit, "-d", d.fifo, "-m", "100", "-w", "10000"}
	jit := startChild(t, []string{"OTEL_SERVICE_NAME=profd-test-service", "OTEL_RESOURCE_ATTRIBUTES=service.name=not-this"}, argv...)
	r := startRun(t, Config{Pids: []uint32{uint32(jit.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	jit.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)
	p := onlyProcess(t, readCapture(t, outputPath(d, "testjit", jit.pid(), FormatCapture)))
	if !reflect.DeepEqual(p.CommandLine, argv) || p.ServiceName != "profd-test-service" {
		t.Errorf("capture's process: command line %q, service %q; want %q, profd-test-service", p.CommandLine, p.ServiceName, argv)
	}
	if p.CgroupPath == "" {
		t.Error("capture's process has no cgroup")
	}
}

// TestContainerID runs a target in a cgroup v2 named as Docker's systemd driver names a
// container's (docker-ID.scope): its capture has the cgroup and the container id, and its
// pprof samples the container_id and cgroup labels.
func TestContainerID(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	id := randomHex(32)
	cg := testenv.Cgroup(t, "docker-"+id+".scope")

	d := newDirs(t)
	jit := startCmdInCgroup(t, int(cg.Fd()), testjit, "-d", d.fifo, "-m", "100", "-w", "10000")
	r := startRun(t, Config{Pids: []uint32{uint32(jit.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	jit.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)
	p := onlyProcess(t, readCapture(t, outputPath(d, "testjit", jit.pid(), FormatCapture)))
	if p.ContainerID != id || !strings.HasSuffix(p.CgroupPath, "/docker-"+id+".scope") {
		t.Errorf("capture's process: cgroup %q, container %q; want docker-%s.scope, %s", p.CgroupPath, p.ContainerID, id, id)
	}
	prof := readPprof(t, outputPath(d, "testjit", jit.pid(), FormatPprof))
	if len(prof.Sample) == 0 {
		t.Fatal("no samples in the pprof profile")
	}
	for _, s := range prof.Sample {
		if got := s.Label["container_id"]; len(got) != 1 || got[0] != id {
			t.Fatalf("sample labelled container_id %q, want %s", got, id)
		}
		if got := s.Label["cgroup"]; len(got) != 1 || got[0] != p.CgroupPath {
			t.Fatalf("sample labelled cgroup %q, want %s", got, p.CgroupPath)
		}
	}
}

// onlyProcess is c's one process.
func onlyProcess(t *testing.T, c *profileio.Capture) profileio.Process {
	t.Helper()
	if len(c.Processes) != 1 {
		t.Fatalf("capture has %d processes, want 1", len(c.Processes))
	}
	return c.Processes[0]
}

// randomHex is n random bytes in hex: names no earlier run left behind.
func randomHex(n int) string {
	raw := make([]byte, n)
	rand.Read(raw)
	return hex.EncodeToString(raw)
}

// startCmdInCgroup starts argv in the cgroup open as cgroupFD (clone3's CLONE_INTO_CGROUP,
// so that it runs nowhere else first).
func startCmdInCgroup(t *testing.T, cgroupFD int, argv ...string) *child {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cgroupFD}
	return startCmd(t, cmd)
}
