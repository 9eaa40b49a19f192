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

	found := make(chan int, 1)
	w, err := targets.New(targets.Config{Image: "sleep"}, targets.Handler{
		Added: func(pid int) {
			if pid == cmd.Process.Pid {
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
	fmt.Println("found the sleep:", <-found == cmd.Process.Pid)
	// Output: found the sleep: true
}
