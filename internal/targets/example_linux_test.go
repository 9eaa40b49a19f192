package targets_test

import (
	"context"
	"fmt"
	"os/exec"

	"github.com/profd/profd/internal/targets"
)

func Example() {
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	found := make(chan uint32, 1)
	w, err := targets.New(targets.Config{Images: []string{"sleep"}}, targets.Handler{
		Added: func(pid uint32) {
			if pid == uint32(cmd.Process.Pid) {
				found <- pid
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	w.Start(context.Background())
	defer w.Close()
	fmt.Println("found the sleep:", <-found == uint32(cmd.Process.Pid))
	// Output: found the sleep: true
}
