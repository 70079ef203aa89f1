package devenv

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pidGone tells whether pid no longer runs (absent, or a zombie nobody reaps: in a container
// the init process may not reap reparented children).
func pidGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH)
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// eventually polls cond every 50 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readPid waits for a shell script to write a pid into file.
func readPid(t *testing.T, file string) int {
	t.Helper()
	var pid int
	eventually(t, 10*time.Second, "child pid written to "+file, func() bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

func startShell(t *testing.T, name, script string) *Process {
	t.Helper()
	p, err := newProcess(name, t.TempDir(), []string{"sh", "-c", script}, []string{"DEVENV_TEST=1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.start(true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

func TestProcess(t *testing.T) {
	t.Run("stop ends the process and the children in its group", func(t *testing.T) {
		dir := t.TempDir()
		child := filepath.Join(dir, "child.pid")
		p := startShell(t, "parent", "sleep 300 & echo $! > "+child+"; wait")
		leader, kid := p.Pid(), readPid(t, child)
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "leader and child gone", func() bool { return pidGone(leader) && pidGone(kid) })
		if p.Running() {
			t.Error("Running() is true after Stop")
		}
	})

	t.Run("stop kills a process that ignores SIGTERM after the grace period", func(t *testing.T) {
		p := startShell(t, "stubborn", "trap '' TERM; while :; do sleep 0.1; done")
		p.grace = 300 * time.Millisecond
		time.Sleep(100 * time.Millisecond) // let the shell install its trap
		began := time.Now()
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took < p.grace {
			t.Errorf("Stop returned after %s, before the grace period %s: SIGTERM was not ignored?", took, p.grace)
		}
		if !pidGone(p.Pid()) {
			t.Errorf("pid %d still runs after Stop", p.Pid())
		}
	})

	t.Run("kill ends the process at once and records how it ended", func(t *testing.T) {
		p := startShell(t, "victim", "sleep 300")
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		if p.ExitErr() == nil {
			t.Error("ExitErr is nil after SIGKILL, want the signal")
		}
	})

	t.Run("restart runs the program again with a new pid and appends to its log", func(t *testing.T) {
		p := startShell(t, "phoenix", `echo "run $DEVENV_TEST"; sleep 300`)
		first := p.Pid()
		eventually(t, 5*time.Second, "first run logged", func() bool { return strings.Contains(tailFile(p.LogPath(), 10), "run 1") })
		if err := p.Restart(); err != nil {
			t.Fatal(err)
		}
		if p.Pid() == first || !p.Running() {
			t.Fatalf("after Restart: pid %d (was %d), running %v", p.Pid(), first, p.Running())
		}
		eventually(t, 5*time.Second, "second run logged", func() bool {
			return strings.Count(tailFile(p.LogPath(), 10), "run 1") == 2
		})
		if !pidGone(first) {
			t.Errorf("first run %d still alive after Restart", first)
		}
	})

	t.Run("a process cannot be started twice", func(t *testing.T) {
		p := startShell(t, "once", "sleep 300")
		if err := p.start(false); err == nil {
			t.Error("second start of a running process succeeded")
		}
	})

	t.Run("stopping a process that already exited is fine", func(t *testing.T) {
		p := startShell(t, "short", "exit 0")
		<-p.Exited()
		if err := p.Stop(); err != nil {
			t.Errorf("Stop after exit: %v", err)
		}
		if err := p.ExitErr(); err != nil {
			t.Errorf("ExitErr after a clean exit: %v", err)
		}
	})

	t.Run("names with a path separator are refused", func(t *testing.T) {
		if _, err := newProcess("a/b", t.TempDir(), []string{"true"}, nil); err == nil {
			t.Error("newProcess accepted a name with a slash")
		}
	})

	t.Run("a missing program is an error naming the process", func(t *testing.T) {
		_, err := newProcess("ghost", t.TempDir(), []string{"/nonexistent/ghost-binary"}, nil)
		if err == nil || !strings.Contains(err.Error(), "ghost") {
			t.Errorf("error = %v, want one naming the process", err)
		}
	})
}

func TestWaitFor(t *testing.T) {
	t.Run("a part that exits while starting fails fast with its name and last log lines", func(t *testing.T) {
		p := startShell(t, "crasher", "echo line-one; echo 'fatal: port in use'; exit 3")
		began := time.Now()
		err := waitFor(context.Background(), p, "crasher ready", time.Minute, func(context.Context) error { return errors.New("not yet") })
		if err == nil {
			t.Fatal("waitFor succeeded for a process that exited")
		}
		if time.Since(began) > 30*time.Second {
			t.Errorf("waitFor took %s: did not notice the exit", time.Since(began))
		}
		msg := partError(p, err).Error()
		for _, want := range []string{"crasher:", "exited", "fatal: port in use", p.LogPath()} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q lacks %q", msg, want)
			}
		}
	})

	t.Run("a check that never passes times out with its last error", func(t *testing.T) {
		err := waitFor(context.Background(), nil, "the impossible", 300*time.Millisecond, func(context.Context) error { return errors.New("still no") })
		if err == nil || !strings.Contains(err.Error(), "the impossible not reached within 300ms") || !strings.Contains(err.Error(), "still no") {
			t.Errorf("error = %v", err)
		}
	})

	t.Run("a check that passes after a few tries returns nil", func(t *testing.T) {
		n := 0
		err := waitFor(context.Background(), nil, "third time", 10*time.Second, func(context.Context) error {
			if n++; n < 3 {
				return errors.New("not yet")
			}
			return nil
		})
		if err != nil || n != 3 {
			t.Errorf("err = %v after %d checks, want nil after 3", err, n)
		}
	})
}

func TestTailFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	var b strings.Builder
	for i := range 100 {
		b.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		path string
		n    int
		want string
	}{
		{"the last lines of a long file are returned in order", path, 3, "line 97\nline 98\nline 99"},
		{"a missing file says there is no log", filepath.Join(t.TempDir(), "none.log"), 3, "(no log:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := tailFile(c.path, c.n); !strings.HasPrefix(got, c.want) {
				t.Errorf("tailFile = %q, want prefix %q", got, c.want)
			}
		})
	}
}

