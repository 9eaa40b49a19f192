package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// maxConfigBytes bounds a --config file.
const maxConfigBytes = 1 << 20

// configEntry is one "key = value" line of a config file.
type configEntry struct {
	line       int
	key, value string
}

// registerConfigFlag adds --config to fs and returns where its value goes.
func registerConfigFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "read flags from `FILE`: a line per flag, name = value (the flag's name, no dashes; # starts a comment; a list flag's name may repeat; booleans true or false); a flag on the command line wins over the file's (see Config file below)")
}

// applyConfigFile sets the flags of fs that the file at path names, but those the command
// line set (fs.Parse has run): a flag given there wins, and a list flag's values given there
// replace the file's. Keys are flag names; a key that names no flag is an error naming
// the closest one. It returns, as log attributes, who else may change the file
// (configUnsafe), or nil.
func applyConfigFile(fs *flag.FlagSet, path string) ([]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	defer f.Close()
	unsafe := configUnsafe(f)
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("--config %s: larger than %d bytes", path, maxConfigBytes)
	}
	entries, err := parseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("--config %s:%w", path, err)
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	for _, e := range entries {
		fl := fs.Lookup(e.key)
		switch {
		case e.key == "config":
			return nil, fmt.Errorf("--config %s:%d: config: a config file cannot name another", path, e.line)
		case fl == nil:
			return nil, fmt.Errorf("--config %s:%d: unknown key %q (the closest flag is %q)", path, e.line, e.key, closestFlag(fs, e.key))
		case onCommandLine[e.key]:
			continue
		}
		if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() && e.value != "true" && e.value != "false" {
			return nil, fmt.Errorf("--config %s:%d: %s = %q: want true or false", path, e.line, e.key, e.value)
		}
		if err := fs.Set(e.key, e.value); err != nil {
			return nil, fmt.Errorf("--config %s:%d: %s = %q: %w", path, e.line, e.key, e.value, err)
		}
	}
	return unsafe, nil
}

// configUnsafe returns, as log attributes, why users other than profd's (and root) may
// change the open config file f: it is theirs, or its group or everyone may write it. Nil
// when none may.
func configUnsafe(f *os.File) []any {
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	mode := st.Mode().Perm()
	if sys.Uid == 0 || int(sys.Uid) == os.Geteuid() {
		if mode&0o022 == 0 {
			return nil
		}
	}
	return []any{"config", f.Name(), "owner_uid", sys.Uid, "mode", fmt.Sprintf("%#o", mode)}
}

// parseConfig reads a config file's lines: "key = value", blank lines and comments (from
// a # that starts a line or follows a space). A value is taken as written, spaces inside
// it kept, or Go-quoted ("...") to hold a " #" or leading spaces. An error starts with the
// line's number.
func parseConfig(data []byte) ([]configEntry, error) {
	text := strings.TrimPrefix(string(data), "\uFEFF")
	var out []configEntry
	for n := 1; text != ""; n++ {
		var line string
		line, text, _ = strings.Cut(text, "\n")
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" || strings.ContainsAny(key, " \t#\"") {
			return nil, fmt.Errorf("%d: %q: want key = value", n, line)
		}
		value = strings.TrimSpace(value)
		if strings.HasPrefix(value, `"`) {
			quoted, err := strconv.QuotedPrefix(value)
			var rest string
			if err == nil {
				rest = strings.TrimSpace(value[len(quoted):])
				value, err = strconv.Unquote(quoted)
			}
			if err == nil && rest != "" && rest[0] != '#' {
				err = errors.New("text after the quoted value")
			}
			if err != nil {
				return nil, fmt.Errorf("%d: %s: bad quoted value: %v", n, key, err)
			}
		} else if i := commentStart(value); i >= 0 {
			value = strings.TrimSpace(value[:i])
		}
		out = append(out, configEntry{line: n, key: key, value: value})
	}
	return out, nil
}

// commentStart is the index of the first # that follows a space or tab in s, -1 when none.
func commentStart(s string) int {
	for i := 1; i < len(s); i++ {
		if s[i] == '#' && (s[i-1] == ' ' || s[i-1] == '\t') {
			return i
		}
	}
	return -1
}

// closestFlag is the name of fs's flag fewest edits away from key.
func closestFlag(fs *flag.FlagSet, key string) string {
	best, bestDist := "", -1
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(key, f.Name); bestDist < 0 || d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance between a and b, by bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
