package fifo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/symsource/fifo"
)

func Example() {
	tmp, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(tmp)
	loads := make(chan *jitmap.CodeLoad, 1)
	srv, err := fifo.Start(context.Background(), fifo.Config{
		Dir: filepath.Join(tmp, "profd"),
		Handler: func(b jitmap.Batch) {
			for _, ev := range b.Events {
				if l, ok := ev.(*jitmap.CodeLoad); ok {
					loads <- l
				}
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	pid := uint32(os.Getpid())
	if err := srv.AddTarget(pid, fifo.Owner{UID: os.Geteuid(), GID: os.Getegid()}); err != nil {
		fmt.Println(err)
		return
	}

	// A JIT (here this process) writes a perf-map line into its FIFO.
	w, err := os.OpenFile(srv.FIFOPath(pid), os.O_WRONLY, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Fprintln(w, "7f0000001000 40 jitted_main")
	w.Close()

	select {
	case l := <-loads:
		fmt.Printf("%s at %#x, %d bytes, from the %v\n", l.Object.Name, l.Object.Addr, l.Object.Size, l.Object.Source)
	case <-time.After(5 * time.Second):
		fmt.Println("nothing arrived")
	}
	// Output: jitted_main at 0x7f0000001000, 64 bytes, from the fifo
}
