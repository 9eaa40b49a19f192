package testenv

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"
)

// BPF needs the privilege to load BPF programs of type perf_event. A root process on a
// kernel without them is not skipped: the test runs and fails, since every supported kernel
// has them.
func BPF() string {
	err := features.HaveProgramType(ebpf.PerfEvent)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return "privileges to load BPF programs"
	default:
		return "" // present on every supported kernel: let the test fail and say why
	}
}

// perfEvents maps the event names profd accepts to perf_event_attr (type, config).
var perfEvents = map[string][2]uint64{
	"cycles":        {unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CPU_CYCLES},
	"instructions":  {unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_INSTRUCTIONS},
	"branch-misses": {unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_BRANCH_MISSES},
	"cache-misses":  {unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CACHE_MISSES},
	"cpu-clock":     {unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_CLOCK},
	"task-clock":    {unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_TASK_CLOCK},
}

// PerfEvent needs a perf event that can sample every thread of a CPU (as profd's per-CPU
// events do). A hardware event without a PMU is unmet; a software event is present on every
// kernel, so only missing privileges make it unmet.
func PerfEvent(name string) Need {
	return func() string {
		te, ok := perfEvents[name]
		if !ok {
			return fmt.Sprintf("perf event %q (unknown to testenv)", name)
		}
		attr := unix.PerfEventAttr{
			Type:   uint32(te[0]),
			Config: te[1],
			Size:   unix.PERF_ATTR_SIZE_VER5,
			Sample: 1000,
			Bits:   unix.PerfBitDisabled | unix.PerfBitFreq | unix.PerfBitExcludeKernel,
		}
		fd, err := unix.PerfEventOpen(&attr, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err == nil {
			unix.Close(fd)
			return ""
		}
		switch {
		case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
			return fmt.Sprintf("privileges for perf event %s", name)
		case te[0] == unix.PERF_TYPE_HARDWARE:
			return fmt.Sprintf("hardware perf event %s (%s)", name, strings.ToLower(err.Error()))
		default:
			return ""
		}
	}
}
