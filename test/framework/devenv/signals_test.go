package devenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A helper process for TestStopOnSignals: it starts a part, prints its pid and waits for a signal.
func init() {
	if os.Getenv("DEVENV_SIGNAL_HELPER") != "1" {
		return
	}
	e := &Env{opts: Options{Dir: os.Getenv("DEVENV_SIGNAL_DIR")}, byName: map[string]*Process{}}
	p, err := e.launch("sleeper", []string{"sh", "-c", "sleep 300 & echo $! > child.pid; wait"})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	e.StopOnSignals()
	fmt.Println("pid", p.Pid())
	time.Sleep(time.Minute)
	os.Exit(4) // not reached when the signal arrives
}

func TestStopOnSignals(t *testing.T) {
	t.Run("Ctrl-C stops the parts and ends the program by that signal", func(t *testing.T) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		dir := t.TempDir()
		cmd.Env = append(os.Environ(), "DEVENV_SIGNAL_HELPER=1", "DEVENV_SIGNAL_DIR="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "pid ") {
			_ = cmd.Process.Kill()
			t.Fatalf("helper said %q, %v", line, err)
		}
		part, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
		// The part's own child: only a stop of the whole group ends it (Pdeathsig reaches
		// the part alone).
		child := readPid(t, dir+"/child.pid")
		if pidGone(part) || pidGone(child) {
			t.Fatalf("part %d or its child %d not running before the signal", part, child)
		}
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("helper ended with %v, want a signal", err)
		}
		if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Errorf("helper ended with %v, want death by SIGINT", err)
		}
		eventually(t, 5*time.Second, "part and its child gone", func() bool { return pidGone(part) && pidGone(child) })
	})
}
