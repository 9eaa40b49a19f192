package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// PythonPath finds a CPython 3.minor or later, up to 3.13, on PATH or among pyenv's
// versions (~/.pyenv/versions/3.X.Y/bin): the lowest minor found, the newest of its patch
// releases; "" when there is none.
func PythonPath(minor int) string {
	home, _ := os.UserHomeDir()
	for m := minor; m <= 13; m++ {
		name := fmt.Sprintf("python3.%d", m)
		if p, err := exec.LookPath(name); err == nil && exec.Command(p, "-c", "").Run() == nil {
			return p
		}
		if found, _ := filepath.Glob(filepath.Join(home, fmt.Sprintf(".pyenv/versions/3.%d.*/bin", m), name)); len(found) > 0 {
			return found[len(found)-1]
		}
	}
	return ""
}

// Python needs a CPython 3.minor or later (PythonPath).
func Python(minor int) Need {
	return func() string {
		if PythonPath(minor) == "" {
			return fmt.Sprintf("Python 3.%d or later (python3.%d on PATH or under ~/.pyenv/versions)", minor, minor)
		}
		return ""
	}
}