func TestWaitForPermanent(t *testing.T) {
	t.Run("a permanent failure stops the wait at once with its cause", func(t *testing.T) {
		n := 0
		began := time.Now()
		err := waitFor(context.Background(), nil, "valid object", time.Minute, func(context.Context) error {
			n++
			return permanent(errors.New("spec.description: Too long"))
		})
		if err == nil || n != 1 || time.Since(began) > 10*time.Second || !strings.Contains(err.Error(), "Too long") {
			t.Errorf("err = %v after %d checks and %s", err, n, time.Since(began))
		}
	})
	t.Run("a timeout reports the last meaningful error, not the deadline cutting the last check", func(t *testing.T) {
		err := waitFor(context.Background(), nil, "slow thing", 400*time.Millisecond, func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(150 * time.Millisecond):
				return errors.New("server said no")
			}
		})
		if err == nil || !strings.Contains(err.Error(), "server said no") {
			t.Errorf("err = %v, want the server's answer", err)
		}
	})
}

func TestRunStep(t *testing.T) {
	newEnv := func(t *testing.T) *Env {
		return &Env{opts: Options{Dir: t.TempDir()}, byName: map[string]*Process{}}
	}
	// flaky launches a part that fails like a server whose port was taken, until the given try.
	flaky := func(e *Env, succeedOn int, tries *int) func(context.Context) error {
		return func(ctx context.Context) error {
			*tries++
			script := "echo 'listen tcp 127.0.0.1:4000: bind: address already in use'; exit 1"
			if *tries >= succeedOn {
				script = "sleep 300"
			}
			p, err := e.launch("server", []string{"sh", "-c", script})
			if err != nil {
				return err
			}
			if *tries >= succeedOn {
				return nil
			}
			<-p.Exited()
			return partError(p, errors.New("exited"))
		}
	}

	t.Run("a part whose port was taken is started again with a fresh try", func(t *testing.T) {
		e := newEnv(t)
		defer e.Stop()
		tries := 0
		if err := e.runStep(context.Background(), "server", flaky(e, 2, &tries)); err != nil {
			t.Fatalf("runStep: %v", err)
		}
		if tries != 2 || len(e.Processes()) != 1 || !e.Process("server").Running() {
			t.Errorf("tries %d, %d processes registered, want 2 tries and the one running part", tries, len(e.Processes()))
		}
	})

	t.Run("a part whose port is always taken fails after three tries, naming the cause", func(t *testing.T) {
		e := newEnv(t)
		defer e.Stop()
		tries := 0
		err := e.runStep(context.Background(), "server", flaky(e, 100, &tries))
		if err == nil || tries != maxPortAttempts || !errors.Is(err, errPortInUse) || !strings.Contains(err.Error(), "address already in use") {
			t.Errorf("err = %v after %d tries", err, tries)
		}
	})

	t.Run("any other failure is not retried", func(t *testing.T) {
		e := newEnv(t)
		tries := 0
		err := e.runStep(context.Background(), "server", func(context.Context) error { tries++; return errors.New("bad flag") })
		if err == nil || tries != 1 {
			t.Errorf("err = %v after %d tries, want one try", err, tries)
		}
	})
}

