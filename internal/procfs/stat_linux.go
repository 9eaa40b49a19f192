package procfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrExited: the process is a zombie (or dead): it has exited and not been reaped yet.
var ErrExited = errors.New("procfs: process exited")

// clockTicksPerSecond is USER_HZ, the unit of /proc/PID/stat's times: 100 on Linux.
const clockTicksPerSecond = 100

// Stat is what profd reads of /proc/PID/stat (proc(5)), in one read.
type Stat struct {
	State byte   // field 3: R, S, D, Z (zombie), X (dead)...
	Flags uint64 // field 9: the kernel's PF_* process flags
	// Start is field 22: when the process started, in clock ticks since boot
	// (CLOCK_BOOTTIME). A pid that comes back with another start is another process.
	Start uint64
}

// pfKthread is the kernel's PF_KTHREAD process flag.
const pfKthread = 0x00200000

// KernelThread reports whether the process is a kernel thread: it has no user memory, so it
// runs no JIT code.
func (s Stat) KernelThread() bool { return s.Flags&pfKthread != 0 }

// Exited reports whether the process is a zombie (or dead): it has exited and not been
// reaped yet.
func (s Stat) Exited() bool { return s.State == 'Z' || s.State == 'X' }

// ReadStat reads /proc/PID/stat once.
func ReadStat(pid uint32) (Stat, error) {
	b, err := readBounded(Path(pid, "stat"), statBytes)
	if err != nil {
		return Stat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command may hold spaces and parentheses
	if i < 0 || i+2 > len(s) {
		return Stat{}, fmt.Errorf("procfs: /proc/%d/stat: no command field", pid)
	}
	// Fields after "pid (comm) ": field n of proc(5) is at index n-3 (state 3, flags 9,
	// starttime 22).
	const stateField, flagsField, startField = 0, 6, 19
	f := strings.Fields(s[i+2:])
	if len(f) <= startField || len(f[stateField]) != 1 {
		return Stat{}, fmt.Errorf("procfs: /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	st := Stat{State: f[stateField][0]}
	if st.Flags, err = strconv.ParseUint(f[flagsField], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("procfs: /proc/%d/stat: flags: %w", pid, err)
	}
	if st.Start, err = strconv.ParseUint(f[startField], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("procfs: /proc/%d/stat: start time: %w", pid, err)
	}
	return st, nil
}

// StartTicks returns when process pid started (Stat.Start); a zombie's is ErrExited.
func StartTicks(pid uint32) (uint64, error) {
	st, err := ReadStat(pid)
	if err != nil {
		return 0, err
	}
	if st.Exited() {
		return 0, fmt.Errorf("procfs: pid %d: %w", pid, ErrExited)
	}
	return st.Start, nil
}

// KernelThread reports whether pid is a kernel thread (Stat.KernelThread).
func KernelThread(pid uint32) (bool, error) {
	st, err := ReadStat(pid)
	return st.KernelThread(), err
}

// StartedAt returns when process pid started, on the wall clock, to the clock tick (10 ms).
func StartedAt(pid uint32) (time.Time, error) {
	ticks, err := StartTicks(pid)
	if err != nil {
		return time.Time{}, err
	}
	return TicksTime(ticks)
}

// TicksTime is the wall time of ticks, clock ticks since boot as /proc/PID/stat counts a
// process's start (StartTicks).
func TicksTime(ticks uint64) (time.Time, error) {
	var boot unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot); err != nil {
		return time.Time{}, os.NewSyscallError("clock_gettime", err)
	}
	now := time.Now()
	started := time.Duration(ticks) * (time.Second / clockTicksPerSecond)
	return now.Add(started - time.Duration(boot.Nano())), nil
}
