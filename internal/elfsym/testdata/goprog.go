// goprog is a Go program whose builds, with and without their symbols, the tests of Go's
// function table compare.
package main

import (
	"fmt"
	"os"
	"sort"
)

type byLen []string

func (b byLen) Len() int           { return len(b) }
func (b byLen) Less(i, j int) bool { return len(b[i]) < len(b[j]) }
func (b byLen) Swap(i, j int)      { b[i], b[j] = b[j], b[i] }

func main() {
	args := byLen(os.Args)
	sort.Sort(args)
	fmt.Println(args)
}
