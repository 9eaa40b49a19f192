package procfs

import (
	"bytes"
	"fmt"
	"strings"
)

// commandLineBytes bounds what profd reads of a command line (/proc/PID/cmdline); a longer
// one is cut there.
const commandLineBytes = 32 << 10

// CommandLine is pid's arguments as it was started or last exec'd with (argv, its program
// first), or as it rewrote them since (a server naming its role in its title shows one
// argument with spaces). A kernel thread, or a process that exited, has none. A command
// line over commandLineBytes yields its arguments up to there, the last one cut, and an
// error wrapping ErrTooLarge.
func CommandLine(pid uint32) ([]string, error) {
	data, err := readBounded(Path(pid, "cmdline"), commandLineBytes)
	if data == nil {
		return nil, fmt.Errorf("procfs: pid %d: %w", pid, err)
	}
	return parseCommandLine(data), err
}

// parseCommandLine splits a cmdline file's NUL-terminated arguments. The last one may lack
// its NUL (a process that rewrote its title, a cut read); NULs at the end are not
// arguments (nor, then, empty last arguments).
func parseCommandLine(data []byte) []string {
	data = bytes.TrimRight(data, "\x00")
	if len(data) == 0 {
		return nil
	}
	return strings.Split(string(data), "\x00")
}
