package execmaps

import (
	"log/slog"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// TestCPUOfflineAndBack: a CPU that goes offline and comes back ends the Log's event on it
// for good (percpu.Events), so a process that runs there after must still have its records
// read: its executable among its mappings once it has exited. Its events on the CPUs that
// stayed are not opened again. It disturbs every test running beside it: make test runs it
// on its own.
func TestCPUOfflineAndBack(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("taskset"))
	cpu, setOnline := testenv.HotplugCPU(t)
	var logs testenv.SyncBuffer
	l, err := Start(Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	time.Sleep(2500 * time.Millisecond)
	if strings.Contains(logs.String(), "cpus online again") {
		t.Fatalf("events opened again with every CPU online all along; logs:\n%s", logs.String())
	}
	if err := setOnline(false); err != nil {
		t.Skipf("cpu %d cannot go offline here: %v", cpu, err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := setOnline(true); err != nil {
		t.Fatalf("cpu %d does not come back online: %v", cpu, err)
	}
	time.Sleep(2500 * time.Millisecond) // two looks: the event ended, then opened again

	sh, real := shell(t)
	cmd := exec.Command("taskset", "-c", strconv.Itoa(cpu), sh, "-c", "exit 0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("taskset: %v\n%s", err, out)
	}
	pid := uint32(cmd.Process.Pid)
	var found bool
	for end := time.Now().Add(2 * time.Second); !found && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for _, m := range l.Mappings(pid) {
			found = found || m.Path == real
		}
	}
	if !found {
		t.Errorf("pid %d ran %s on cpu %d after it came back: mappings %s; logs:\n%s",
			pid, filepath.Base(real), cpu, show(l.Mappings(pid)), logs.String())
	}
}
