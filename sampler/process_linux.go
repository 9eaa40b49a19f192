package sampler

import (
	"fmt"
	"math"

	"golang.org/x/sys/unix"
)

// checkProcess reports an error wrapping ErrNoProcess unless pid names a live process.
func checkProcess(pid uint32) error {
	if pid == 0 || pid > math.MaxInt32 {
		return fmt.Errorf("sampler: add target %d: %w", pid, ErrNoProcess)
	}
	if err := unix.Kill(int(pid), 0); err == unix.ESRCH {
		return fmt.Errorf("sampler: add target %d: %w", pid, ErrNoProcess)
	}
	return nil
}