func TestStartProcess(t *testing.T) {
	dir := t.TempDir()
	e := &Env{opts: Options{Dir: dir}, kubeconfig: filepath.Join(dir, "kubeconfig"), byName: map[string]*Process{}}

	sim, err := e.StartProcess("fleet-sim", []string{"sh", "-c", `echo "kubeconfig=$KUBECONFIG mode=$MODE"; sleep 300`}, []string{"MODE=demo"})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a companion logs into the environment's folder and gets its kubeconfig and environment", func(t *testing.T) {
		want := "kubeconfig=" + filepath.Join(dir, "kubeconfig") + " mode=demo"
		eventually(t, 5*time.Second, "companion output in "+filepath.Join(dir, "fleet-sim.log"), func() bool {
			return sim.LogPath() == filepath.Join(dir, "fleet-sim.log") && strings.Contains(tailFile(sim.LogPath(), 5), want)
		})
	})
	t.Run("a second process of the same name is refused", func(t *testing.T) {
		if _, err := e.StartProcess("fleet-sim", []string{"true"}, nil); err == nil {
			t.Error("duplicate name accepted")
		}
	})
	t.Run("the companion is found by name", func(t *testing.T) {
		if e.Process("fleet-sim") != sim {
			t.Error("Process(fleet-sim) is not the started process")
		}
	})
	t.Run("Stop ends companions and refuses new ones", func(t *testing.T) {
		pid := sim.Pid()
		e.Stop()
		if !pidGone(pid) {
			t.Errorf("companion %d still runs", pid)
		}
		if _, err := e.StartProcess("late", []string{"true"}, nil); err == nil {
			t.Error("StartProcess after Stop succeeded")
		}
	})
}

