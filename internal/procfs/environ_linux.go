package procfs

import (
	"bytes"
	"errors"
	"fmt"
)

// ErrNoEnviron: a process's environment reads empty. Either it was started without one, or
// it is in the middle of an exec: from the moment its new executable shows in /proc until
// the new program's environment is in place, /proc/PID/environ reads empty. Ask again later.
var ErrNoEnviron = errors.New("procfs: empty environment")

// Environ returns the values of the named variables in pid's initial environment (what it
// was started or last exec'd with; later setenv calls are not seen). A variable set twice
// takes its first value, as getenv does. Only the first bound's worth of the environment is
// read; a larger one yields what was found and an error wrapping ErrTooLarge; an empty one,
// an error wrapping ErrNoEnviron.
func Environ(pid uint32, names ...string) (map[string]string, error) {
	data, err := readBounded(Path(pid, "environ"), environBytes)
	if data == nil {
		return nil, fmt.Errorf("procfs: pid %d: %w", pid, err)
	}
	if len(data) == 0 && err == nil {
		return map[string]string{}, fmt.Errorf("procfs: pid %d: %w", pid, ErrNoEnviron)
	}
	return parseEnviron(data, names), err
}

func parseEnviron(data []byte, names []string) map[string]string {
	out := make(map[string]string, len(names))
	for len(data) > 0 && len(out) < len(names) {
		entry := data
		if i := bytes.IndexByte(data, 0); i >= 0 {
			entry, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		key, value, ok := bytes.Cut(entry, []byte("="))
		if !ok {
			continue
		}
		for _, n := range names {
			if string(key) == n {
				if _, seen := out[n]; !seen {
					out[n] = string(value)
				}
			}
		}
	}
	return out
}
