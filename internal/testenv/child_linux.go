package testenv

import (
	"fmt"
	"os"
	"time"
)

// ChildOf waits up to timeout for process parent to have a child for which ok (nil: any)
// is true, and returns its pid, or 0 if none came: unshare --fork runs its command in the
// namespaces it made as such a child.
func ChildOf(parent int, timeout time.Duration, ok func(pid int) bool) int {
	for end := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", parent, parent))
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil && (ok == nil || ok(pid)) {
			return pid
		}
		if time.Now().After(end) {
			return 0
		}
	}
}
