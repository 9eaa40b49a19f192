package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/profd/profd/internal/outfile"
)

// unsentName is the file of the interval directory that lists the intervals the export
// dropped unsent and has not sent again: the next profd with the same --out sends them.
// It is written while profd runs, with the intervals queued and not sent yet too (so a
// killed profd leaves a list a second old), and at the stop, when it holds what the stop
// left unsent, not those the endpoint may have taken.
const unsentName = ".export-unsent"

// unsentHeader is the list's first line; a line per interval follows: its capture file's
// name in the directory, the file's size as written and capturedWhere's digest of it, tab
// between.
const unsentHeader = "profd export-unsent 1"

// readUnsent reads dir's list of intervals left unsent, as laterSources, oldest first, at
// most maxLater; nothing when there is none. The list is profd's own: one another user could
// have written (not profd's user's, or writable by others) is refused, since it names the
// files profd reads and sends.
func readUnsent(dir string) ([]string, error) {
	f, err := os.OpenFile(filepath.Join(dir, unsentName), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st, ok := info.Sys().(*syscall.Stat_t); !info.Mode().IsRegular() || !ok || int(st.Uid) != os.Geteuid() ||
		info.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("%s is not a file only profd's user may write (%v): not read", f.Name(), info.Mode())
	}
	sc := bufio.NewScanner(io.LimitReader(f, maxLater*unsentLineMax))
	if !sc.Scan() || sc.Text() != unsentHeader {
		return nil, fmt.Errorf("%s does not begin with %q: not read", f.Name(), unsentHeader)
	}
	var sources []string
	for sc.Scan() && len(sources) < maxLater {
		if s, ok := parseUnsent(dir, sc.Text()); ok {
			sources = append(sources, s)
		}
	}
	return sources, sc.Err()
}

// warnUnsentLeft warns, for a run without export, when dir holds the list of intervals an
// earlier run left unsent: they stay unsent until a run exports.
func warnUnsentLeft(dir string, logger *slog.Logger) {
	if _, err := os.Lstat(filepath.Join(dir, unsentName)); err == nil {
		logger.Warn("profd: an earlier run left intervals unsent; without --otlp-endpoint they stay so, listed for a run that exports (remove the list to forget them)",
			"list", filepath.Join(dir, unsentName))
	}
}

// unsentLineMax bounds a line of the list: a file name, a size and a digest.
const unsentLineMax = 512

// parseUnsent is the laterSource of one line of dir's list; false when the line is not one
// profd writes.
func parseUnsent(dir, line string) (string, bool) {
	name, rest, _ := strings.Cut(line, "\t")
	n, where, _ := strings.Cut(rest, "\t")
	size, err := strconv.ParseInt(n, 10, 64)
	if err != nil || size <= 0 || name == "" || name != filepath.Base(name) || name == "." || name == ".." ||
		strings.ContainsRune(name, 0) || !isDigest(where) {
		return "", false
	}
	return joinSource(filepath.Join(dir, name), size, where), true
}

// isDigest reports whether s is a SHA-256 digest in lower-case hex, as capturedWhere writes.
func isDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// writeUnsent replaces dir's list with sources (those of files in dir), or removes it when
// there are none.
func writeUnsent(dir string, sources []string) error {
	path := filepath.Join(dir, unsentName)
	var lines []string
	for _, s := range sources {
		file, size, where := splitSource(s)
		if filepath.Dir(file) == filepath.Clean(dir) {
			lines = append(lines, fmt.Sprintf("%s\t%d\t%s\n", filepath.Base(file), size, where))
		}
	}
	if len(lines) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return outfile.Write(path, 0o600, func(w io.Writer) error {
		if _, err := io.WriteString(w, unsentHeader+"\n"); err != nil {
			return err
		}
		for _, l := range lines {
			if _, err := io.WriteString(w, l); err != nil {
				return err
			}
		}
		return nil
	})
}