func TestSupervision(t *testing.T) {
	newEnv := func(t *testing.T) *Env {
		dir := t.TempDir()
		e := &Env{opts: Options{Dir: dir}, kubeconfig: filepath.Join(dir, "kubeconfig"), byName: map[string]*Process{}, started: true}
		t.Cleanup(e.Stop)
		return e
	}
	// failure waits for the environment's first unexpected exit.
	failure := func(t *testing.T, e *Env, within time.Duration) *ExitError {
		t.Helper()
		select {
		case err := <-e.Failed():
			var exit *ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("Failed() delivered %T %v, want an *ExitError", err, err)
			}
			return exit
		case <-time.After(within):
			t.Fatalf("no failure reported within %s", within)
			return nil
		}
	}
	// quiet checks that no failure is reported for a while.
	quiet := func(t *testing.T, e *Env, d time.Duration) {
		t.Helper()
		select {
		case err := <-e.Failed():
			t.Fatalf("failure reported: %v", err)
		case <-time.After(d):
		}
	}

	t.Run("a part that exits on its own is reported with its name, exit status and the last 20 lines of its log", func(t *testing.T) {
		e := newEnv(t)
		began := time.Now()
		if _, err := e.StartProcess("fake-part", []string{"sh", "-c", `for i in $(seq 1 30); do echo "line $i"; done; echo boom; exit 3`}, nil); err != nil {
			t.Fatal(err)
		}
		exit := failure(t, e, 10*time.Second)
		if exit.Name != "fake-part" {
			t.Errorf("name %q, want fake-part", exit.Name)
		}
		var status *exec.ExitError
		if !errors.As(exit, &status) || status.ExitCode() != 3 {
			t.Errorf("exit status %v, want exit code 3", exit.Err)
		}
		lines := strings.Split(exit.Tail, "\n")
		if len(lines) != exitTailLines || lines[len(lines)-1] != "boom" || lines[0] != "line 12" {
			t.Errorf("tail has %d lines from %q to %q, want the last %d (line 12 .. boom)", len(lines), lines[0], lines[len(lines)-1], exitTailLines)
		}
		msg := exit.Error()
		for _, want := range []string{"fake-part exited unexpectedly (exit status 3)", "boom", filepath.Join(e.Dir(), "fake-part.log")} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not say %q", msg, want)
			}
		}
		if took := time.Since(began); took > 5*time.Second {
			t.Errorf("reported %s after the start, want at once", took)
		}
	})

	t.Run("a part that exits with status 0 while nobody asked is reported too", func(t *testing.T) {
		e := newEnv(t)
		if _, err := e.StartProcess("quitter", []string{"sh", "-c", "echo done"}, nil); err != nil {
			t.Fatal(err)
		}
		exit := failure(t, e, 10*time.Second)
		if exit.Name != "quitter" || exit.Err != nil || !strings.Contains(exit.Error(), "exit status 0") {
			t.Errorf("got %v (err %v), want quitter with exit status 0", exit, exit.Err)
		}
	})

	t.Run("a part launched by the environment itself is supervised the same way", func(t *testing.T) {
		e := newEnv(t)
		if _, err := e.launch(PartKwok, []string{"sh", "-c", "echo 'kwok: cannot reach the API server'; exit 1"}); err != nil {
			t.Fatal(err)
		}
		if exit := failure(t, e, 10*time.Second); exit.Name != PartKwok || !strings.Contains(exit.Tail, "cannot reach") {
			t.Errorf("got %v, want kwok with its log", exit)
		}
	})

	t.Run("stopping, killing or restarting a part is not a failure", func(t *testing.T) {
		e := newEnv(t)
		stopped, err := e.StartProcess("stopped", []string{"sleep", "300"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		killed, err := e.StartProcess("killed", []string{"sleep", "300"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		restarted, err := e.StartProcess("restarted", []string{"sleep", "300"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := stopped.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := killed.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := restarted.Restart(); err != nil {
			t.Fatal(err)
		}
		quiet(t, e, time.Second)

		// The restarted run is supervised again: its crash is reported.
		if err := syscall.Kill(restarted.Pid(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if exit := failure(t, e, 10*time.Second); exit.Name != "restarted" || !strings.Contains(exit.Error(), "signal: killed") {
			t.Errorf("got %v, want the restarted part killed by a signal", exit)
		}
	})

	t.Run("parts ending because the environment stops are not failures", func(t *testing.T) {
		e := newEnv(t)
		if _, err := e.StartProcess("worker", []string{"sleep", "300"}, nil); err != nil {
			t.Fatal(err)
		}
		e.Stop()
		quiet(t, e, 500*time.Millisecond)
	})

	t.Run("exits before the environment has started are left to the start steps", func(t *testing.T) {
		e := newEnv(t)
		e.started = false
		p, err := e.launch("server", []string{"sh", "-c", "exit 1"})
		if err != nil {
			t.Fatal(err)
		}
		<-p.Exited()
		quiet(t, e, 500*time.Millisecond)
	})

	t.Run("of several failures only the first is delivered", func(t *testing.T) {
		e := newEnv(t)
		for _, name := range []string{"first", "second"} {
			p, err := e.StartProcess(name, []string{"sh", "-c", "exit 4"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			<-p.Exited()
		}
		if exit := failure(t, e, 10*time.Second); exit.Name != "first" {
			t.Errorf("got %s, want first", exit.Name)
		}
		quiet(t, e, 500*time.Millisecond)
	})
}

func TestWaitServing(t *testing.T) {
	dir := t.TempDir()
	e := &Env{opts: Options{Dir: dir}, kubeconfig: filepath.Join(dir, "kubeconfig"), byName: map[string]*Process{}, started: true}
	t.Cleanup(e.Stop)
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/healthz"

	t.Run("a companion that exits before it serves fails the wait at once with its own error", func(t *testing.T) {
		p, err := e.StartProcess("fleet-sim", []string{"sh", "-c", `sleep 0.2; echo 'Invalid configuration: opening trace: open /nowhere.csv: no such file or directory'; exit 2`}, nil)
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		err = WaitServing(context.Background(), p, url, time.Minute)
		var exit *ExitError
		if !errors.As(err, &exit) || exit.Name != "fleet-sim" || !strings.Contains(err.Error(), "exit status 2") || !strings.Contains(err.Error(), "opening trace: open /nowhere.csv") {
			t.Fatalf("err = %v, want the simulator's exit with its log", err)
		}
		if took := time.Since(began); took > 10*time.Second {
			t.Errorf("failed after %s, want at once (the timeout is a minute)", took)
		}
	})

	t.Run("a companion that never serves fails the wait at the timeout with its log", func(t *testing.T) {
		p, err := e.StartProcess("silent", []string{"sh", "-c", "echo still loading; sleep 300"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = WaitServing(context.Background(), p, url, 500*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "silent") || !strings.Contains(err.Error(), "still loading") || !strings.Contains(err.Error(), "not reached within") {
			t.Errorf("err = %v, want a timeout naming the companion and its log", err)
		}
	})
}
