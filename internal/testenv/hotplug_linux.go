package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// HotplugCPU returns the highest-numbered CPU online that has an online switch, and a
// function that takes it offline (false) or brings it back (true); the test's cleanup brings
// it back. It skips t where no CPU but one online can go offline. Taking a CPU offline
// disturbs every test running beside: make test runs such tests on their own.
func HotplugCPU(t testing.TB) (cpu int, setOnline func(on bool) error) {
	t.Helper()
	dirs, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*")
	cpu, online := -1, 0
	for _, dir := range dirs {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "cpu"))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "online"))
		switch {
		case os.IsNotExist(err): // online for good (cpu0, often)
			online++
		case err == nil && strings.TrimSpace(string(b)) == "1":
			online++
			cpu = max(cpu, n)
		}
	}
	if cpu < 0 || online < 2 {
		t.Skipf("no CPU can go offline here: %d online, the highest with an online switch %d (-1: none)", online, cpu)
	}
	control := filepath.Join("/sys/devices/system/cpu", "cpu"+strconv.Itoa(cpu), "online")
	setOnline = func(on bool) error {
		v := "0"
		if on {
			v = "1"
		}
		return os.WriteFile(control, []byte(v), 0)
	}
	t.Cleanup(func() { setOnline(true) })
	return cpu, setOnline
}
