package sampler

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// checkProcess reports an error wrapping ErrNoProcess unless pid names a live process.
func checkProcess(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("sampler: add target %d: %w", pid, ErrNoProcess)
	}
	if err := unix.Kill(pid, 0); err == unix.ESRCH {
		return fmt.Errorf("sampler: add target %d: %w", pid, ErrNoProcess)
	}
	return nil
}
