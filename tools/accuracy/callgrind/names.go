package callgrind

import (
	"fmt"
	"strconv"
	"strings"
)

// nameSpace is one id space of name compression ("(7) name" defines, "(7)" refers).
type nameSpace struct {
	kind  string
	byID  map[uint64]string
	limit int
}

func newNameSpace(kind string, limit int) *nameSpace {
	return &nameSpace{kind: kind, byID: map[uint64]string{}, limit: limit}
}

// resolve reads the value of a position specification: "(id) name", "(id)" or "name".
func (ns *nameSpace) resolve(v string) (string, error) {
	if !strings.HasPrefix(v, "(") {
		return v, nil
	}
	end := strings.IndexByte(v, ')')
	if end < 0 {
		return "", fmt.Errorf("%s %q: unclosed id: %w", ns.kind, v, ErrSyntax)
	}
	id, err := strconv.ParseUint(v[1:end], 10, 64)
	if err != nil {
		return "", fmt.Errorf("%s id %q: %w", ns.kind, v[1:end], ErrSyntax)
	}
	rest := v[end+1:]
	if rest == "" {
		name, ok := ns.byID[id]
		if !ok {
			return "", fmt.Errorf("%s id %d: %w", ns.kind, id, ErrUnknownName)
		}
		return name, nil
	}
	if rest[0] != ' ' {
		return "", fmt.Errorf("%s %q: no space after id: %w", ns.kind, v, ErrSyntax)
	}
	name := rest[1:]
	if old, ok := ns.byID[id]; ok {
		if old != name {
			return "", fmt.Errorf("%s id %d redefined from %q to %q: %w", ns.kind, id, old, name, ErrSyntax)
		}
		return old, nil
	}
	if len(ns.byID) >= ns.limit {
		return "", fmt.Errorf("%s ids: more than %d: %w", ns.kind, ns.limit, ErrLimit)
	}
	ns.byID[id] = name
	return name, nil
}
